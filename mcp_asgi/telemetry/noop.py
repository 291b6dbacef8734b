"""The no-SDK fast path: telling when the providers record nothing, and the observer used then.

Without an SDK every API call is a cheap no-op, but building a span's name and attributes
is not. When both providers are the API's defaults, no span is built: only a trace context
carried in `_meta` is made current for the handler (`ContextOnly`), so that its own
outgoing calls still propagate it.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Final

from opentelemetry import context as otel_context
from opentelemetry import metrics, trace
from opentelemetry.metrics import _internal as _metrics_internal

from mcp_asgi.lifecycle.outcome import ScopeObserver
from mcp_asgi.telemetry.trace_context import Activation

# Providers that record nothing: the API's defaults when no SDK is configured. The global
# meter proxy is private API, hence the guarded lookup (without it: no fast path).
_NOOP_TRACER_PROVIDERS: tuple[type, ...] = (trace.NoOpTracerProvider, trace.ProxyTracerProvider)
_PROXY_METER_PROVIDER: tuple[type, ...] = tuple(
    t for t in (getattr(_metrics_internal, "_ProxyMeterProvider", None),) if isinstance(t, type)
)
_NOOP_METER_PROVIDERS = (metrics.NoOpMeterProvider, *_PROXY_METER_PROVIDER)
_RECHECK: Final = 1.0  # seconds: a global provider set later is used within this delay


class ProviderWatch:
    """Whether the injected providers (or the globals, when none is injected) record nothing."""

    def __init__(
        self,
        tracer_provider: trace.TracerProvider | None,
        meter_provider: metrics.MeterProvider | None,
    ) -> None:
        self._tracer_provider = tracer_provider
        self._meter_provider = meter_provider
        self._recording = False
        self.noop_until = -math.inf
        """Until when (`time.monotonic()`) both are known to record nothing: `noop()` needs
        no call before then."""

    def noop(self) -> bool:
        """Whether both providers record nothing. Once a real provider shows up (the
        globals can be set only once), the answer is False for good; while there is none,
        the globals are looked at again at most every `_RECHECK` seconds."""
        if self._recording:
            return False
        now = time.monotonic()
        if now < self.noop_until:
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
            self.noop_until = now + _RECHECK
            return True
        self._recording = True
        return False


class ContextOnly(ScopeObserver):
    """No SDK: no span and no metric; the handler still runs in the `_meta` context."""

    def __init__(self, context: otel_context.Context, failed: Callable[[], None]) -> None:
        self._context = context
        self._failed = failed

    def activate(self) -> Activation:
        return Activation(self._context, self._failed)
