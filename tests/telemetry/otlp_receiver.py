"""A tiny OTLP/HTTP receiver on 127.0.0.1 (stdlib `http.server` + `opentelemetry-proto`).

It decodes what an exporter really sends — `ExportTraceServiceRequest` on `/v1/traces`,
`ExportMetricsServiceRequest` on `/v1/metrics`, protobuf, optionally gzip — so a test can
check what a backend such as Jaeger or Tempo would receive::

    with OtlpReceiver() as receiver:
        exporter = OTLPSpanExporter(endpoint=receiver.traces_url)
        ...
        span = receiver.find_span("tools/call slow")
"""

from __future__ import annotations

import gzip
import threading
import zlib
from collections.abc import Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
    ExportMetricsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.metrics.v1.metrics_pb2 import Metric
from opentelemetry.proto.trace.v1.trace_pb2 import Span


def value_of(value: AnyValue) -> Any:
    """The Python value of an OTLP `AnyValue`."""
    kind = value.WhichOneof("value")
    if kind is None:
        return None
    if kind == "array_value":
        return [value_of(v) for v in value.array_value.values]
    if kind == "kvlist_value":
        return attributes_of(value.kvlist_value.values)
    return getattr(value, kind)


def attributes_of(pairs: Iterable[KeyValue]) -> dict[str, Any]:
    """OTLP attributes as a plain dict."""
    return {pair.key: value_of(pair.value) for pair in pairs}


class OtlpReceiver:
    """Collects the spans and metrics exported to it, thread-safely."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._spans: list[tuple[dict[str, Any], Span]] = []
        self._metrics: list[Metric] = []
        self.requests = 0
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="otlp-receiver", daemon=True
        )

    @property
    def endpoint(self) -> str:
        """The base URL, as `OTEL_EXPORTER_OTLP_ENDPOINT` would be set."""
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def traces_url(self) -> str:
        """The full URL of the traces endpoint."""
        return self.endpoint + "/v1/traces"

    @property
    def metrics_url(self) -> str:
        """The full URL of the metrics endpoint."""
        return self.endpoint + "/v1/metrics"

    def __enter__(self) -> OtlpReceiver:
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def spans(self) -> list[tuple[dict[str, Any], Span]]:
        """Every span received so far, with its resource attributes."""
        with self._lock:
            return list(self._spans)

    def find_span(self, name: str) -> Span | None:
        """The first span received with this name, or None."""
        return next((span for _, span in self.spans() if span.name == name), None)

    def metrics(self) -> list[Metric]:
        """Every metric received so far (one entry per export)."""
        with self._lock:
            return list(self._metrics)

    def receive(self, path: str, body: bytes) -> bytes | None:
        """Decode one export; the protobuf response body, or None for an unknown path."""
        if path == "/v1/traces":
            traces = ExportTraceServiceRequest.FromString(body)
            with self._lock:
                self.requests += 1
                for resource_spans in traces.resource_spans:
                    resource = attributes_of(resource_spans.resource.attributes)
                    for scope_spans in resource_spans.scope_spans:
                        self._spans.extend((resource, span) for span in scope_spans.spans)
            reply: bytes = ExportTraceServiceResponse().SerializeToString()
            return reply
        if path == "/v1/metrics":
            metrics = ExportMetricsServiceRequest.FromString(body)
            with self._lock:
                self.requests += 1
                for resource_metrics in metrics.resource_metrics:
                    for scope_metrics in resource_metrics.scope_metrics:
                        self._metrics.extend(scope_metrics.metrics)
            reply = ExportMetricsServiceResponse().SerializeToString()
            return reply
        return None


def _handler(receiver: OtlpReceiver) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("content-length") or 0))
            encoding = (self.headers.get("content-encoding") or "").lower()
            if encoding == "gzip":
                body = gzip.decompress(body)
            elif encoding == "deflate":
                body = zlib.decompress(body)
            reply = receiver.receive(self.path, body)
            self.send_response(200 if reply is not None else 404)
            self.send_header("content-type", "application/x-protobuf")
            self.send_header("content-length", str(len(reply or b"")))
            self.end_headers()
            self.wfile.write(reply or b"")

        def log_message(self, format: str, *args: Any) -> None:
            """Quiet: no access log on stderr."""

    return Handler
