// otlp_receiver.js MODULES OUT MODE - an OTLP/HTTP trace receiver for the
// tests: decodes each POST to /v1/traces with the OpenTelemetry protobuf
// definitions (the generated root of @opentelemetry/otlp-transformer under
// MODULES) and appends it to OUT as one JSON line (ids as hex).  MODE "ok"
// answers 200; "slow" answers after 3 s.  Prints "port N" when listening.
"use strict";
const http = require("http");
const fs = require("fs");
const path = require("path");
const [modules, out, mode] = process.argv.slice(2);
const root = require(path.join(modules, "@opentelemetry/otlp-transformer/build/src/generated/root"));
const Req = root.opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest;
const Resp = root.opentelemetry.proto.collector.trace.v1.ExportTraceServiceResponse;

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
            if (req.method !== "POST" || req.url !== "/v1/traces" ||
                req.headers["content-type"] !== "application/x-protobuf") {
                res.writeHead(400); res.end(); return;
            }
            let msg;
            try {
                msg = Req.toObject(Req.decode(Buffer.concat(chunks)), { longs: String, bytes: String, enums: String, defaults: false });
            } catch (e) {
                fs.appendFileSync(out, JSON.stringify({ error: String(e) }) + "\n");
                res.writeHead(400); res.end(); return;
            }
            fs.appendFileSync(out, JSON.stringify(hexIds(msg)) + "\n");
            res.writeHead(200, { "Content-Type": "application/x-protobuf" });
            res.end(Buffer.from(Resp.encode(Resp.create({})).finish()));
        };
        if (mode === "slow") setTimeout(answer, 3000); else answer();
    });
});
server.listen(0, "127.0.0.1", () => console.log("port " + server.address().port));
