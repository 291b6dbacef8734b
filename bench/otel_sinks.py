"""OpenTelemetry SDK providers that export to sinks dropping everything: the SDK's full
per-request cost, with no exporter I/O to measure."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import (
    MetricExporter,
    MetricExportResult,
    MetricsData,
    PeriodicExportingMetricReader,
)
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.sampling import Sampler


class NoopSpanExporter(SpanExporter):
    """Accepts every batch and drops it."""

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return SpanExportResult.SUCCESS


class NoopMetricExporter(MetricExporter):
    """Accepts every export and drops it."""

    def export(
        self, metrics_data: MetricsData, timeout_millis: float = 10_000, **kwargs: Any
    ) -> MetricExportResult:
        return MetricExportResult.SUCCESS

    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        return True

    def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:
        return None


def noop_providers(
    *, export_interval_millis: float, sampler: Sampler | None = None
) -> tuple[TracerProvider, MeterProvider]:
    """A tracer provider with a BatchSpanProcessor and a meter provider with a periodic
    reader, both exporting to the no-op sinks."""
    tracer_provider = TracerProvider(sampler=sampler, shutdown_on_exit=False)
    tracer_provider.add_span_processor(BatchSpanProcessor(NoopSpanExporter()))
    reader = PeriodicExportingMetricReader(
        NoopMetricExporter(), export_interval_millis=export_interval_millis
    )
    return tracer_provider, MeterProvider(metric_readers=[reader], shutdown_on_exit=False)
