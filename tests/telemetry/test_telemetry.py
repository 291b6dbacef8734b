"""Every MCP request is one SERVER span with the semconv attributes, the cancellation story,
the status rules and the metrics of the contract (docs/observability.md)."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from typing import Any

import anyio
import pytest
from fastapi import FastAPI
from opentelemetry import context as otel_context
from opentelemetry import metrics, propagate, trace
from opentelemetry.instrumentation.asgi import OpenTelemetryMiddleware
from opentelemetry.instrumentation.fastapi import FastAPIInstrumentor
from opentelemetry.propagators.textmap import Getter, TextMapPropagator, default_getter
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanKind, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
from opentelemetry.util.types import Attributes

from mcp_asgi import CancelReason, McpMiddleware, McpServer, McpSettings
from mcp_asgi.http.accept import ResponseMode
from mcp_asgi.telemetry import instruments as _metrics
from mcp_asgi.telemetry import names as a
from mcp_asgi.telemetry import span_attributes as _span_attributes

from ..helpers import (
    PARENT_ID,
    TRACE_ID,
    Otel,
    Probe,
    attrs,
    call,
    drop_mid_call,
    eventually,
    host_app,
    mcp_app,
    serving,
    wait_for,
    wire_for,
)
from ..servers import outcomes_server

SECRET = "s3cret-argument-value"
# What a completed `tools/call echo` records on its span and on its metrics; spans also carry
# what identifies the request (id, client), which metrics never do.
ECHO_CALL = {
    "mcp.method.name": "tools/call",
    "mcp.protocol.version": "2026-07-28",
    "gen_ai.tool.name": "echo",
    "gen_ai.operation.name": "execute_tool",
    "network.transport": "tcp",
    "network.protocol.name": "http",
    "network.protocol.version": "1.1",
}


def build_app(otel: Otel, probe: Probe | None = None, **settings: Any) -> McpMiddleware:
    """The server whose tools end in every way, with the test's providers injected."""
    return mcp_app(outcomes_server(probe or Probe()), otel, **settings)


def event_names(span: ReadableSpan) -> list[str]:
    """The names of the span's events, in order."""
    return [event.name for event in span.events]


# -- completed calls and status rules ---------------------------------------------------


async def test_completed_call(otel: Otel) -> None:
    """A completed tools/call is one SERVER span `tools/call echo`, UNSET, semconv attributes."""
    response = await call(
        build_app(otel), "tools/call", {"name": "echo", "arguments": {"text": "hi"}}
    )
    assert response.result["content"][0]["text"] == "hi"
    span = otel.span("tools/call echo")
    assert span.kind is SpanKind.SERVER
    assert span.status.status_code is StatusCode.UNSET
    assert span.instrumentation_scope is not None
    assert span.instrumentation_scope.name == "mcp_asgi"
    assert span.instrumentation_scope.schema_url == a.SCHEMA_URL
    assert attrs(span) == {
        **ECHO_CALL,
        "jsonrpc.request.id": "7",
        "client.address": "127.0.0.1",
        "client.port": 123,
    }
    assert span.events == ()


async def test_other_methods_name_and_attributes(otel: Otel) -> None:
    """tools/list is named by its method; resources/read carries the URI but not in the name."""
    app = build_app(otel)
    await call(app, "tools/list")
    await call(app, "resources/read", {"uri": "notes://a"})
    listed = otel.span("tools/list")
    assert attrs(listed)["mcp.method.name"] == "tools/list"
    assert "gen_ai.tool.name" not in attrs(listed)
    assert "gen_ai.operation.name" not in attrs(listed)
    read = otel.span("resources/read")
    assert attrs(read)["mcp.resource.uri"] == "notes://a"


async def test_tool_error_is_an_error(otel: Otel) -> None:
    """A tool result with isError is error.type tool_error and status ERROR."""
    response = await call(build_app(otel), "tools/call", {"name": "broken", "arguments": {}})
    assert response.result["isError"] is True
    span = otel.span("tools/call broken")
    assert span.status.status_code is StatusCode.ERROR
    assert attrs(span)["error.type"] == "tool_error"
    assert "rpc.response.status_code" not in attrs(span)


async def test_unknown_tool_is_a_caller_fault(otel: Otel) -> None:
    """-32602 (unknown tool) sets rpc.response.status_code but no error.type; status UNSET."""
    response = await call(build_app(otel), "tools/call", {"name": "nosuch", "arguments": {}})
    assert response.final["error"]["code"] == -32602
    span = otel.span("tools/call nosuch")
    assert span.status.status_code is StatusCode.UNSET
    assert attrs(span)["rpc.response.status_code"] == "-32602"
    assert "error.type" not in attrs(span)
    (point,) = otel.histograms(a.OPERATION_DURATION)
    assert point.attributes is not None
    assert point.attributes["gen_ai.tool.name"] == "_OTHER"
    assert point.attributes["rpc.response.status_code"] == "-32602"
    assert "error.type" not in point.attributes


