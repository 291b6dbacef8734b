"""Trace context: the parent a request's span takes from `params._meta`, and making a
context current while the handler runs."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextvars import Token
from types import TracebackType
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry.trace import Link


class ParentContext:
    """Extracts the context carried in `params._meta` with the configured propagators."""

    def __init__(self) -> None:
        self._textmap: object = None
        self._fields: frozenset[str] = frozenset()

    def extract(self, meta: Mapping[str, Any]) -> tuple[otel_context.Context | None, list[Link]]:
        """The context carried in `meta` and a link to the ambient span; `(None, [])` when
        `meta` carries no valid span context (the span then takes the ambient one)."""
        textmap = propagate.get_global_textmap()
        if textmap is not self._textmap:
            self._textmap, self._fields = textmap, frozenset(textmap.fields)
        fields = self._fields
        if fields.isdisjoint(meta):  # none of the propagators' keys (most requests): one C call
            return None, []
        carrier = {k: v for k in fields if isinstance(v := meta.get(k), str)}
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


class Activation:
    """Attach a context for the handler's duration; failures are reported, never raised."""

    __slots__ = ("_context", "_failed", "_token")

    def __init__(self, context: otel_context.Context, failed: Callable[[], None]) -> None:
        self._context = context
        self._failed = failed
        self._token: Token[otel_context.Context] | None = None

    def __enter__(self) -> None:
        try:
            self._token = otel_context.attach(self._context)
        except Exception:
            self._failed()

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
                self._failed()
