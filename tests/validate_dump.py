#!/usr/bin/python3
"""validate_dump.py - checks scopecmd JSON thread dumps against
schemas/thread-dump.schema.json (JSON Schema 2020-12) and against the
consistency rules a schema cannot state.

usage: validate_dump.py [--schema FILE] [--pid N] DUMP.json...   ('-' reads stdin)
exit 0 when every dump is valid, 1 when one is not, 2 on bad usage.
"""
import argparse
import json
import os
import sys

try:
    from jsonschema import Draft202012Validator
except ImportError:  # pragma: no cover - reported, not hidden
    sys.stderr.write("validate_dump: python3-jsonschema is missing; run 'make deps'\n")
    sys.exit(2)

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_SCHEMA = os.path.join(HERE, "..", "schemas", "thread-dump.schema.json")


def consistency(doc, pid=None):
    """Yields one message per broken rule: names unique, <root> first, each
    parent an earlier container, each tid once, counts match, owners
    resolve to a tid in the dump."""
    td = doc.get("threadDump", {})
    containers = td.get("threadContainers", [])
    if pid is not None and td.get("processId") != pid:
        yield "processId is %r, expected %d" % (td.get("processId"), pid)
    seen = {}
    tids = {}
    for i, c in enumerate(containers):
        name = c.get("container")
        if i == 0 and name != "<root>":
            yield "first container is %r, not <root>" % name
        if name in seen:
            yield "container name %r used twice (#%d and #%d)" % (name, seen[name], i)
        parent = c.get("parent")
        if i > 0 and parent not in seen:
            yield "container %r names parent %r, which does not come before it" % (name, parent)
        seen[name] = i
        threads = c.get("threads", [])
        if c.get("threadCount") != len(threads):
            yield "container %r says threadCount %r but holds %d threads" % (
                name, c.get("threadCount"), len(threads))
        for t in threads:
            tid = t.get("tid")
            if tid in tids:
                yield "tid %r appears in %r and in %r" % (tid, tids[tid], name)
            tids[tid] = name
    for c in containers:
        owner = c.get("owner")
        if owner is not None and owner not in tids:
            yield "container %r has owner %r, which is no thread of the dump" % (
                c.get("container"), owner)


def check(path, validator, pid):
    try:
        if path == "-":
            doc = json.load(sys.stdin)
        else:
            with open(path, encoding="utf-8") as f:
                doc = json.load(f)
    except (OSError, ValueError) as e:
        return ["cannot read JSON: %s" % e]
    errors = []
    for e in sorted(validator.iter_errors(doc), key=lambda e: list(e.absolute_path)):
        where = "/".join(str(p) for p in e.absolute_path) or "(top)"
        msg = e.message if len(e.message) < 400 else e.message[:400] + "..."
        errors.append("schema: at %s: %s" % (where, msg))
    if not errors:
        errors.extend("consistency: " + m for m in consistency(doc, pid))
    return errors


def main():
    ap = argparse.ArgumentParser(description="validate scopecmd JSON thread dumps")
    ap.add_argument("--schema", default=DEFAULT_SCHEMA)
    ap.add_argument("--pid", type=int, help="expected processId")
    ap.add_argument("dumps", nargs="+")
    args = ap.parse_args()
    with open(args.schema, encoding="utf-8") as f:
        schema = json.load(f)
    Draft202012Validator.check_schema(schema)
    validator = Draft202012Validator(schema)
    bad = 0
    for path in args.dumps:
        errors = check(path, validator, args.pid)
        for m in errors[:50]:
            print("%s: %s" % (path, m), file=sys.stderr)
        if errors:
            bad += 1
        else:
            print("%s: valid" % path)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
