"""OpenTelemetry set-up for the example: console by default, OTLP/HTTP when configured.

The library never configures the SDK or logging; the application does, here. Point the
example at a backend with the standard variables, e.g. for Jaeger or grafana/otel-lgtm::

    OTEL_EXPORTER_OTLP_ENDPOINT=http://localhost:4318 OTEL_SERVICE_NAME=library make run
"""

from __future__ import annotations

import logging
import os

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import (
    ConsoleMetricExporter,
    MetricExporter,
    PeriodicExportingMetricReader,
)
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SpanExporter

_OTLP_VARIABLES = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")


def exporters() -> tuple[SpanExporter, MetricExporter]:
    """OTLP/HTTP exporters if `OTEL_EXPORTER_OTLP_ENDPOINT` (or the traces-only variable) is
    set — they read the standard `OTEL_EXPORTER_OTLP_*` variables — else console ones."""
    if any(os.environ.get(name) for name in _OTLP_VARIABLES):
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        return OTLPSpanExporter(), OTLPMetricExporter()
    return ConsoleSpanExporter(), ConsoleMetricExporter()


def providers() -> tuple[TracerProvider, MeterProvider]:
    """Tracer and meter providers for `McpMiddleware(tracer_provider=..., meter_provider=...)`:
    spans exported in batches (every 0.5 s), metrics every 30 s. Also shows the library's
    INFO records (one per cancelled request) on stderr."""
    show_library_logs()
    resource = Resource.create({"service.name": os.environ.get("OTEL_SERVICE_NAME", "library")})
    span_exporter, metric_exporter = exporters()
    tracer_provider = TracerProvider(resource=resource)
    tracer_provider.add_span_processor(BatchSpanProcessor(span_exporter, schedule_delay_millis=500))
    reader = PeriodicExportingMetricReader(metric_exporter, export_interval_millis=30_000)
    return tracer_provider, MeterProvider(resource=resource, metric_readers=[reader])


def show_library_logs() -> None:
    """Print `mcp_asgi` log records at INFO and above on stderr (once)."""
    library = logging.getLogger("mcp_asgi")
    if library.handlers:
        return
    handler = logging.StreamHandler()
    handler.setFormatter(
        logging.Formatter("%(levelname)s %(name)s: %(message)s [request %(request_id)s]")
    )
    handler.addFilter(_with_request_id)
    library.addHandler(handler)
    library.setLevel(logging.INFO)


def _with_request_id(record: logging.LogRecord) -> bool:
    if not hasattr(record, "request_id"):
        record.request_id = "-"
    return True
