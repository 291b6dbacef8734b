"""`RequestTelemetry`: one request's span, from validation to the handler's real exit.

__init__        start the span (parent from `_meta`), count the request as in flight
signalled       cancellation event and attributes
side_effect     side-effect event (the first one's name as an attribute)
ended           status, cancellation metrics, duration; end the span
orphan_exited   an orphan finally returned: its gauge falls, its latency is recorded
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from opentelemetry import trace
from opentelemetry.trace import SpanKind
from starlette.types import Scope

from mcp_asgi.lifecycle.outcome import RequestRecord, ScopeObserver, SideEffect
from mcp_asgi.protocol.request import McpRequest
from mcp_asgi.telemetry import names as a
from mcp_asgi.telemetry.instruments import (
    ActiveRequests,
    ActiveWatch,
    Instruments,
    RequestMetrics,
)
from mcp_asgi.telemetry.span_attributes import SpanShapes, json_value
from mcp_asgi.telemetry.status import classify
from mcp_asgi.telemetry.trace_context import Activation, ParentContext

F = TypeVar("F", bound=Callable[..., None])


class TelemetryParts(Protocol):
    """What a request's telemetry uses of its middleware's `Telemetry` (which has them all).

    Declared here so that `telemetry` imports this module and not the other way round.
    """

    record_arguments: bool
    parent_context: ParentContext
    shapes: SpanShapes
    tracer: trace.Tracer
    active: ActiveWatch
    instruments: Instruments

    def failed(self) -> None: ...


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

    def __init__(self, telemetry: TelemetryParts, asgi_scope: Scope, request: McpRequest) -> None:
        self._t = telemetry
        self._request = request
        name, common, attributes = telemetry.shapes.request_span(asgi_scope, request)
        self._metrics = RequestMetrics(common, request.method)
        parent, links = telemetry.parent_context.extract(request.meta)
        self.span = telemetry.tracer.start_span(
            name, context=parent, kind=SpanKind.SERVER, attributes=attributes, links=links
        )
        self._context = trace.set_span_in_context(self.span, parent)
        self._ended = self._orphaned = False
        self._active: ActiveRequests | None = None  # the counts this request is in
        try:
            if self._records_tool_io():
                arguments = request.params.get("arguments") or {}
                self.span.set_attribute(a.GEN_AI_TOOL_CALL_ARGUMENTS, json_value(arguments))
            active = telemetry.active.get()
            active.add(request.method, 1)
            self._active = active
        except Exception:
            telemetry.failed()

    def activate(self) -> Activation:
        """Make the span (and any baggage from `_meta`) current while the handler runs."""
        return Activation(self._context, self._t.failed)

    @_guarded
    def signalled(self, record: RequestRecord) -> None:
        if not self._ended:
            mark_cancel_signal(self.span, record)

    @_guarded
    def side_effect(self, record: RequestRecord, effect: SideEffect) -> None:
        if self._ended:
            return
        if len(record.side_effects) == 1:
            self.span.set_attribute(a.SIDE_EFFECT_NAME, effect.name)
        self.span.add_event(a.SIDE_EFFECT_EVENT, {a.SIDE_EFFECT_NAME: effect.name})

    @_guarded
    def ended(self, record: RequestRecord) -> None:
        if self._ended:
            return
        self._ended = True
        try:
            self._annotate(record)
        finally:
            try:
                if self._active is not None:
                    self._active.add(self._request.method, -1)
            finally:
                self.span.end()

    @_guarded
    def orphan_exited(self, record: RequestRecord) -> None:
        if not self._orphaned:
            return
        self._orphaned = False
        instruments = self._t.instruments
        instruments.orphans.add(-1, self._metrics.cancelled(record))
        latency = record.cancel_latency
        if latency is not None:
            instruments.cancel_latency.record(latency, self._metrics.latency(record))

    # -- the end of the request ----------------------------------------------------

    def _records_tool_io(self) -> bool:
        """Whether tool arguments and results go on this span (the user opted in)."""
        return (
            self._t.record_arguments
            and self._request.method == "tools/call"
            and self.span.is_recording()
        )

    def _annotate(self, record: RequestRecord) -> None:
        span = self.span
        metric_attrs = dict(self._metrics.common)
        error_type = classify(span, record, metric_attrs)
        if error_type is not None:
            metric_attrs[a.ERROR_TYPE] = error_type
            span.set_attribute(a.ERROR_TYPE, error_type)
        if record.reason is not None:
            metric_attrs[a.CANCELLATION_REASON] = record.reason.value
            self._record_cancel(record)
        elif record.result is not None and self._records_tool_io():
            result = {k: v for k, v in record.result.items() if k != "_meta"}
            span.set_attribute(a.GEN_AI_TOOL_CALL_RESULT, json_value(result))
        self._t.instruments.duration.record(record.duration, metric_attrs)

    def _record_cancel(self, record: RequestRecord) -> None:
        span, instruments, metrics = self.span, self._t.instruments, self._metrics
        span.set_attribute(a.CANCELLATION_OUTCOME, str(record.outcome))
        span.set_attribute(a.CANCELLATION_AFTER_SIDE_EFFECT, record.after_side_effect)
        counter_attrs = metrics.latency(record)
        counter_attrs[a.CANCELLATION_AFTER_SIDE_EFFECT] = record.after_side_effect
        instruments.cancellations.add(1, counter_attrs)
        if record.outcome == "orphaned":
            instruments.orphans.add(1, metrics.cancelled(record))
            self._orphaned = True
            return
        latency = record.cancel_latency
        # `too_late`: the work was done before the signal, there is no latency
        if record.outcome == "exited" and latency is not None:
            span.set_attribute(a.CANCELLATION_LATENCY, latency)
            instruments.cancel_latency.record(latency, metrics.latency(record))


def mark_cancel_signal(span: trace.Span, record: RequestRecord) -> None:
    """The cancellation event, and its reason and elapsed time as span attributes."""
    reason, elapsed = record.reason, record.elapsed
    if reason is None or elapsed is None:
        return
    attributes = {a.CANCELLATION_REASON: reason.value, a.CANCELLATION_ELAPSED: elapsed}
    span.add_event(a.CANCELLATION_EVENT, attributes)
    span.set_attributes(attributes)
