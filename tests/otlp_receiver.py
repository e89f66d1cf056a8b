"""A small OTLP/HTTP trace receiver on loopback: what real kickoff processes export, for tests to read.

Processes under test run with ``OTEL_TRACES_EXPORTER=otlp`` and ``receiver.env()`` (the endpoint and a
short batch delay); the receiver decodes each ``ExportTraceServiceRequest`` (protobuf, gzip or not)
with the OTLP protocol package the exporter itself depends on, and keeps every span as a
``ReceivedSpan``. Subprocesses cannot share the SDK's in-memory exporter with the test process;
this is the same wire a collector (Jaeger, Tempo) reads.
"""

from __future__ import annotations

import gzip
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from tests.waiting import wait_for


@dataclass(frozen=True)
class ReceivedSpan:
    """One exported span: ids in hex ("" for no parent), its name, kind, service and attributes."""

    trace_id: str
    span_id: str
    parent_id: str
    name: str
    kind: int  # OTLP SpanKind: 1 internal, 2 server, 3 client, 4 producer, 5 consumer
    service: str
    attributes: dict[str, Any]
    events: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    links: list[tuple[str, str]] = field(default_factory=list)  # (trace id, span id)
    status_code: int = 0  # 2: error


def _value(any_value: Any) -> Any:
    kind = any_value.WhichOneof("value")
    return None if kind is None else getattr(any_value, kind)


def _attrs(items: Any) -> dict[str, Any]:
    return {kv.key: _value(kv.value) for kv in items}


class Receiver:
    """The spans received so far (thread-safe), and how to wait for some."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._spans: list[ReceivedSpan] = []
        self.url = ""

    def add(self, request: ExportTraceServiceRequest) -> None:
        received = []
        for resource_spans in request.resource_spans:
            service = str(_attrs(resource_spans.resource.attributes).get("service.name", ""))
            for scope_spans in resource_spans.scope_spans:
                for s in scope_spans.spans:
                    received.append(
                        ReceivedSpan(
                            trace_id=s.trace_id.hex(),
                            span_id=s.span_id.hex(),
                            parent_id=s.parent_span_id.hex(),
                            name=s.name,
                            kind=int(s.kind),
                            service=service,
                            attributes=_attrs(s.attributes),
                            events=[(e.name, _attrs(e.attributes)) for e in s.events],
                            links=[(link.trace_id.hex(), link.span_id.hex()) for link in s.links],
                            status_code=int(s.status.code),
                        )
                    )
        with self._lock:
            self._spans.extend(received)

    def spans(self, trace_id: str | None = None) -> list[ReceivedSpan]:
        with self._lock:
            return [s for s in self._spans if trace_id is None or s.trace_id == trace_id]

    def named(self, name: str, trace_id: str | None = None) -> list[ReceivedSpan]:
        return [s for s in self.spans(trace_id) if s.name == name]

    def wait_for_span(
        self, match: Callable[[ReceivedSpan], bool], *, timeout: float = 60.0, what: str = "a span"
    ) -> ReceivedSpan:
        """The first received span ``match`` accepts (waiting for it up to ``timeout`` seconds)."""
        found: list[ReceivedSpan] = []

        def seen() -> bool:
            found[:] = [s for s in self.spans() if match(s)]
            return bool(found)

        wait_for(seen, timeout=timeout, what=what)
        return found[0]

    def env(self) -> dict[str, str]:
        """The OTEL_* settings of a process that exports here (batches every 100 ms)."""
        return {
            "OTEL_TRACES_EXPORTER": "otlp",
            "OTEL_EXPORTER_OTLP_ENDPOINT": self.url,
            "OTEL_BSP_SCHEDULE_DELAY": "100",
        }


@contextmanager
def otlp_receiver() -> Iterator[Receiver]:
    """Serve OTLP/HTTP traces (``POST /v1/traces``) on a free loopback port while inside."""
    receiver = Receiver()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if self.headers.get("Content-Encoding") == "gzip":
                body = gzip.decompress(body)
            if self.path != "/v1/traces":
                self.send_response(404)
                self.end_headers()
                return
            request = ExportTraceServiceRequest()
            request.ParseFromString(body)
            receiver.add(request)
            answer = ExportTraceServiceResponse().SerializeToString()
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, *args: object) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    receiver.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, name="otlp-receiver", daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        server.shutdown()
        server.server_close()
