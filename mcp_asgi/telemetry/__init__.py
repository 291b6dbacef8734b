"""OpenTelemetry: one SERVER span per JSON-RPC request, and the metrics of cancellation.

Uses only `opentelemetry-api`; providers are injected or taken from the globals. Never
configures the SDK. Without an SDK every call is the API's cheap no-op.

A telemetry failure never breaks a request: every entry point (`Telemetry.__init__`,
`begin`, `rejected`, each observer hook and `activate`) catches its own exceptions, reports
the first one at WARNING on the `mcp_asgi.telemetry` logger (later ones at DEBUG) and goes on.

    __init__           Telemetry: the tracer and instruments of one middleware
    _request           RequestTelemetry: one request's span, start to end
    _status            the status rules: error or not, and `error.type`
    _metrics           the instruments, and the attributes a request's metrics carry
    _span_attributes   a span's name and attributes, read from the request
    _context           the parent context from `_meta`; activating a context
    _noop              the no-SDK fast path
"""

from __future__ import annotations

import logging

from opentelemetry import metrics, trace
from opentelemetry.trace import SpanKind

from .. import _attributes as a
from .._asgi import Scope
from .._request import IncomingMessage
from .._validate import McpRequest
from .._version import __version__
from ..jsonrpc import McpError
from ..scope import ScopeObserver
from ._context import ParentContext
from ._metrics import ActiveWatch, Instruments, get_meter
from ._noop import ContextOnly, ProviderWatch
from ._request import RequestTelemetry
from ._span_attributes import SpanShapes, rejected_span
from ._status import error_reply

__all__ = ["RequestTelemetry", "Telemetry"]

logger = logging.getLogger("mcp_asgi.telemetry")
_NOOP = ScopeObserver()


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
        self.parent_context = ParentContext()
        self.shapes = SpanShapes()
        self._providers = ProviderWatch(tracer_provider, meter_provider)
        self._warned = False
        self.active = ActiveWatch(meter_provider, self.failed)
        try:
            self.tracer = trace.get_tracer(
                "mcp_asgi", __version__, tracer_provider, schema_url=a.SCHEMA_URL
            )
        except Exception:
            self.failed()
            self.tracer = trace.NoOpTracer()
        try:
            self.instruments = Instruments(get_meter(meter_provider))
        except Exception:
            self.failed()
            self.instruments = Instruments(metrics.NoOpMeter("mcp_asgi"))

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

        Without an SDK (no-op or not-yet-configured providers) no span is built: only a
        trace context carried in `_meta` is made current for the handler.
        """
        try:
            if self._providers.noop():
                parent, _ = self.parent_context.extract(request.meta)
                return _NOOP if parent is None else ContextOnly(parent, self.failed)
            return RequestTelemetry(self, asgi_scope, request)
        except Exception:
            self.failed()
            return _NOOP

    def rejected(self, asgi_scope: Scope, message: IncomingMessage, error: McpError) -> None:
        """Emit a short span for a request whose method was readable but that validation
        rejected (protocol version, `_meta`, unknown method, header mismatch)."""
        try:
            if self._providers.noop():
                return
            name, attributes = rejected_span(asgi_scope, message, error)
            meta = message.params.get("_meta")
            parent, links = self.parent_context.extract(meta if isinstance(meta, dict) else {})
            span = self.tracer.start_span(
                name, context=parent, kind=SpanKind.SERVER, attributes=attributes, links=links
            )
            try:
                error_type = error_reply(span, error)
                if error_type is not None:
                    span.set_attribute(a.ERROR_TYPE, error_type)
            finally:
                span.end()
        except Exception:
            self.failed()
