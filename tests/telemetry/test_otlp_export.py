"""End to end over real OTLP/HTTP: a backend receives the cancelled span and its metrics.
(The example app's own set-up: test_example_telemetry.py.)"""

from __future__ import annotations

import anyio
import requests
from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from mcp_asgi import McpMiddleware, McpSettings

from ..helpers import Probe, drop_mid_call, eventually, host_app, serving, wait_for
from ..servers import outcomes_server
from .otlp_receiver import OtlpReceiver, attributes_of


def direct_session() -> requests.Session:
    """An HTTP session that ignores proxy settings from the environment (127.0.0.1 only)."""
    session = requests.Session()
    session.trust_env = False
    return session


async def test_cancelled_span_and_metrics_reach_an_otlp_backend() -> None:
    """A dropped call is exported over OTLP/HTTP with reason client_disconnect and its metrics."""
    probe = Probe()
    resource = Resource.create({"service.name": "otlp-e2e"})
    with OtlpReceiver() as receiver:
        tracer_provider = TracerProvider(resource=resource)
        tracer_provider.add_span_processor(
            BatchSpanProcessor(
                OTLPSpanExporter(endpoint=receiver.traces_url, session=direct_session())
            )
        )
        reader = PeriodicExportingMetricReader(
            OTLPMetricExporter(endpoint=receiver.metrics_url, session=direct_session()),
            export_interval_millis=3_600_000,
        )
        meter_provider = MeterProvider(resource=resource, metric_readers=[reader])
        app = McpMiddleware(
            host_app(),
            server=outcomes_server(probe),
            settings=McpSettings(response_mode="sse"),
            tracer_provider=tracer_provider,
            meter_provider=meter_provider,
        )
        try:
            with serving(app) as client:
                await drop_mid_call(client, "slow", probe, {}, read_progress=True, progress=True)
                await wait_for(probe.exited)

                def exported() -> bool:
                    tracer_provider.force_flush()
                    return receiver.find_span("tools/call slow") is not None

                await eventually(exported)
            assert await anyio.to_thread.run_sync(meter_provider.force_flush)
        finally:
            tracer_provider.shutdown()
            meter_provider.shutdown()
        span = receiver.find_span("tools/call slow")
        metrics = {metric.name: metric for metric in receiver.metrics()}

    assert span is not None
    attributes = attributes_of(span.attributes)
    assert span.kind == Span.SPAN_KIND_SERVER
    assert span.status.code == Status.STATUS_CODE_UNSET
    assert attributes["mcp.method.name"] == "tools/call"
    assert attributes["gen_ai.tool.name"] == "slow"
    assert attributes["mcp_asgi.cancellation.reason"] == "client_disconnect"
    assert attributes["mcp_asgi.cancellation.outcome"] == "exited"
    assert attributes["mcp_asgi.cancellation.elapsed"] > 0
    assert attributes["mcp_asgi.cancellation.latency"] >= 0
    assert "error.type" not in attributes
    assert [event.name for event in span.events] == ["mcp_asgi.cancellation"]
    ((resource_attrs, _),) = [(res, s) for res, s in receiver.spans() if s.span_id == span.span_id]
    assert resource_attrs["service.name"] == "otlp-e2e"

    (counted,) = metrics["mcp_asgi.cancellations"].sum.data_points
    counted_attrs = attributes_of(counted.attributes)
    assert counted_attrs["mcp_asgi.cancellation.reason"] == "client_disconnect"
    assert counted_attrs["gen_ai.tool.name"] == "slow"
    assert counted.as_int == 1
    (latency,) = metrics["mcp_asgi.cancellation.latency"].histogram.data_points
    assert latency.count == 1
    assert latency.explicit_bounds[0] == 0.0005
    assert "mcp.server.operation.duration" in metrics
