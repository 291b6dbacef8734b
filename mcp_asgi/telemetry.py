"""OpenTelemetry: one SERVER span per JSON-RPC request, and the metrics of cancellation.

Uses only `opentelemetry-api`; providers are injected or taken from the globals. Never
configures the SDK, and never lets a telemetry failure break a request: every hook runs
behind `RequestScope._safely`. Without an SDK every call is the API's cheap no-op.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from typing import Any

from opentelemetry import metrics, propagate, trace
from opentelemetry.trace import Link, SpanKind, Status, StatusCode

from . import _attributes as a
from ._asgi import Scope
from ._validate import McpRequest
from ._version import __version__
from .scope import RequestScope, ScopeObserver, SideEffect


class Telemetry:
    """The tracer and instruments of one middleware; makes a `RequestTelemetry` per request."""

    def __init__(
        self,
        tracer_provider: trace.TracerProvider | None = None,
        meter_provider: metrics.MeterProvider | None = None,
        *,
        record_arguments: bool = False,
    ) -> None:
        self.tracer = trace.get_tracer(
            "mcp_asgi", __version__, tracer_provider, schema_url=a.SCHEMA_URL
        )
        meter = metrics.get_meter("mcp_asgi", __version__, meter_provider, schema_url=a.SCHEMA_URL)
        self.record_arguments = record_arguments
        self.duration = meter.create_histogram(
            a.OPERATION_DURATION,
            unit="s",
            description="Duration of MCP requests as seen by the server.",
            explicit_bucket_boundaries_advisory=list(a.DURATION_BUCKETS),
        )
        self.cancel_latency = meter.create_histogram(
            a.CANCELLATION_LATENCY_METRIC,
            unit="s",
            description="Time from a cancel signal until the handler really exited.",
            explicit_bucket_boundaries_advisory=list(a.LATENCY_BUCKETS),
        )
        self.cancellations = meter.create_counter(
            a.CANCELLATIONS, unit="{cancellation}", description="Cancelled MCP requests."
        )
        self.orphans = meter.create_up_down_counter(
            a.ORPHANS_ACTIVE,
            unit="{handler}",
            description="Cancelled handlers still running past the cancel grace period.",
        )
        self.active = meter.create_up_down_counter(
            a.REQUESTS_ACTIVE, unit="{request}", description="MCP requests in flight."
        )

    def begin(self, asgi_scope: Scope, request: McpRequest) -> RequestTelemetry:
        """Start the span of one request."""
        return RequestTelemetry(self, asgi_scope, request)


class RequestTelemetry(ScopeObserver):
    """The span and metric attributes of one request; fed by its `RequestScope`."""

    def __init__(self, telemetry: Telemetry, asgi_scope: Scope, request: McpRequest) -> None:
        self._t = telemetry
        self._request = request
        method = request.method
        target = request.target
        common: dict[str, Any] = {
            a.MCP_METHOD_NAME: method,
            a.MCP_PROTOCOL_VERSION: request.protocol_version,
            a.NETWORK_TRANSPORT: "tcp",
            a.NETWORK_PROTOCOL_NAME: "http",
        }
        http_version = asgi_scope.get("http_version")
        if http_version:
            common[a.NETWORK_PROTOCOL_VERSION] = http_version
        name = method
        if method == "tools/call" and target:
            common[a.GEN_AI_TOOL_NAME] = target
            common[a.GEN_AI_OPERATION_NAME] = "execute_tool"
            name = f"{method} {target}"
        elif method == "prompts/get" and target:
            common[a.GEN_AI_PROMPT_NAME] = target
            name = f"{method} {target}"
        self._metric_attrs = common
        attributes = dict(common)
        attributes[a.JSONRPC_REQUEST_ID] = str(request.id)
        if method == "resources/read" and target:
            attributes[a.MCP_RESOURCE_URI] = target
        client = asgi_scope.get("client")
        if client:
            attributes[a.CLIENT_ADDRESS] = client[0]
            attributes[a.CLIENT_PORT] = client[1]
        parent, links = _parent(request)
        self.span = telemetry.tracer.start_span(
            name, context=parent, kind=SpanKind.SERVER, attributes=attributes, links=links
        )
        if telemetry.record_arguments and method == "tools/call" and self.span.is_recording():
            self.span.set_attribute(
                a.GEN_AI_TOOL_CALL_ARGUMENTS, _json(request.params.get("arguments") or {})
            )
        telemetry.active.add(1, common)

    @contextlib.contextmanager
    def activate(self) -> Iterator[None]:
        with trace.use_span(
            self.span, end_on_exit=False, record_exception=False, set_status_on_exception=False
        ):
            yield

    def signalled(self, scope: RequestScope) -> None:
        reason = scope.reason
        if reason is None or scope.signalled_at is None:
            return
        elapsed = scope.signalled_at - scope.started
        self.span.add_event(
            a.CANCELLATION_EVENT,
            {a.CANCELLATION_REASON: reason.value, a.CANCELLATION_ELAPSED: elapsed},
        )
        self.span.set_attributes(
            {a.CANCELLATION_REASON: reason.value, a.CANCELLATION_ELAPSED: elapsed}
        )

    def side_effect(self, scope: RequestScope, effect: SideEffect) -> None:
        if len(scope.side_effects) == 1:
            self.span.set_attribute(a.SIDE_EFFECT_NAME, effect.name)
        self.span.add_event(a.SIDE_EFFECT_EVENT, {a.SIDE_EFFECT_NAME: effect.name})

    def ended(self, scope: RequestScope) -> None:
        span, t = self.span, self._t
        metric_attrs = dict(self._metric_attrs)
        error_type = self._status(scope, metric_attrs)
        if error_type is not None:
            metric_attrs[a.ERROR_TYPE] = error_type
            span.set_attribute(a.ERROR_TYPE, error_type)
        if scope.reason is not None:
            self._record_cancel(scope, metric_attrs)
        elif t.record_arguments and scope.result is not None and span.is_recording():
            span.set_attribute(a.GEN_AI_TOOL_CALL_RESULT, _json(scope.result))
        now = scope.clock()
        t.duration.record(now - scope.started, metric_attrs)
        t.active.add(-1, self._metric_attrs)
        span.end()

    def orphan_exited(self, scope: RequestScope) -> None:
        attrs = self._cancel_metric_attrs(scope)
        self._t.orphans.add(-1, attrs)
        if scope.exited_at is not None and scope.signalled_at is not None:
            self._t.cancel_latency.record(scope.exited_at - scope.signalled_at, attrs)

    def _status(self, scope: RequestScope, metric_attrs: dict[str, Any]) -> str | None:
        span = self.span
        if scope.reason is not None:
            if scope.outcome == "orphaned":
                span.set_status(Status(StatusCode.ERROR, "handler did not exit after cancellation"))
                return "orphaned"
            if scope.reason.client_initiated:
                return None
            span.set_status(Status(StatusCode.ERROR, f"cancelled: {scope.reason.value}"))
            return scope.reason.value
        if scope.error is not None:
            code = str(scope.error.code)
            span.set_attribute(a.RPC_RESPONSE_STATUS_CODE, code)
            metric_attrs[a.RPC_RESPONSE_STATUS_CODE] = code
            if scope.exception is not None:
                span.record_exception(scope.exception)
                span.set_status(Status(StatusCode.ERROR, str(scope.exception) or None))
                return type(scope.exception).__qualname__
            if scope.error.code in a.CALLER_FAULT_CODES:
                return None
            span.set_status(Status(StatusCode.ERROR, scope.error.message))
            return code
        if scope.result is not None and scope.result.get("isError") is True:
            span.set_status(Status(StatusCode.ERROR, "tool returned an error"))
            return "tool_error"
        return None

    def _record_cancel(self, scope: RequestScope, metric_attrs: dict[str, Any]) -> None:
        assert scope.reason is not None
        span, t = self.span, self._t
        attrs = self._cancel_metric_attrs(scope)
        metric_attrs[a.CANCELLATION_REASON] = scope.reason.value
        span.set_attribute(a.CANCELLATION_OUTCOME, str(scope.outcome))
        span.set_attribute(a.CANCELLATION_AFTER_SIDE_EFFECT, scope.after_side_effect)
        t.cancellations.add(1, attrs)
        if scope.outcome == "orphaned":
            t.orphans.add(1, attrs)
        elif scope.exited_at is not None and scope.signalled_at is not None:
            latency = max(0.0, scope.exited_at - scope.signalled_at)
            span.set_attribute(a.CANCELLATION_LATENCY, latency)
            t.cancel_latency.record(latency, attrs)

    def _cancel_metric_attrs(self, scope: RequestScope) -> dict[str, Any]:
        attrs: dict[str, Any] = {a.MCP_METHOD_NAME: self._request.method}
        tool = self._metric_attrs.get(a.GEN_AI_TOOL_NAME)
        if tool:
            attrs[a.GEN_AI_TOOL_NAME] = tool
        if scope.reason is not None:
            attrs[a.CANCELLATION_REASON] = scope.reason.value
        attrs[a.CANCELLATION_OUTCOME] = str(scope.outcome)
        attrs[a.CANCELLATION_AFTER_SIDE_EFFECT] = scope.after_side_effect
        return attrs


def _parent(request: McpRequest) -> tuple[Any, list[Link]]:
    meta = request.meta
    if "traceparent" not in meta:
        return None, []
    carrier = {
        k: v for k in ("traceparent", "tracestate", "baggage") if isinstance(v := meta.get(k), str)
    }
    context = propagate.extract(carrier)
    if not trace.get_current_span(context).get_span_context().is_valid:
        return None, []
    ambient = trace.get_current_span().get_span_context()
    return context, [Link(ambient)] if ambient.is_valid else []


def _json(value: Any) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, default=str)[:8192]
    except (TypeError, ValueError):
        return "<unserialisable>"
