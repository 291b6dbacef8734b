"""The metric instruments, and the attributes one request's metrics carry.

Metric attributes have low cardinality: never request ids, URIs or arguments.
"""

from __future__ import annotations

from typing import Any

from opentelemetry import metrics

from .. import _attributes as a
from ..scope import RequestScope


class Instruments:
    """The instruments of one middleware, made from one meter."""

    __slots__ = ("active", "cancel_latency", "cancellations", "duration", "orphans")

    def __init__(self, meter: metrics.Meter) -> None:
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


class RequestMetrics:
    """The metric attributes of one request."""

    __slots__ = ("active", "common", "method")

    def __init__(self, common: dict[str, Any], method: str) -> None:
        self.common = common  # the duration's, before the outcome is known
        self.method = method
        self.active = {a.MCP_METHOD_NAME: method}

    def cancelled(self, scope: RequestScope) -> dict[str, Any]:
        """The orphan gauge's: method, tool and reason."""
        attrs: dict[str, Any] = {a.MCP_METHOD_NAME: self.method}
        tool = self.common.get(a.GEN_AI_TOOL_NAME)
        if tool is not None:
            attrs[a.GEN_AI_TOOL_NAME] = tool
        if scope.reason is not None:
            attrs[a.CANCELLATION_REASON] = scope.reason.value
        return attrs

    def latency(self, scope: RequestScope) -> dict[str, Any]:
        """The cancel latency's (and the cancellations counter's): `cancelled`, and the outcome."""
        attrs = self.cancelled(scope)
        attrs[a.CANCELLATION_OUTCOME] = str(scope.outcome)
        return attrs


def cancel_latency(scope: RequestScope) -> float | None:
    """Seconds from the cancel signal until the work exited; None if either is unknown."""
    if scope.exited_at is None or scope.signalled_at is None:
        return None
    return max(0.0, scope.exited_at - scope.signalled_at)