async def test_application_error_code_is_an_error(otel: Otel) -> None:
    """An McpError with an application code is ERROR with error.type = the code."""
    response = await call(build_app(otel), "tools/call", {"name": "quota", "arguments": {}})
    assert response.final["error"]["code"] == 1001
    span = otel.span("tools/call quota")
    assert span.status.status_code is StatusCode.ERROR
    assert span.status.description == "quota exceeded"
    assert attrs(span)["error.type"] == "1001"
    assert attrs(span)["rpc.response.status_code"] == "1001"


async def test_unhandled_exception_recorded_once(otel: Otel) -> None:
    """An unhandled exception: error.type is its type, ERROR, exactly one exception event."""
    response = await call(build_app(otel), "resources/read", {"uri": "boom://x"})
    assert response.final["error"]["code"] == -32603
    span = otel.span("resources/read")
    assert span.status.status_code is StatusCode.ERROR
    assert attrs(span)["error.type"] == "RuntimeError"
    assert attrs(span)["rpc.response.status_code"] == "-32603"
    assert event_names(span) == ["exception"]
    exception_attrs = span.events[0].attributes or {}
    assert exception_attrs["exception.type"] == "RuntimeError"


def unencodable_app(otel: Otel, mode: ResponseMode) -> McpMiddleware:
    """An app with a prompt whose result cannot be encoded as JSON at all."""
    server = McpServer("unencodable")

    @server.prompt()
    def binary() -> list[dict[str, Any]]:
        """Content that no JSON encoder accepts."""
        return [{"role": "user", "content": {"type": "text", "text": object()}}]

    return mcp_app(server, otel, response_mode=mode)


@pytest.mark.parametrize("mode", ["json", "sse"])
async def test_unencodable_reply_is_an_error(otel: Otel, mode: ResponseMode) -> None:
    """A result replaced by a -32603 error (it cannot be encoded): ERROR on span and metric."""
    response = await call(unencodable_app(otel, mode), "prompts/get", {"name": "binary"})
    text = response.body.decode()
    data = [line[5:] for line in text.splitlines() if line.startswith("data:")]
    reply = json.loads(data[0] if mode == "sse" else text)
    assert reply["error"]["code"] == -32603
    span = otel.span("prompts/get binary")
    assert span.status.status_code is StatusCode.ERROR
    assert span.status.description == "Internal error: the reply is not valid JSON"
    assert attrs(span)["error.type"] == "-32603"
    assert attrs(span)["rpc.response.status_code"] == "-32603"
    (duration,) = otel.histograms(a.OPERATION_DURATION)
    assert (duration.attributes or {})["error.type"] == "-32603"
    assert (duration.attributes or {})["rpc.response.status_code"] == "-32603"


async def test_rejected_request_gets_a_short_span(otel: Otel) -> None:
    """A request rejected by validation, method readable: a span with the error code, UNSET."""
    response = await call(
        build_app(otel),
        "tools/call",
        {"name": "echo", "arguments": {"text": "hi"}},
        headers={"mcp-name": "other"},
    )
    assert response.status == 400
    assert response.final["error"]["code"] == -32020
    span = otel.span("tools/call echo")
    assert span.kind is SpanKind.SERVER
    assert span.status.status_code is StatusCode.UNSET
    assert attrs(span)["rpc.response.status_code"] == "-32020"
    assert attrs(span)["jsonrpc.request.id"] == "7"
    assert "error.type" not in attrs(span)
    assert otel.numbers(a.REQUESTS_ACTIVE, by_method=True) == []


async def test_rejected_unknown_method_is_other(otel: Otel) -> None:
    """An unknown method is recorded as `_OTHER`: client input never becomes a span name."""
    response = await call(build_app(otel), "made/up", {})
    assert response.final["error"]["code"] == -32601
    span = otel.span("_OTHER")
    assert attrs(span)["mcp.method.name"] == "_OTHER"
    assert attrs(span)["rpc.response.status_code"] == "-32601"
    assert span.status.status_code is StatusCode.UNSET


async def test_unreadable_request_has_no_span(otel: Otel) -> None:
    """A request rejected before its method is read gets no span: the HTTP layer records it."""
    response = await call(build_app(otel), "tools/list", headers={"content-type": "text/plain"})
    assert response.status == 415
    assert otel.spans.get_finished_spans() == ()


