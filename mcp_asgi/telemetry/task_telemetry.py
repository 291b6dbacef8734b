"""`TaskTelemetry`: the span and metrics of a task's work (the Tasks extension).

A task's work is not the request that created it: its span (`task {tool}`, INTERNAL) is
a root of its own, linked to the creating request's span (current when the work starts),
so an hour-long task neither stretches that trace nor the request duration histogram. It
carries the cancellation attributes of any request scope; each status the task takes is
a span event (`mcp_asgi.task.status`). Metrics: `mcp_asgi.tasks.active` while a task's
work runs here, `mcp_asgi.tasks` by final status. The task id is never recorded.
"""

from __future__ import annotations

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Link, SpanKind
from starlette.types import Scope

from mcp_asgi.lifecycle.cancel import CancelReason
from mcp_asgi.lifecycle.outcome import RequestRecord, ScopeObserver, SideEffect
from mcp_asgi.protocol.request import McpRequest
from mcp_asgi.telemetry import names as a
from mcp_asgi.telemetry.request_telemetry import TelemetryParts, _guarded, mark_cancel_signal
from mcp_asgi.telemetry.status import classify
from mcp_asgi.telemetry.trace_context import Activation


class TaskTelemetry(ScopeObserver):
    """Observes the scope a task's work runs under; told of its statuses by the tasks."""

    def __init__(self, telemetry: TelemetryParts, asgi_scope: Scope, request: McpRequest) -> None:
        self._t = telemetry
        creator = trace.get_current_span().get_span_context()
        _, _, attributes = telemetry.shapes.request_span(asgi_scope, request)
        attributes.pop(a.JSONRPC_REQUEST_ID, None)  # the creating request's, not the task's
        self._common = {a.GEN_AI_TOOL_NAME: str(request.target)}  # the metrics' attributes
        self.span = telemetry.tracer.start_span(
            f"task {request.target}",
            context=otel_context.Context(),  # a root: the creator is linked, not a parent
            kind=SpanKind.INTERNAL,
            attributes=attributes,
            links=[Link(creator)] if creator.is_valid else None,
        )
        self._context = trace.set_span_in_context(self.span)
        self._promoted = self._ended = False

    def activate(self) -> Activation:
        return Activation(self._context, self._t.failed)

    @_guarded
    def promoted(self) -> None:
        """The work became a task (it was stored): counted as active from now on."""
        if self._promoted:
            return
        self._promoted = True
        self._t.instruments.tasks_active.add(1, self._common)
        self.span.add_event(a.TASK_STATUS_EVENT, {a.TASK_STATUS: "working"})

    @_guarded
    def status(self, status: str) -> None:
        """The task took `status` (input_required, working) while its work runs."""
        if not self._ended:
            self.span.add_event(a.TASK_STATUS_EVENT, {a.TASK_STATUS: status})

    @_guarded
    def signalled(self, record: RequestRecord) -> None:
        if not self._ended:
            mark_cancel_signal(self.span, record)

    @_guarded
    def side_effect(self, record: RequestRecord, effect: SideEffect) -> None:
        if not self._ended:
            self.span.add_event(a.SIDE_EFFECT_EVENT, {a.SIDE_EFFECT_NAME: effect.name})

    @_guarded
    def ended(self, record: RequestRecord) -> None:
        if self._ended:
            return
        self._ended = True
        try:
            error_type = classify(self.span, record, {})
            if error_type is not None:
                self.span.set_attribute(a.ERROR_TYPE, error_type)
            if record.reason is not None:
                self.span.set_attribute(a.CANCELLATION_OUTCOME, str(record.outcome))
                if record.outcome == "exited" and record.cancel_latency is not None:
                    self.span.set_attribute(a.CANCELLATION_LATENCY, record.cancel_latency)
            if self._promoted:
                status = final_status(record)
                self.span.add_event(a.TASK_STATUS_EVENT, {a.TASK_STATUS: status})
                instruments = self._t.instruments
                instruments.tasks_active.add(-1, self._common)
                instruments.tasks_ended.add(1, {**self._common, a.TASK_STATUS: status})
        finally:
            self.span.end()


def final_status(record: RequestRecord) -> str:
    """The status a task's finished work gives it."""
    if record.reason is CancelReason.TASK_CANCELLED:
        return "cancelled"
    if record.reason is not None or record.error is not None or record.result is None:
        return "failed"
    return "completed"
