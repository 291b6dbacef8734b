"""OpenTelemetry set-up for the example: console by default, OTLP/HTTP when configured.

The library never configures the SDK; the application does, here.
"""

from __future__ import annotations

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


def providers() -> tuple[TracerProvider, MeterProvider]:
    """Tracer and meter providers exporting to OTLP if `OTEL_EXPORTER_OTLP_ENDPOINT` is
    set, else to the console (spans as they end, metrics every 30 s)."""
    resource = Resource.create({"service.name": os.environ.get("OTEL_SERVICE_NAME", "library")})
    span_exporter: SpanExporter
    metric_exporter: MetricExporter
    if os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT"):
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        span_exporter, metric_exporter = OTLPSpanExporter(), OTLPMetricExporter()
    else:
        span_exporter, metric_exporter = ConsoleSpanExporter(), ConsoleMetricExporter()
    tracer_provider = TracerProvider(resource=resource)
    tracer_provider.add_span_processor(BatchSpanProcessor(span_exporter, schedule_delay_millis=500))
    reader = PeriodicExportingMetricReader(metric_exporter, export_interval_millis=30_000)
    return tracer_provider, MeterProvider(resource=resource, metric_readers=[reader])