# -- cancellation ---------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["sse", "json"])
async def test_disconnect_is_recorded_not_an_error(otel: Otel, mode: str) -> None:
    """A real client drop: reason client_disconnect, elapsed, latency, exited, UNSET, metrics."""
    probe = Probe()
    app = build_app(otel, probe, response_mode=mode)
    with serving(app) as client:
        sse = mode == "sse"
        await drop_mid_call(client, "slow", probe, {}, read_progress=sse, progress=True)
        span = await otel.wait_span("tools/call slow")
    assert probe.exited.is_set()
    attributes = attrs(span)
    assert attributes["mcp_asgi.cancellation.reason"] == "client_disconnect"
    assert attributes["mcp_asgi.cancellation.outcome"] == "exited"
    assert attributes["mcp_asgi.cancellation.after_side_effect"] is False
    assert attributes["mcp_asgi.cancellation.elapsed"] > 0
    assert attributes["mcp_asgi.cancellation.latency"] >= 0
    assert span.status.status_code is StatusCode.UNSET
    assert "error.type" not in attributes
    assert "rpc.response.status_code" not in attributes
    assert "exception" not in event_names(span)
    (event,) = [e for e in span.events if e.name == "mcp_asgi.cancellation"]
    assert (event.attributes or {})["mcp_asgi.cancellation.reason"] == "client_disconnect"
    assert span.end_time is not None
    assert span.start_time is not None
    assert span.start_time < event.timestamp <= span.end_time

    cancel_attrs = {
        "mcp.method.name": "tools/call",
        "gen_ai.tool.name": "slow",
        "mcp_asgi.cancellation.reason": "client_disconnect",
        "mcp_asgi.cancellation.outcome": "exited",
        "mcp_asgi.cancellation.after_side_effect": False,
    }
    (counted,) = otel.numbers(a.CANCELLATIONS)
    assert dict(counted.attributes or {}) == cancel_attrs
    assert counted.value == 1
    (latency,) = otel.histograms(a.CANCELLATION_LATENCY_METRIC)
    assert latency.count == 1
    assert tuple(latency.explicit_bounds) == a.LATENCY_BUCKETS
    assert latency.explicit_bounds[0] == 0.0005
    latency_attrs = dict(cancel_attrs)
    del latency_attrs["mcp_asgi.cancellation.after_side_effect"]
    assert dict(latency.attributes or {}) == latency_attrs
    (duration,) = otel.histograms(a.OPERATION_DURATION)
    assert (duration.attributes or {})["mcp_asgi.cancellation.reason"] == "client_disconnect"
    assert "error.type" not in (duration.attributes or {})
    assert otel.total(a.REQUESTS_ACTIVE) == 0


async def test_cancel_after_side_effect(otel: Otel) -> None:
    """A cancel after ctx.side_effect: flagged on the span and on the cancellations counter."""
    probe = Probe()
    app = build_app(otel, probe)
    charge = wire_for("tools/call", {"name": "charge", "arguments": {}}, leave_on=probe.started)
    await charge.run(app)
    span = otel.span("tools/call charge")
    assert attrs(span)["mcp_asgi.side_effect.name"] == "charge_card"
    assert attrs(span)["mcp_asgi.cancellation.after_side_effect"] is True
    assert event_names(span) == ["mcp_asgi.side_effect", "mcp_asgi.cancellation"]
    assert span.status.status_code is StatusCode.UNSET
    assert otel.total(a.CANCELLATIONS, {"mcp_asgi.cancellation.after_side_effect": True}) == 1


async def test_cancel_after_the_work_is_done_is_too_late(otel: Otel) -> None:
    """A reply that cannot be sent after the handler finished: outcome too_late, no latency."""
    app = build_app(otel)
    params = {"name": "echo", "arguments": {"text": "hi"}}
    wire = wire_for("tools/call", params)
    wire.fail_sends = True
    assert (await wire.run(app)).sent == []
    span = otel.span("tools/call echo")
    assert attrs(span)["mcp_asgi.cancellation.reason"] == "client_disconnect"
    assert attrs(span)["mcp_asgi.cancellation.outcome"] == "too_late"
    assert "mcp_asgi.cancellation.latency" not in attrs(span)
    assert span.status.status_code is StatusCode.UNSET
    assert otel.total(a.CANCELLATIONS, {"mcp_asgi.cancellation.outcome": "too_late"}) == 1
    assert otel.histograms(a.CANCELLATION_LATENCY_METRIC) == []


