"""OpenTelemetry: one SERVER span per JSON-RPC request, and the metrics of cancellation.

Uses only `opentelemetry-api`; providers are injected or taken from the globals. Never
configures the SDK. Without an SDK every call is the API's cheap no-op.

A telemetry failure never breaks a request: every entry point (`Telemetry.__init__`,
`begin`, `rejected`, each observer hook and `activate`) catches its own exceptions, reports
the first one at WARNING on the `mcp_asgi.telemetry` logger (later ones at DEBUG) and goes on.
"""

from __future__ import annotations

import functools
import json
import logging
import math
import time
from collections.abc import Callable, Mapping
from contextvars import Token
from types import TracebackType
from typing import Any, Final, TypeVar

from opentelemetry import context as otel_context
from opentelemetry import metrics, propagate, trace
from opentelemetry.metrics import _internal as _metrics_internal
from opentelemetry.trace import Link, SpanKind, Status, StatusCode

from . import _attributes as a
from ._asgi import Scope
from ._request import IncomingMessage
from ._validate import NAME_PARAM, McpRequest
from ._version import __version__
from .jsonrpc import McpError
from .scope import RequestScope, ScopeObserver, SideEffect

logger = logging.getLogger("mcp_asgi.telemetry")
_NOOP = ScopeObserver()
# Providers that record nothing: the API's defaults when no SDK is configured. The global
# meter proxy is private API, hence the guarded lookup (without it: no fast path).
_NOOP_TRACER_PROVIDERS: tuple[type, ...] = (trace.NoOpTracerProvider, trace.ProxyTracerProvider)
_PROXY_METER_PROVIDER: tuple[type, ...] = tuple(
    t for t in (getattr(_metrics_internal, "_ProxyMeterProvider", None),) if isinstance(t, type)
)
_NOOP_METER_PROVIDERS = (metrics.NoOpMeterProvider, *_PROXY_METER_PROVIDER)
_NOOP_RECHECK: Final = 1.0  # seconds: a global provider set later is used within this delay
_MAX_JSON = 8192
F = TypeVar("F", bound=Callable[..., None])


