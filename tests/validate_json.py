#!/usr/bin/python3
"""validate_json.py - checks JSON documents against one of the schemas in
schemas/, resolving references between them (process-list.schema.json
names control-reply.schema.json's process summary, for instance).

usage: validate_json.py SCHEMA-NAME FILE...   ('-' reads stdin)
exit 0 when every document is valid, 1 when one is not, 2 on bad usage.
"""
import json
import os
import sys

try:
    from jsonschema import Draft202012Validator
except ImportError:  # pragma: no cover - reported, not hidden
    sys.stderr.write("validate_json: python3-jsonschema is missing; run 'make deps'\n")
    sys.exit(2)

SCHEMAS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "schemas")


def load_all():
    docs = {}
    for name in sorted(os.listdir(SCHEMAS)):
        if name.endswith(".schema.json"):
            with open(os.path.join(SCHEMAS, name)) as f:
                doc = json.load(f)
            docs[doc["$id"]] = doc
    return docs


def validator(schema):
    """A validator that resolves references to the other schemas: through
    the referencing library where jsonschema has it (4.18 and later), else
    through the RefResolver store that Debian 12's 4.10 uses."""
    docs = load_all()
    try:
        from referencing import Registry, Resource
    except ImportError:
        from jsonschema import RefResolver
        resolver = RefResolver(schema["$id"], schema, store=docs)
        return Draft202012Validator(schema, resolver=resolver)
    reg = Registry().with_resources((k, Resource.from_contents(v)) for k, v in docs.items())
    return Draft202012Validator(schema, registry=reg)


def main(argv):
    if len(argv) < 3:
        sys.stderr.write(__doc__)
        return 2
    with open(os.path.join(SCHEMAS, argv[1])) as f:
        schema = json.load(f)
    Draft202012Validator.check_schema(schema)
    v = validator(schema)
    bad = 0
    for path in argv[2:]:
        text = sys.stdin.read() if path == "-" else open(path).read()
        try:
            doc = json.loads(text)
        except ValueError as e:
            print("%s: not JSON: %s" % (path, e))
            bad += 1
            continue
        errors = sorted(v.iter_errors(doc), key=lambda e: list(e.path))
        for e in errors[:10]:
            print("%s: %s at %s" % (path, e.message, "/".join(map(str, e.path))))
        bad += bool(errors)
        if not errors:
            print("%s: valid" % path)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