async def test_timeout_is_an_error(otel: Otel) -> None:
    """A server timeout: reason timeout, ERROR, error.type timeout; the client got an error."""
    response = await call(build_app(otel), "tools/call", {"name": "stuck", "arguments": {}})
    error = response.final["error"]
    assert error["code"] == -32603
    assert error["data"] == {"reason": "timeout"}
    span = otel.span("tools/call stuck")
    attributes = attrs(span)
    assert attributes["mcp_asgi.cancellation.reason"] == "timeout"
    assert attributes["mcp_asgi.cancellation.outcome"] == "exited"
    assert attributes["error.type"] == "timeout"
    assert attributes["rpc.response.status_code"] == "-32603"
    assert span.status.status_code is StatusCode.ERROR
    assert span.status.description == error["message"]
    assert "exception" not in event_names(span)
    assert otel.total(a.CANCELLATIONS, {"mcp_asgi.cancellation.reason": "timeout"}) == 1


async def test_server_shutdown_is_an_error(otel: Otel) -> None:
    """Lifespan shutdown cancels in-flight calls: reason server_shutdown, ERROR, error reply."""
    probe = Probe()
    app = build_app(otel, probe, response_mode="json")
    wire = wire_for("tools/call", {"name": "slow"})
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(wire.run, app)
        await wait_for(probe.started)
        await app.cancel_inflight()
    reply = json.loads(wire.sent[-1]["body"])
    assert reply["error"]["data"] == {"reason": "server_shutdown"}
    span = otel.span("tools/call slow")
    assert attrs(span)["mcp_asgi.cancellation.reason"] == "server_shutdown"
    assert attrs(span)["error.type"] == "server_shutdown"
    assert attrs(span)["rpc.response.status_code"] == "-32603"
    assert span.status.status_code is StatusCode.ERROR


@pytest.mark.parametrize("reason", list(CancelReason))
async def test_status_follows_who_cancelled(otel: Otel, reason: CancelReason) -> None:
    """Client-initiated reasons leave the span UNSET; server-initiated ones are errors."""
    probe = Probe()
    app = build_app(otel, probe, response_mode="json")
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(wire_for("tools/call", {"name": "slow"}).run, app)
        await wait_for(probe.started)
        assert probe.ctx is not None
        probe.ctx._request_scope.cancel(reason)
    span = otel.span("tools/call slow")
    assert attrs(span)["mcp_asgi.cancellation.reason"] == reason.value
    assert attrs(span)["mcp_asgi.cancellation.outcome"] == "exited"
    assert "exception" not in event_names(span)
    if reason.client_initiated:
        assert span.status.status_code is StatusCode.UNSET
        assert "error.type" not in attrs(span)
        assert "rpc.response.status_code" not in attrs(span)
    else:
        assert span.status.status_code is StatusCode.ERROR
        assert attrs(span)["error.type"] == reason.value
        assert attrs(span)["rpc.response.status_code"] == "-32603"
    assert otel.total(a.CANCELLATIONS, {"mcp_asgi.cancellation.reason": reason.value}) == 1


async def test_max_request_duration_is_a_timeout(otel: Otel) -> None:
    """`max_request_duration` cancels with reason timeout, like a tool's own timeout."""
    probe = Probe()
    app = build_app(otel, probe, max_request_duration=0.2)
    response = await call(app, "tools/call", {"name": "slow", "arguments": {}})
    assert response.final["error"]["data"] == {"reason": "timeout"}
    span = otel.span("tools/call slow")
    assert attrs(span)["error.type"] == "timeout"
    assert span.status.status_code is StatusCode.ERROR


async def test_orphan_span_ends_at_grace_and_gauge_falls_when_it_exits(otel: Otel) -> None:
    """A thread past the grace period: span ends orphaned (ERROR); orphans.active 1 then 0."""
    probe = Probe()
    app = build_app(otel, probe, cancel_grace=0.05, process_kill_grace=0.05)
    try:
        hog = wire_for("tools/call", {"name": "hog", "arguments": {}}, leave_on=probe.started)
        await hog.run(app)
        span = otel.span("tools/call hog")
        assert attrs(span)["mcp_asgi.cancellation.outcome"] == "orphaned"
        assert attrs(span)["error.type"] == "orphaned"
        assert "mcp_asgi.cancellation.latency" not in attrs(span)
        assert span.status.status_code is StatusCode.ERROR
        assert otel.total(a.ORPHANS_ACTIVE) == 1
        assert otel.histograms(a.CANCELLATION_LATENCY_METRIC) == []
    finally:
        probe.release.set()
    await eventually(lambda: otel.total(a.ORPHANS_ACTIVE) == 0)
    (latency,) = otel.histograms(a.CANCELLATION_LATENCY_METRIC)
    assert (latency.attributes or {})["mcp_asgi.cancellation.outcome"] == "orphaned"
    assert otel.total(a.REQUESTS_ACTIVE) == 0


# -- parents and nesting ----------------------------------------------------------------


