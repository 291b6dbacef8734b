"""Shared fixtures: an in-memory OpenTelemetry pipeline and a live server factory."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter


class Otel:
    """Providers wired to in-memory exporters, passed into the middleware (never global)."""

    def __init__(self) -> None:
        self.spans = InMemorySpanExporter()
        self.tracer_provider = TracerProvider()
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.spans))
        self.reader = InMemoryMetricReader()
        self.meter_provider = MeterProvider(metric_readers=[self.reader])

    def points(self, name: str) -> list[object]:
        data = self.reader.get_metrics_data()
        found: list[object] = []
        for rm in data.resource_metrics if data else []:
            for sm in rm.scope_metrics:
                for metric in sm.metrics:
                    if metric.name == name:
                        found.extend(metric.data.data_points)
        return found


@pytest.fixture
def otel() -> Iterator[Otel]:
    """A fresh tracer and meter provider with in-memory exporters."""
    pipeline = Otel()
    yield pipeline
    pipeline.tracer_provider.shutdown()
    pipeline.meter_provider.shutdown()


@pytest.fixture
def anyio_backend() -> str:
    """Run async tests on asyncio (what uvicorn uses)."""
    return "asyncio"
