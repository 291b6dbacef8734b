"""The metric instruments, and the attributes one request's metrics carry.

Metric attributes have low cardinality: never request ids, URIs or arguments.

`mcp_asgi.requests.active` is an asynchronous up-down counter: each request only moves a
count kept here, and the SDK reads the counts when it collects. The exported data is that
of a synchronous up-down counter (a non-monotonic sum per `mcp.method.name`), without two
measurements through the SDK per request.

The up-down counters (requests, orphans and tasks active) also have a point without
attributes at 0 from the moment a recording meter is known, so that a backend sums them to
0 rather than to "no data" before the first request, orphan or task.
"""

from __future__ import annotations

import math
import threading
import time
import weakref
from collections.abc import Callable, Iterable
from typing import Any

from opentelemetry import metrics
from opentelemetry.metrics import CallbackOptions, Observation

from mcp_asgi._version import __version__
from mcp_asgi.lifecycle.outcome import RequestRecord
from mcp_asgi.telemetry import names as a
from mcp_asgi.telemetry.noop import _NOOP_METER_PROVIDERS, _PROXY_METER_PROVIDER, _RECHECK


def get_meter(meter_provider: metrics.MeterProvider | None) -> metrics.Meter:
    """mcp_asgi's meter from `meter_provider` (None: the global one)."""
    return metrics.get_meter("mcp_asgi", __version__, meter_provider, schema_url=a.SCHEMA_URL)


class Instruments:
    """The synchronous instruments of one middleware, made from one meter."""

    __slots__ = (
        "auth_failures",
        "cancel_latency",
        "cancellations",
        "duration",
        "limits_refused",
        "orphans",
        "tasks_active",
        "tasks_ended",
    )

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
        self.orphans = _orphans(meter)
        self.auth_failures = meter.create_counter(
            a.AUTH_FAILURES,
            unit="{request}",
            description="Requests refused by authorization (401, 403, 400, 503), by reason.",
        )
        self.limits_refused = meter.create_counter(
            a.LIMITS_REFUSED,
            unit="{request}",
            description="Requests answered 429 by a per-client limit, by the limit's setting.",
        )
        self.tasks_active = _tasks_active(meter)
        self.tasks_ended = meter.create_counter(
            a.TASKS_ENDED, unit="{task}", description="Tasks ended in this process, by status."
        )


def _orphans(meter: metrics.Meter) -> metrics.UpDownCounter:
    return meter.create_up_down_counter(
        a.ORPHANS_ACTIVE,
        unit="{handler}",
        description="Cancelled handlers still running past the cancel grace period.",
    )


def _tasks_active(meter: metrics.Meter) -> metrics.UpDownCounter:
    return meter.create_up_down_counter(
        a.TASKS_ACTIVE, unit="{task}", description="Tasks whose work runs in this process."
    )


class ActiveRequests:
    """Requests in flight by method: what `mcp_asgi.requests.active` reports when observed.

    `add` runs on the event loop, `observe` on the metric reader's thread.
    """

    __slots__ = ("__weakref__", "_counts", "_lock")

    def __init__(self) -> None:
        self._counts: dict[str, int] = {}
        self._lock = threading.Lock()

    def add(self, method: str, delta: int) -> None:
        with self._lock:
            self._counts[method] = self._counts.get(method, 0) + delta

    def observe(self, options: CallbackOptions) -> Iterable[Observation]:
        """The instrument's callback: a point without attributes at 0, and one per method
        seen (0 once none is in flight)."""
        with self._lock:
            counts = list(self._counts.items())
        return [
            Observation(0),
            *(Observation(count, {a.MCP_METHOD_NAME: method}) for method, count in counts),
        ]


# The SDK keeps the callbacks of the first registration of an instrument name on a meter
# (a meter is shared by every middleware that asks its provider for `mcp_asgi`): the counts
# are kept per meter, and every middleware recording to that meter adds to the same ones.
_OBSERVED: weakref.WeakKeyDictionary[metrics.Meter, ActiveRequests] = weakref.WeakKeyDictionary()
_OBSERVED_LOCK = threading.Lock()


def observed_active(meter: metrics.Meter) -> ActiveRequests:
    """The in-flight counts that `meter`'s `mcp_asgi.requests.active` reports; the
    instrument is registered on the first call for a meter, and the other up-down counters
    get their point at 0 (the same instruments the middlewares' `Instruments` record to: the
    SDK returns an instrument already made with the same name)."""
    with _OBSERVED_LOCK:
        active = _OBSERVED.get(meter)
        if active is None:
            active = ActiveRequests()
            meter.create_observable_up_down_counter(
                a.REQUESTS_ACTIVE,
                callbacks=[active.observe],
                unit="{request}",
                description="MCP requests in flight.",
            )
            _orphans(meter).add(0)
            _tasks_active(meter).add(0)
            _OBSERVED[meter] = active
        return active


class ActiveWatch:
    """The in-flight counts of one middleware's requests: those of the meter they are
    reported on, once a provider that records is there (injected, or the global one, looked
    at again at most every `_RECHECK` seconds until it is set); until then, counts that
    nothing observes."""

    def __init__(
        self, meter_provider: metrics.MeterProvider | None, failed: Callable[[], None]
    ) -> None:
        self._meter_provider = meter_provider
        self._failed = failed
        self._active: ActiveRequests | None = None
        self._unobserved = ActiveRequests()
        self._retry_at = -math.inf
        self.get()  # a provider already there reports the up-down counters from start-up
        self._retry_at = -math.inf  # else the first request looks again (a provider set since)

    def get(self) -> ActiveRequests:
        active = self._active
        if active is not None:
            return active
        now = time.monotonic()
        if now < self._retry_at:
            return self._unobserved
        self._retry_at = now + _RECHECK
        try:
            provider = self._meter_provider
            if provider is None or isinstance(provider, _PROXY_METER_PROVIDER):
                provider = metrics.get_meter_provider()
            if isinstance(provider, _NOOP_METER_PROVIDERS):
                return self._unobserved
            active = self._active = observed_active(get_meter(provider))
        except Exception:
            self._failed()
            return self._unobserved
        return active


class RequestMetrics:
    """The metric attributes of one request."""

    __slots__ = ("common", "method")

    def __init__(self, common: dict[str, Any], method: str) -> None:
        self.common = common  # the duration's, before the outcome is known; shared: read only
        self.method = method

    def cancelled(self, record: RequestRecord) -> dict[str, Any]:
        """The orphan gauge's: method, tool and reason."""
        attrs: dict[str, Any] = {a.MCP_METHOD_NAME: self.method}
        tool = self.common.get(a.GEN_AI_TOOL_NAME)
        if tool is not None:
            attrs[a.GEN_AI_TOOL_NAME] = tool
        if record.reason is not None:
            attrs[a.CANCELLATION_REASON] = record.reason.value
        return attrs

    def latency(self, record: RequestRecord) -> dict[str, Any]:
        """The cancel latency's (and the cancellations counter's): `cancelled`, and the outcome."""
        attrs = self.cancelled(record)
        attrs[a.CANCELLATION_OUTCOME] = str(record.outcome)
        return attrs