async def test_parent_from_meta_with_link_to_http_span(otel: Otel) -> None:
    """`_meta.traceparent` is the parent; the ambient HTTP span is a link; baggage flows."""
    mcp = build_app(otel)
    app = OpenTelemetryMiddleware(mcp, tracer_provider=otel.tracer_provider)
    meta = {
        "traceparent": f"00-{TRACE_ID:032x}-{PARENT_ID:016x}-01",
        "tracestate": "vendor=abc",
        "baggage": "tenant=acme",
    }
    response = await call(app, "tools/call", {"name": "whoami", "arguments": {}}, meta=meta)
    seen = response.result["structuredContent"]
    span = otel.span("tools/call whoami")
    (http,) = otel.finished("POST /mcp")
    assert span.context is not None
    assert http.context is not None
    assert span.context.trace_id == TRACE_ID
    assert span.parent is not None
    assert span.parent.span_id == PARENT_ID
    assert span.parent.is_remote
    assert span.context.trace_state.get("vendor") == "abc"
    assert [link.context for link in span.links] == [http.context]
    assert http.context.trace_id != TRACE_ID
    assert seen == {
        "trace_id": f"{TRACE_ID:032x}",
        "span_id": f"{span.context.span_id:016x}",
        "tenant": "acme",
    }


def without_sdk() -> McpMiddleware:
    """The outcomes server with no-op providers (no SDK), answering in JSON."""
    return McpMiddleware(
        host_app(),
        server=outcomes_server(Probe()),
        settings=McpSettings(response_mode="json"),
        tracer_provider=trace.NoOpTracerProvider(),
        meter_provider=metrics.NoOpMeterProvider(),
    )


async def test_without_sdk_meta_context_still_reaches_the_handler() -> None:
    """With no-op providers nothing is recorded, yet the handler runs in the `_meta` context."""
    app = without_sdk()
    meta = {"traceparent": f"00-{TRACE_ID:032x}-{PARENT_ID:016x}-01", "baggage": "tenant=acme"}
    response = await call(app, "tools/call", {"name": "whoami", "arguments": {}}, meta=meta)
    seen = response.result["structuredContent"]
    assert seen == {
        "trace_id": f"{TRACE_ID:032x}",
        "span_id": f"{PARENT_ID:016x}",
        "tenant": "acme",
    }
    plain_response = await call(app, "tools/call", {"name": "whoami", "arguments": {}})
    assert plain_response.result["structuredContent"]["trace_id"] == "0" * 32


class _RenamedTraceContext(TextMapPropagator):
    """W3C trace context under another key, `x-parent`: a propagator whose fields are
    none of the default ones."""

    _inner = TraceContextTextMapPropagator()

    def extract(
        self,
        carrier: Any,
        context: otel_context.Context | None = None,
        getter: Getter[Any] = default_getter,
    ) -> otel_context.Context:
        values = getter.get(carrier, "x-parent")
        if not values:
            return context if context is not None else otel_context.Context()
        return self._inner.extract({"traceparent": values[0]}, context)

    def inject(self, carrier: Any, context: Any = None, setter: Any = None) -> None:
        return None

    @property
    def fields(self) -> set[str]:
        return {"x-parent"}


async def test_without_sdk_a_configured_propagator_reads_its_own_meta_keys() -> None:
    """With no-op providers, the global propagator's own fields are read from `_meta`
    (not the default `traceparent`): its context reaches the handler."""
    app = without_sdk()
    parent = f"00-{TRACE_ID:032x}-{PARENT_ID:016x}-01"
    whoami = {"name": "whoami", "arguments": {}}
    default = propagate.get_global_textmap()
    propagate.set_global_textmap(_RenamedTraceContext())
    try:
        renamed = await call(app, "tools/call", whoami, meta={"x-parent": parent})
        standard = await call(app, "tools/call", whoami, meta={"traceparent": parent})
    finally:
        propagate.set_global_textmap(default)
    assert renamed.result["structuredContent"]["trace_id"] == f"{TRACE_ID:032x}"
    assert standard.result["structuredContent"]["trace_id"] == "0" * 32
    again = await call(app, "tools/call", whoami, meta={"traceparent": parent})
    assert again.result["structuredContent"]["trace_id"] == f"{TRACE_ID:032x}"


async def test_invalid_meta_traceparent_falls_back_to_ambient(otel: Otel) -> None:
    """A malformed `_meta.traceparent` is ignored: the HTTP span is the parent, no link."""
    app = OpenTelemetryMiddleware(build_app(otel), tracer_provider=otel.tracer_provider)
    await call(app, "tools/list", meta={"traceparent": "00-garbage-01"})
    span = otel.span("tools/list")
    (http,) = otel.finished("POST /mcp")
    assert span.parent is not None
    assert http.context is not None
    assert span.parent.span_id == http.context.span_id
    assert span.links == ()


