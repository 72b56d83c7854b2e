"""Read an `otel-export` back with code nobody here wrote.

usage:
  otel_check.py spans BASE_URL TRACE_ID AT_LEAST
      Arize Phoenix's own client (phoenix.client.Client) reads the spans of
      TRACE_ID from the Phoenix at BASE_URL, waiting (up to 180 s) until at
      least AT_LEAST of them are stored: Phoenix inserts what it received
      in the background. Prints them as JSON: name, span_id, parent_id,
      status_code, status_message, attributes, links and the events' names
      and attributes.
  otel_check.py parse FILE
      Parses every line of FILE (OTLP/JSON, one ExportTraceServiceRequest
      per line) strictly with the OpenTelemetry protos
      (google.protobuf.json_format.Parse, which refuses unknown fields and
      wrong types), and checks what the OTLP spec adds to protobuf's JSON
      mapping: trace and span ids are lowercase hex (32 and 16 digits),
      not base64. Prints the spans as JSON.

Exits non-zero on any failure.
"""

import json
import re
import sys
import time

HEX32 = re.compile(r"^[0-9a-f]{32}$")
HEX16 = re.compile(r"^[0-9a-f]{16}$")


def spans(base_url: str, trace_id: str, at_least: int) -> int:
    from phoenix.client import Client

    client = Client(base_url=base_url)
    deadline = time.monotonic() + 180
    found = []
    while True:
        found = client.spans.get_spans(
            project_identifier="default", trace_ids=[trace_id], limit=10000
        )
        if len(found) >= at_least or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    out = []
    for span in found:
        out.append(
            {
                "name": span["name"],
                "span_id": span["context"]["span_id"],
                "trace_id": span["context"]["trace_id"],
                "parent_id": span.get("parent_id"),
                "status_code": span.get("status_code"),
                "status_message": span.get("status_message"),
                "attributes": span.get("attributes") or {},
                "events": [
                    {"name": e.get("name"), "attributes": e.get("attributes") or {}}
                    for e in span.get("events") or []
                ],
            }
        )
    json.dump(out, sys.stdout, sort_keys=True, default=str)
    return 0


def parse(path: str) -> int:
    from google.protobuf import json_format
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    out = []
    with open(path, encoding="utf-8") as f:
        lines = [line for line in f.read().split("\n") if line]
    if not lines:
        raise SystemExit("the file holds no request")
    for number, line in enumerate(lines, 1):
        request = json_format.Parse(line, ExportTraceServiceRequest())
        raw = json.loads(line)
        raw_spans = [
            s
            for rs in raw["resourceSpans"]
            for ss in rs["scopeSpans"]
            for s in ss["spans"]
        ]
        parsed = [
            s for rs in request.resource_spans for ss in rs.scope_spans for s in ss.spans
        ]
        if len(raw_spans) != len(parsed):
            raise SystemExit(f"line {number}: span count differs")
        for raw_span, span in zip(raw_spans, parsed):
            if not HEX32.match(raw_span["traceId"]):
                raise SystemExit(f"line {number}: traceId is not 32 hex digits")
            if not HEX16.match(raw_span["spanId"]):
                raise SystemExit(f"line {number}: spanId is not 16 hex digits")
            parent = raw_span.get("parentSpanId", "")
            if parent and not HEX16.match(parent):
                raise SystemExit(f"line {number}: parentSpanId is not 16 hex digits")
            out.append(
                {
                    "name": span.name,
                    "span_id": raw_span["spanId"],
                    "trace_id": raw_span["traceId"],
                    "parent_id": parent or None,
                    "kind": span.kind,
                    "status_code": span.status.code,
                    "status_message": span.status.message,
                    "start": span.start_time_unix_nano,
                    "end": span.end_time_unix_nano,
                    "attributes": {
                        a.key: json_format.MessageToDict(a.value) for a in span.attributes
                    },
                    "links": [raw_link["spanId"] for raw_link in raw_span.get("links", [])],
                    "events": [
                        {
                            "name": e.name,
                            "attributes": {
                                a.key: json_format.MessageToDict(a.value)
                                for a in e.attributes
                            },
                        }
                        for e in span.events
                    ],
                    "line": number,
                }
            )
    json.dump(out, sys.stdout, sort_keys=True)
    return 0


def main() -> int:
    if len(sys.argv) == 5 and sys.argv[1] == "spans":
        return spans(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    if len(sys.argv) == 3 and sys.argv[1] == "parse":
        return parse(sys.argv[2])
    raise SystemExit(__doc__)


if __name__ == "__main__":
    sys.exit(main())
