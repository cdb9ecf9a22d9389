"""A local OTLP/HTTP trace receiver for the telemetry tests.

Listens on 127.0.0.1 (an ephemeral port, printed as the first line on stdout), accepts
POST /v1/traces with an `application/x-protobuf` body, decodes it with the official
`opentelemetry-proto` messages (ExportTraceServiceRequest) and appends one JSON line
per span to the file named by the first argument. Answers 200 with an empty
ExportTraceServiceResponse, as a collector does.
"""

import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

OUT = sys.argv[1]


def value(v):
    kind = v.WhichOneof("value")
    if kind == "int_value":
        return v.int_value
    if kind in ("string_value", "bool_value", "double_value"):
        return getattr(v, kind)
    return str(v)


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        if self.path != "/v1/traces":
            self.send_error(404)
            return
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        with open(OUT, "a", encoding="utf-8") as out:
            for resource_spans in request.resource_spans:
                resource = {a.key: value(a.value) for a in resource_spans.resource.attributes}
                for scope_spans in resource_spans.scope_spans:
                    for span in scope_spans.spans:
                        out.write(json.dumps({
                            "name": span.name,
                            "trace_id": span.trace_id.hex(),
                            "span_id": span.span_id.hex(),
                            "parent_span_id": span.parent_span_id.hex(),
                            "attributes": {a.key: value(a.value) for a in span.attributes},
                            "status_code": span.status.code,
                            "status_message": span.status.message,
                            "service_name": resource.get("service.name"),
                            "content_type": self.headers.get("Content-Type"),
                            "authorization": self.headers.get("Authorization"),
                        }) + "\n")
        reply = ExportTraceServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, *args):
        pass


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
server.serve_forever()