async def test_nested_under_asgi_instrumentation(otel: Otel) -> None:
    """Under OpenTelemetryMiddleware, the MCP span is a child of the HTTP server span."""
    app = OpenTelemetryMiddleware(build_app(otel), tracer_provider=otel.tracer_provider)
    await call(app, "tools/call", {"name": "echo", "arguments": {"text": "hi"}})
    span = otel.span("tools/call echo")
    (http,) = otel.finished("POST /mcp")
    assert http.kind is SpanKind.SERVER
    assert span.parent is not None
    assert http.context is not None
    assert span.context is not None
    assert span.parent.span_id == http.context.span_id
    assert span.context.trace_id == http.context.trace_id
    assert span.links == ()


@pytest.fixture
def fastapi_app(otel: Otel) -> Iterator[FastAPI]:
    """A FastAPI app with the MCP middleware, instrumented by FastAPIInstrumentor."""
    app = FastAPI()
    app.add_middleware(
        McpMiddleware,
        server=outcomes_server(Probe()),
        settings=McpSettings(response_mode="json"),
        tracer_provider=otel.tracer_provider,
        meter_provider=otel.meter_provider,
    )
    FastAPIInstrumentor.instrument_app(
        app, tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider
    )
    yield app
    FastAPIInstrumentor.uninstrument_app(app)


async def test_nested_under_fastapi_instrumentation(otel: Otel, fastapi_app: FastAPI) -> None:
    """Under FastAPIInstrumentor, the MCP span is a child of the HTTP server span."""
    response = await call(fastapi_app, "tools/call", {"name": "echo", "arguments": {"text": "x"}})
    assert response.result["content"][0]["text"] == "x"
    span = otel.span("tools/call echo")
    servers = [
        s for s in otel.spans.get_finished_spans() if s.kind is SpanKind.SERVER and s is not span
    ]
    (http,) = [s for s in servers if s.name.startswith("POST")]
    assert span.parent is not None
    assert http.context is not None
    assert span.parent.span_id == http.context.span_id


# -- metrics ---------------------------------------------------------------------------


async def test_duration_metric(otel: Otel) -> None:
    """mcp.server.operation.duration: semconv buckets and attributes, error.type on failures."""
    app = build_app(otel)
    await call(app, "tools/call", {"name": "echo", "arguments": {"text": "hi"}})
    await call(app, "tools/call", {"name": "broken", "arguments": {}})
    points = {
        (p.attributes or {})["gen_ai.tool.name"]: p for p in otel.histograms(a.OPERATION_DURATION)
    }
    echo, broken = points["echo"], points["broken"]
    assert tuple(echo.explicit_bounds) == a.DURATION_BUCKETS
    assert echo.count == 1
    assert dict(echo.attributes or {}) == ECHO_CALL
    assert (broken.attributes or {})["error.type"] == "tool_error"
    (active,) = otel.numbers(a.REQUESTS_ACTIVE, by_method=True)
    assert dict(active.attributes or {}) == {"mcp.method.name": "tools/call"}
    assert active.value == 0


@pytest.mark.parametrize("name", [a.REQUESTS_ACTIVE, a.ORPHANS_ACTIVE, a.TASKS_ACTIVE])
async def test_up_down_counters_are_zero_from_start_up(otel: Otel, name: str) -> None:
    """Before any request, orphan or task, each up-down counter has a point at 0 without
    attributes (a backend sums it to 0, not "no data"); requests add their own points."""
    app = build_app(otel)
    assert [(p.attributes, p.value) for p in otel.numbers(name)] == [({}, 0)]
    await call(app, "tools/call", {"name": "echo", "arguments": {"text": "hi"}})
    assert [p.value for p in otel.numbers(name) if not p.attributes] == [0]
    assert otel.total(name) == 0


async def test_requests_active_counts_in_flight_across_middlewares(otel: Otel) -> None:
    """mcp_asgi.requests.active is the number in flight, by method; two middlewares on one
    meter provider count into the same series."""
    probes = [Probe(), Probe()]
    try:
        async with anyio.create_task_group() as tg:
            for probe in probes:
                app = build_app(otel, probe)
                tg.start_soon(call, app, "tools/call", {"name": "hog", "arguments": {}})
            for probe in probes:
                await wait_for(probe.started)
            (active,) = otel.numbers(a.REQUESTS_ACTIVE, by_method=True)
            assert dict(active.attributes or {}) == {"mcp.method.name": "tools/call"}
            assert active.value == 2
            for probe in probes:
                probe.release.set()
    finally:
        for probe in probes:
            probe.release.set()
    (active,) = otel.numbers(a.REQUESTS_ACTIVE, by_method=True)
    assert active.value == 0
    assert otel.histograms(a.OPERATION_DURATION)[0].count == 2


