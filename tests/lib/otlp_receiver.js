// otlp_receiver.js MODULES OUT MODE - an OTLP/HTTP trace receiver for the
// tests: decodes each POST to /v1/traces with the OpenTelemetry protobuf
// definitions (the generated root of @opentelemetry/otlp-transformer under
// MODULES) and appends it to OUT as one JSON line (ids as hex), with the
// request's format and headers under "_format" and "_headers".  Bodies are
// OTLP protobuf (application/x-protobuf) or OTLP/JSON (application/json: the
// protobuf JSON mapping with ids in hex, read through the same definitions),
// either of them gzipped (Content-Encoding: gzip).  MODE "ok" answers 200;
// "slow" answers after 3 s.  Prints "port N" when listening.
"use strict";
const http = require("http");
const zlib = require("zlib");
const fs = require("fs");
const path = require("path");
const [modules, out, mode] = process.argv.slice(2);
const root = require(path.join(modules, "@opentelemetry/otlp-transformer/build/src/generated/root"));
const Req = root.opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest;
const Resp = root.opentelemetry.proto.collector.trace.v1.ExportTraceServiceResponse;

// OTLP/JSON writes trace and span ids in hex where the protobuf JSON mapping
// has base64: back to bytes before the definitions read the object.
function idBytes(o) {
    if (Array.isArray(o)) return o.map(idBytes);
    if (o && typeof o === "object") {
        const r = {};
        for (const [k, v] of Object.entries(o)) {
            if (/^(traceId|spanId|parentSpanId)$/.test(k)) {
                if (typeof v !== "string" || !/^([0-9a-f]{2})*$/.test(v)) throw new Error("bad " + k + ": " + v);
                r[k] = Buffer.from(v, "hex");
            } else r[k] = idBytes(v);
        }
        return r;
    }
    return o;
}

function hexIds(o) {
    if (Array.isArray(o)) return o.map(hexIds);
    if (o && typeof o === "object") {
        const r = {};
        for (const [k, v] of Object.entries(o))
            r[k] = /Id$/.test(k) && typeof v === "string" ? Buffer.from(v, "base64").toString("hex") : hexIds(v);
        return r;
    }
    return o;
}

const server = http.createServer((req, res) => {
    const chunks = [];
    req.on("data", (c) => chunks.push(c));
    req.on("end", () => {
        const answer = () => {
            const type = req.headers["content-type"];
            const json = type === "application/json";
            if (req.method !== "POST" || req.url !== "/v1/traces" ||
                (!json && type !== "application/x-protobuf")) {
                res.writeHead(400); res.end(); return;
            }
            let msg;
            try {
                let body = Buffer.concat(chunks);
                const enc = req.headers["content-encoding"];
                if (enc === "gzip") body = zlib.gunzipSync(body);
                else if (enc !== undefined) throw new Error("content-encoding " + enc);
                const m = json ? Req.fromObject(idBytes(JSON.parse(body.toString("utf8")))) : Req.decode(body);
                const err = Req.verify(m);
                if (err) throw new Error(err);
                msg = Req.toObject(m, { longs: String, bytes: String, enums: String, defaults: false });
            } catch (e) {
                fs.appendFileSync(out, JSON.stringify({ error: String(e) }) + "\n");
                res.writeHead(400); res.end(); return;
            }
            const h = req.headers;
            const seen = { _format: json ? "json" : "protobuf",
                _headers: { "content-encoding": h["content-encoding"], authorization: h["authorization"],
                    "x-tenant": h["x-tenant"] } };
            fs.appendFileSync(out, JSON.stringify(Object.assign(seen, hexIds(msg))) + "\n");
            if (json) {
                res.writeHead(200, { "Content-Type": "application/json" });
                res.end("{}");
            } else {
                res.writeHead(200, { "Content-Type": "application/x-protobuf" });
                res.end(Buffer.from(Resp.encode(Resp.create({})).finish()));
            }
        };
        if (mode === "slow") setTimeout(answer, 3000); else answer();
    });
});
server.listen(0, "127.0.0.1", () => console.log("port " + server.address().port));