class Telemetry:
    """The tracer and instruments of one middleware; makes a `RequestTelemetry` per request."""

    def __init__(
        self,
        tracer_provider: trace.TracerProvider | None = None,
        meter_provider: metrics.MeterProvider | None = None,
        *,
        record_arguments: bool = False,
    ) -> None:
        self.record_arguments = record_arguments
        self._tracer_provider = tracer_provider
        self._meter_provider = meter_provider
        self._recording = False
        self._noop_until = -math.inf
        self._warned = False
        self._textmap: object = None
        self._fields: tuple[str, ...] = ()
        try:
            self.tracer = trace.get_tracer(
                "mcp_asgi", __version__, tracer_provider, schema_url=a.SCHEMA_URL
            )
        except Exception:
            self.failed()
            self.tracer = trace.NoOpTracer()
        try:
            self._instruments(
                metrics.get_meter("mcp_asgi", __version__, meter_provider, schema_url=a.SCHEMA_URL)
            )
        except Exception:
            self.failed()
            self._instruments(metrics.NoOpMeter("mcp_asgi"))

    def _instruments(self, meter: metrics.Meter) -> None:
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

    def failed(self) -> None:
        """Report a telemetry failure (call from an `except` block); never raises."""
        try:
            level = logging.DEBUG if self._warned else logging.WARNING
            self._warned = True
            logger.log(level, "telemetry failed; the request goes on", exc_info=True)
        except Exception:  # pragma: no cover - logging itself is broken
            pass

    def begin(self, asgi_scope: Scope, request: McpRequest) -> ScopeObserver:
        """Start the span of one validated request; a no-op observer if telemetry fails.

        Without an SDK (no-op or not-yet-configured providers) nothing is recorded, so no
        span is built: only a trace context carried in `_meta` is made current for the
        handler, so that its own outgoing calls still propagate it.
        """
        try:
            if not self._recording and self._noop():
                parent, _ = self.parent(request.meta)
                return _NOOP if parent is None else _ContextOnly(self, parent)
            return RequestTelemetry(self, asgi_scope, request)
        except Exception:
            self.failed()
            return _NOOP

    def _noop(self) -> bool:
        """Whether both providers record nothing. Once a real provider shows up (the
        globals can be set only once), the answer is False for good; while there is none,
        the globals are looked at again at most every `_NOOP_RECHECK` seconds."""
        now = time.monotonic()
        if now < self._noop_until:
            return True
        tracer_provider = self._tracer_provider
        if tracer_provider is None or isinstance(tracer_provider, trace.ProxyTracerProvider):
            tracer_provider = trace.get_tracer_provider()
        meter_provider = self._meter_provider
        if meter_provider is None or isinstance(meter_provider, _PROXY_METER_PROVIDER):
            meter_provider = metrics.get_meter_provider()
        if isinstance(tracer_provider, _NOOP_TRACER_PROVIDERS) and isinstance(
            meter_provider, _NOOP_METER_PROVIDERS
        ):
            self._noop_until = now + _NOOP_RECHECK
            return True
        self._recording = True
        return False

    def rejected(self, asgi_scope: Scope, message: IncomingMessage, error: McpError) -> None:
        """Emit a short span for a request whose method was readable but that validation
        rejected (protocol version, `_meta`, unknown method, header mismatch)."""
        try:
            if not self._recording and self._noop():
                return
            method = message.method if message.method in a.KNOWN_METHODS else a.OTHER
            attributes = _network(asgi_scope)
            attributes[a.MCP_METHOD_NAME] = method
            if message.id is not None:
                attributes[a.JSONRPC_REQUEST_ID] = str(message.id)
            attributes[a.RPC_RESPONSE_STATUS_CODE] = str(error.code)
            key = NAME_PARAM.get(method)
            target = message.params.get(key) if key else None
            name = _target(method, target if isinstance(target, str) else None, attributes)
            meta = message.params.get("_meta")
            parent, links = self.parent(meta if isinstance(meta, dict) else {})
            span = self.tracer.start_span(
                name, context=parent, kind=SpanKind.SERVER, attributes=attributes, links=links
            )
            try:
                if error.code not in a.CALLER_FAULT_CODES:
                    span.set_attribute(a.ERROR_TYPE, str(error.code))
                    span.set_status(Status(StatusCode.ERROR, error.message))
            finally:
                span.end()
        except Exception:
            self.failed()

    def parent(self, meta: Mapping[str, Any]) -> tuple[otel_context.Context | None, list[Link]]:
        """The context carried in `params._meta` (through the configured propagators) and a
        link to the ambient span; `(None, [])` when `_meta` carries no valid span context."""
        textmap = propagate.get_global_textmap()
        if textmap is not self._textmap:
            self._textmap, self._fields = textmap, tuple(textmap.fields)
        carrier = {k: v for k in self._fields if isinstance(v := meta.get(k), str)}
        if not carrier:
            return None, []
        current = otel_context.get_current()
        ambient = trace.get_current_span(current)
        extracted = textmap.extract(carrier, context=current)
        remote = trace.get_current_span(extracted)
        if remote is ambient or not remote.get_span_context().is_valid:
            return None, []
        ambient_context = ambient.get_span_context()
        return extracted, [Link(ambient_context)] if ambient_context.is_valid else []


def _guarded(hook: F) -> F:
    """Run an observer hook; a failure is reported, never raised."""

    @functools.wraps(hook)
    def guarded(self: RequestTelemetry, *args: Any) -> None:
        try:
            hook(self, *args)
        except Exception:
            self._t.failed()

    return guarded  # type: ignore[return-value]