async def test_requests_active_waits_for_a_meter_provider(
    otel: Otel, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With no meter provider yet (the global one not set), requests are counted where
    nothing observes them; once one is set, they are counted on it."""
    monkeypatch.setattr(_metrics, "_RECHECK", 0.0)
    monkeypatch.setattr(metrics, "get_meter_provider", lambda: metrics.NoOpMeterProvider())
    probe = Probe()
    app = McpMiddleware(
        host_app(), server=outcomes_server(probe), tracer_provider=otel.tracer_provider
    )
    await call(app, "tools/call", {"name": "echo", "arguments": {"text": "hi"}})
    assert otel.span("tools/call echo")
    monkeypatch.setattr(metrics, "get_meter_provider", lambda: otel.meter_provider)
    await _one_hog_counted(app, probe, otel)
    assert otel.total(a.REQUESTS_ACTIVE) == 0


async def _one_hog_counted(app: McpMiddleware, probe: Probe, otel: Otel) -> None:
    """Run the `hog` tool once: requests.active reads 1 while it runs."""
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(call, app, "tools/call", {"name": "hog", "arguments": {}})
            await wait_for(probe.started)
            assert otel.total(a.REQUESTS_ACTIVE) == 1
            probe.release.set()
    finally:
        probe.release.set()


async def test_requests_active_looks_for_a_provider_set_after_construction(
    otel: Otel, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A global meter provider set between the middleware's construction (where there was
    none) and its first request (e.g. in the lifespan) counts that request."""
    monkeypatch.setattr(_metrics, "_RECHECK", 3600.0)
    monkeypatch.setattr(metrics, "get_meter_provider", lambda: metrics.NoOpMeterProvider())
    probe = Probe()
    app = McpMiddleware(host_app(), server=outcomes_server(probe))
    monkeypatch.setattr(metrics, "get_meter_provider", lambda: otel.meter_provider)
    await _one_hog_counted(app, probe, otel)


async def test_caller_fault_tool_name_stays_on_spans(otel: Otel) -> None:
    """An unknown tool's name is `_OTHER` on metrics only: every span keeps the name sent."""
    app = build_app(otel)
    for _ in range(2):
        await call(app, "tools/call", {"name": "nosuch", "arguments": {}})
    await call(app, "tools/call", {"name": "echo", "arguments": {"text": "hi"}})
    spans = otel.finished("tools/call nosuch")
    assert [attrs(span)["gen_ai.tool.name"] for span in spans] == ["nosuch", "nosuch"]
    counts = {
        (p.attributes or {})["gen_ai.tool.name"]: p.count
        for p in otel.histograms(a.OPERATION_DURATION)
    }
    assert counts == {"_OTHER": 2, "echo": 1}


async def test_many_tool_names_keep_their_own_spans(
    otel: Otel, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Span names and attributes are made once per tool name, in a bounded store: past its
    bound every name still gets its own span name and attributes."""
    monkeypatch.setattr(_span_attributes, "_MAX_SHAPES", 2)
    app = build_app(otel)
    names = ["echo", "nosuch", "other", "echo", "third", "nosuch"]
    for name in names:
        await call(app, "tools/call", {"name": name, "arguments": {"text": "hi"}})
    spans = otel.spans.get_finished_spans()
    assert [span.name for span in spans] == [f"tools/call {name}" for name in names]
    assert [attrs(span)["gen_ai.tool.name"] for span in spans] == names
    assert all(attrs(span)["mcp.method.name"] == "tools/call" for span in spans)


async def test_no_ids_uris_or_arguments_on_metrics(otel: Otel) -> None:
    """Metric attributes never carry request ids, URIs, arguments, results or addresses."""
    app = build_app(otel, record_arguments=True)
    await call(app, "tools/call", {"name": "echo", "arguments": {"text": SECRET}})
    await call(app, "resources/read", {"uri": f"notes://{SECRET}"})
    await call(app, "tools/call", {"name": f"no-{SECRET}", "arguments": {}})
    await call(app, "tools/call", {"name": "stuck", "arguments": {}})
    data = otel.reader.get_metrics_data()
    assert data is not None
    seen: list[Attributes] = [
        point.attributes
        for rm in data.resource_metrics
        for sm in rm.scope_metrics
        for metric in sm.metrics
        for point in metric.data.data_points
    ]
    assert len(seen) >= 5
    forbidden = {
        "jsonrpc.request.id",
        "mcp.resource.uri",
        "gen_ai.tool.call.arguments",
        "gen_ai.tool.call.result",
        "client.address",
        "client.port",
    }
    for attributes in seen:
        assert attributes is not None
        assert not forbidden & set(attributes)
        assert not any(SECRET in str(value) for value in attributes.values())


async def test_record_arguments_off_by_default(otel: Otel) -> None:
    """Tool arguments and results are not on spans unless the user opts in."""
    await call(build_app(otel), "tools/call", {"name": "echo", "arguments": {"text": SECRET}})
    span = otel.span("tools/call echo")
    assert "gen_ai.tool.call.arguments" not in attrs(span)
    assert "gen_ai.tool.call.result" not in attrs(span)
    assert not any(SECRET in str(value) for value in attrs(span).values())


async def test_record_arguments_on(otel: Otel) -> None:
    """With record_arguments=True, tool arguments and results are JSON span attributes."""
    app = build_app(otel, record_arguments=True)
    await call(app, "tools/call", {"name": "echo", "arguments": {"text": "hi"}})
    await call(app, "tools/list")
    span = otel.span("tools/call echo")
    assert json.loads(attrs(span)["gen_ai.tool.call.arguments"]) == {"text": "hi"}
    result = json.loads(attrs(span)["gen_ai.tool.call.result"])
    assert result["content"] == [{"type": "text", "text": "hi"}]
    assert "_meta" not in result
    assert "gen_ai.tool.call.result" not in attrs(otel.span("tools/list"))


# -- telemetry never breaks a request ----------------------------------------------------


class ExplodingSpan(trace.NonRecordingSpan):
    """A span whose every method raises."""

    def __init__(self) -> None:
        super().__init__(trace.INVALID_SPAN_CONTEXT)

    def _explode(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("span exploded")

    is_recording = set_attribute = set_attributes = add_event = _explode
    set_status = record_exception = end = _explode


class ExplodingTracer(trace.Tracer):
    """A tracer that hands out exploding spans, or raises itself."""

    def __init__(self, raise_on_start: bool) -> None:
        self.raise_on_start = raise_on_start

    def start_span(self, *args: Any, **kwargs: Any) -> trace.Span:
        if self.raise_on_start:
            raise RuntimeError("tracer exploded")
        return ExplodingSpan()

    def start_as_current_span(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("tracer exploded")


class ExplodingTracerProvider(trace.TracerProvider):
    """A provider whose tracer (or itself) raises."""

    def __init__(self, where: str) -> None:
        self.where = where

    def get_tracer(self, *args: Any, **kwargs: Any) -> trace.Tracer:
        if self.where == "provider":
            raise RuntimeError("provider exploded")
        return ExplodingTracer(raise_on_start=self.where == "start")


class ExplodingMeterProvider(metrics.MeterProvider):
    """A meter provider that raises."""

    def get_meter(self, *args: Any, **kwargs: Any) -> metrics.Meter:
        raise RuntimeError("meter exploded")


@pytest.mark.parametrize("where", ["span", "start", "provider"])
async def test_telemetry_failure_does_not_break_requests(
    where: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A tracer provider whose spans raise: calls, errors and timeouts still answer."""
    mcp = McpMiddleware(
        host_app(),
        server=outcomes_server(Probe()),
        settings=McpSettings(record_arguments=True),
        tracer_provider=ExplodingTracerProvider(where),
        meter_provider=ExplodingMeterProvider() if where == "provider" else None,
    )
    with caplog.at_level(logging.DEBUG, logger="mcp_asgi.telemetry"):
        ok = await call(mcp, "tools/call", {"name": "echo", "arguments": {"text": "hi"}})
        failed = await call(mcp, "resources/read", {"uri": "boom://x"})
        timed_out = await call(mcp, "tools/call", {"name": "stuck", "arguments": {}})
        rejected = await call(mcp, "made/up", {})
    assert ok.result["content"][0]["text"] == "hi"
    assert failed.final["error"]["code"] == -32603
    assert timed_out.final["error"]["data"] == {"reason": "timeout"}
    assert rejected.final["error"]["code"] == -32601
    failures = [r for r in caplog.records if r.name == "mcp_asgi.telemetry"]
    assert failures
    assert failures[0].levelno == logging.WARNING
    assert all(r.levelno == logging.DEBUG for r in failures[1:])


async def test_disconnect_with_exploding_telemetry_still_cancels() -> None:
    """Even when every span call raises, a disconnect still stops the handler."""
    probe = Probe()
    app = McpMiddleware(
        host_app(),
        server=outcomes_server(probe),
        tracer_provider=ExplodingTracerProvider("span"),
    )
    await wire_for("tools/call", {"name": "slow", "arguments": {}}, leave_on=probe.started).run(app)
    assert probe.exited.is_set()
