"""`Telemetry`: the tracer and instruments of one middleware; a `RequestTelemetry` per request."""

from __future__ import annotations

import logging
import time

from opentelemetry import metrics, trace
from opentelemetry.trace import SpanKind
from starlette.types import Scope

from mcp_asgi._loggers import telemetry_logger as logger
from mcp_asgi._version import __version__
from mcp_asgi.auth.guard import AuthError
from mcp_asgi.auth.principal import principal_in
from mcp_asgi.lifecycle.outcome import ScopeObserver
from mcp_asgi.protocol.jsonrpc import McpError
from mcp_asgi.protocol.message import IncomingMessage
from mcp_asgi.protocol.request import McpRequest
from mcp_asgi.telemetry import names as a
from mcp_asgi.telemetry.instruments import ActiveWatch, Instruments, get_meter
from mcp_asgi.telemetry.noop import ContextOnly, ProviderWatch
from mcp_asgi.telemetry.request_telemetry import RequestTelemetry
from mcp_asgi.telemetry.span_attributes import SpanShapes, principal_attributes, rejected_span
from mcp_asgi.telemetry.status import error_reply
from mcp_asgi.telemetry.task_telemetry import TaskTelemetry
from mcp_asgi.telemetry.trace_context import ParentContext

__all__ = ["RequestTelemetry", "Telemetry"]

_NOOP = ScopeObserver()


class Telemetry:
    """The tracer and instruments of one middleware; makes a `RequestTelemetry` per request."""

    def __init__(
        self,
        tracer_provider: trace.TracerProvider | None = None,
        meter_provider: metrics.MeterProvider | None = None,
        *,
        record_arguments: bool = False,
        record_principal: bool = False,
    ) -> None:
        self.record_arguments = record_arguments
        self.record_principal = record_principal
        self.parent_context = ParentContext()
        self.shapes = SpanShapes(record_principal=record_principal)
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
            providers = self._providers
            if time.monotonic() < providers.noop_until or providers.noop():  # a call less
                parent, _ = self.parent_context.extract(request.meta)
                return _NOOP if parent is None else ContextOnly(parent, self.failed)
            return RequestTelemetry(self, asgi_scope, request)
        except Exception:
            self.failed()
            return _NOOP

    def begin_task(self, asgi_scope: Scope, request: McpRequest) -> TaskTelemetry | None:
        """Start the span of a task's work (call it where the creating request's span is
        current: it is linked); None if telemetry fails."""
        try:
            return TaskTelemetry(self, asgi_scope, request)
        except Exception:
            self.failed()
            return None

    def auth_failed(self, reason: str) -> None:
        """Count a request refused by authorization (`mcp_asgi.auth.failures`, by reason)."""
        try:
            self.instruments.auth_failures.add(1, {a.AUTH_FAILURE_REASON: reason})
        except Exception:
            self.failed()

    def limited(self, limit: str) -> None:
        """Count a request answered 429 (`mcp_asgi.limits.refused`, by the limit's setting)."""
        try:
            self.instruments.limits_refused.add(1, {a.LIMIT: limit})
        except Exception:
            self.failed()

    def rejected(self, asgi_scope: Scope, message: IncomingMessage, error: McpError) -> None:
        """Emit a short span for a request whose method was readable but that validation
        rejected (protocol version, `_meta`, unknown method, header mismatch)."""
        try:
            if self._providers.noop():
                return
            name, attributes = rejected_span(asgi_scope, message, error)
            principal = principal_in(asgi_scope)
            if principal is not None:
                principal_attributes(attributes, principal, record_principal=self.record_principal)
            if isinstance(error, AuthError):
                attributes[a.AUTH_OUTCOME] = error.reason
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