class RequestTelemetry(ScopeObserver):
    """The span and metric attributes of one request; fed by its `RequestScope`."""

    def __init__(self, telemetry: Telemetry, asgi_scope: Scope, request: McpRequest) -> None:
        self._t = telemetry
        self._request = request
        method = request.method
        common = _network(asgi_scope)
        common[a.MCP_METHOD_NAME] = method
        common[a.MCP_PROTOCOL_VERSION] = request.protocol_version
        name = _target(method, request.target, common)
        self._metric_attrs = common
        self._active_attrs = {a.MCP_METHOD_NAME: method}
        attributes = dict(common)
        attributes[a.JSONRPC_REQUEST_ID] = str(request.id)
        if request.session_id is not None:  # 2025-era sessions only; never on metrics
            attributes[a.MCP_SESSION_ID] = request.session_id
        if method == "resources/read" and request.target:
            attributes[a.MCP_RESOURCE_URI] = request.target
        client = asgi_scope.get("client")
        if client:
            attributes[a.CLIENT_ADDRESS] = str(client[0])
            attributes[a.CLIENT_PORT] = int(client[1])
        parent, links = telemetry.parent(request.meta)
        self.span = telemetry.tracer.start_span(
            name, context=parent, kind=SpanKind.SERVER, attributes=attributes, links=links
        )
        self._context = trace.set_span_in_context(self.span, parent)
        self._ended = self._counted = self._orphaned = False
        try:
            if telemetry.record_arguments and method == "tools/call" and self.span.is_recording():
                arguments = request.params.get("arguments") or {}
                self.span.set_attribute(a.GEN_AI_TOOL_CALL_ARGUMENTS, _json(arguments))
            telemetry.active.add(1, self._active_attrs)
            self._counted = True
        except Exception:
            telemetry.failed()

    def activate(self) -> _Activation:
        """Make the span (and any baggage from `_meta`) current while the handler runs."""
        return _Activation(self._t, self._context)

    @_guarded
    def signalled(self, scope: RequestScope) -> None:
        reason = scope.reason
        if reason is None or scope.signalled_at is None or self._ended:
            return
        attributes = {
            a.CANCELLATION_REASON: reason.value,
            a.CANCELLATION_ELAPSED: max(0.0, scope.signalled_at - scope.started),
        }
        self.span.add_event(a.CANCELLATION_EVENT, attributes)
        self.span.set_attributes(attributes)

    @_guarded
    def side_effect(self, scope: RequestScope, effect: SideEffect) -> None:
        if self._ended:
            return
        if len(scope.side_effects) == 1:
            self.span.set_attribute(a.SIDE_EFFECT_NAME, effect.name)
        self.span.add_event(a.SIDE_EFFECT_EVENT, {a.SIDE_EFFECT_NAME: effect.name})

    @_guarded
    def ended(self, scope: RequestScope) -> None:
        if self._ended:
            return
        self._ended = True
        try:
            self._annotate(scope)
        finally:
            try:
                if self._counted:
                    self._t.active.add(-1, self._active_attrs)
            finally:
                self.span.end()

    @_guarded
    def orphan_exited(self, scope: RequestScope) -> None:
        if not self._orphaned:
            return
        self._orphaned = False
        self._t.orphans.add(-1, self._cancel_attrs(scope))
        if scope.exited_at is not None and scope.signalled_at is not None:
            latency = max(0.0, scope.exited_at - scope.signalled_at)
            self._t.cancel_latency.record(latency, self._latency_attrs(scope))

    # -- the end of the request ----------------------------------------------------

    def _annotate(self, scope: RequestScope) -> None:
        span, t = self.span, self._t
        metric_attrs = dict(self._metric_attrs)
        error_type = self._status(scope, metric_attrs)
        if error_type is not None:
            metric_attrs[a.ERROR_TYPE] = error_type
            span.set_attribute(a.ERROR_TYPE, error_type)
        if scope.reason is not None:
            metric_attrs[a.CANCELLATION_REASON] = scope.reason.value
            self._record_cancel(scope)
        elif (
            t.record_arguments
            and self._request.method == "tools/call"
            and scope.result is not None
            and span.is_recording()
        ):
            result = {k: v for k, v in scope.result.items() if k != "_meta"}
            span.set_attribute(a.GEN_AI_TOOL_CALL_RESULT, _json(result))
        t.duration.record(max(0.0, scope.clock() - scope.started), metric_attrs)

    def _status(self, scope: RequestScope, metric_attrs: dict[str, Any]) -> str | None:
        """Apply the status rules; return the `error.type`, or None when not an error."""
        span, error, reason = self.span, scope.error, scope.reason
        if error is not None and (reason is None or not reason.client_initiated):
            # a JSON-RPC error reply was sent (after a client cancel, nothing is)
            code = str(error.code)
            span.set_attribute(a.RPC_RESPONSE_STATUS_CODE, code)
            metric_attrs[a.RPC_RESPONSE_STATUS_CODE] = code
        if reason is not None:
            if scope.outcome == "orphaned":
                span.set_status(Status(StatusCode.ERROR, "handler did not exit after cancellation"))
                return "orphaned"
            if reason.client_initiated:
                return None
            message = error.message if error is not None else f"cancelled: {reason.value}"
            span.set_status(Status(StatusCode.ERROR, message))
            return reason.value
        if error is not None:
            if scope.exception is not None:
                span.record_exception(scope.exception)
                span.set_status(Status(StatusCode.ERROR, str(scope.exception)[:1024] or None))
                return _exception_type(scope.exception)
            if error.code in a.CALLER_FAULT_CODES:
                # the tool or prompt name came from the caller and may not exist: keep it
                # off metrics (cardinality)
                for key in (a.GEN_AI_TOOL_NAME, a.GEN_AI_PROMPT_NAME):
                    if key in metric_attrs:
                        metric_attrs[key] = a.OTHER
                return None
            span.set_status(Status(StatusCode.ERROR, error.message))
            return str(error.code)
        if scope.result is not None and scope.result.get("isError") is True:
            span.set_status(Status(StatusCode.ERROR, "tool returned an error"))
            return "tool_error"
        return None

    def _record_cancel(self, scope: RequestScope) -> None:
        span, t = self.span, self._t
        span.set_attribute(a.CANCELLATION_OUTCOME, str(scope.outcome))
        span.set_attribute(a.CANCELLATION_AFTER_SIDE_EFFECT, scope.after_side_effect)
        counter_attrs = self._latency_attrs(scope)
        counter_attrs[a.CANCELLATION_AFTER_SIDE_EFFECT] = scope.after_side_effect
        t.cancellations.add(1, counter_attrs)
        if scope.outcome == "orphaned":
            t.orphans.add(1, self._cancel_attrs(scope))
            self._orphaned = True
        elif (  # `too_late`: the work was done before the signal, there is no latency
            scope.outcome == "exited"
            and scope.exited_at is not None
            and scope.signalled_at is not None
        ):
            latency = max(0.0, scope.exited_at - scope.signalled_at)
            span.set_attribute(a.CANCELLATION_LATENCY, latency)
            t.cancel_latency.record(latency, self._latency_attrs(scope))

    def _cancel_attrs(self, scope: RequestScope) -> dict[str, Any]:
        attrs: dict[str, Any] = {a.MCP_METHOD_NAME: self._request.method}
        tool = self._metric_attrs.get(a.GEN_AI_TOOL_NAME)
        if tool is not None:
            attrs[a.GEN_AI_TOOL_NAME] = tool
        if scope.reason is not None:
            attrs[a.CANCELLATION_REASON] = scope.reason.value
        return attrs

    def _latency_attrs(self, scope: RequestScope) -> dict[str, Any]:
        attrs = self._cancel_attrs(scope)
        attrs[a.CANCELLATION_OUTCOME] = str(scope.outcome)
        return attrs


class _ContextOnly(ScopeObserver):
    """No SDK: no span and no metric; the handler still runs in the `_meta` context."""

    def __init__(self, telemetry: Telemetry, context: otel_context.Context) -> None:
        self._t = telemetry
        self._context = context

    def activate(self) -> _Activation:
        return _Activation(self._t, self._context)


class _Activation:
    """Attach a context for the handler's duration; failures are reported, never raised."""

    __slots__ = ("_context", "_t", "_token")

    def __init__(self, telemetry: Telemetry, context: otel_context.Context) -> None:
        self._t = telemetry
        self._context = context
        self._token: Token[otel_context.Context] | None = None

    def __enter__(self) -> None:
        try:
            self._token = otel_context.attach(self._context)
        except Exception:
            self._t.failed()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._token is not None:
            try:
                otel_context.detach(self._token)
            except Exception:
                self._t.failed()


def _network(asgi_scope: Scope) -> dict[str, Any]:
    attributes: dict[str, Any] = {a.NETWORK_TRANSPORT: "tcp", a.NETWORK_PROTOCOL_NAME: "http"}
    http_version = asgi_scope.get("http_version")
    if http_version:
        attributes[a.NETWORK_PROTOCOL_VERSION] = str(http_version)
    return attributes


def _target(method: str, target: str | None, attributes: dict[str, Any]) -> str:
    """Add the tool or prompt attributes and return the span name."""
    if not target:
        return method
    if method == "tools/call":
        attributes[a.GEN_AI_TOOL_NAME] = target
        attributes[a.GEN_AI_OPERATION_NAME] = "execute_tool"
    elif method == "prompts/get":
        attributes[a.GEN_AI_PROMPT_NAME] = target
    else:
        return method  # a resource URI is never part of the name
    return f"{method} {target}"


def _exception_type(exc: BaseException) -> str:
    cls = type(exc)
    if cls.__module__ == "builtins":
        return cls.__qualname__
    return f"{cls.__module__}.{cls.__qualname__}"


def _json(value: Any) -> str:
    try:
        text = json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return "<unserialisable>"
    return text if len(text) <= _MAX_JSON else text[:_MAX_JSON] + "…"
