"""The status rules (docs/observability.md, "Status rules"): whether a request is an error,
and its `error.type`.

A client that gives up is not an error; a server that cancels, a handler that fails or
will not exit, a tool error and any JSON-RPC error that is not the caller's fault are.
"""

from __future__ import annotations

from typing import Any

from opentelemetry.trace import Span, Status, StatusCode

from mcp_asgi.lifecycle.cancel import CancelReason
from mcp_asgi.lifecycle.outcome import RequestRecord
from mcp_asgi.protocol.jsonrpc import McpError
from mcp_asgi.telemetry import names as a


def classify(span: Span, record: RequestRecord, metric_attrs: dict[str, Any]) -> str | None:
    """Set the span's status and the response code (also on `metric_attrs`); return the
    `error.type`, or None when the request is not an error."""
    error, reason = record.error, record.reason
    if error is not None and (reason is None or not reason.client_initiated):
        # a JSON-RPC error reply was sent (after a client cancel, nothing is)
        code = str(error.code)
        span.set_attribute(a.RPC_RESPONSE_STATUS_CODE, code)
        metric_attrs[a.RPC_RESPONSE_STATUS_CODE] = code
    if reason is not None:
        return _cancelled(span, record, reason, error)
    if error is not None:
        return _failed(span, record, error, metric_attrs)
    if record.result is not None and record.result.get("isError") is True:
        span.set_status(Status(StatusCode.ERROR, "tool returned an error"))
        return "tool_error"
    return None


def error_reply(span: Span, error: McpError) -> str | None:
    """A JSON-RPC error reply: the caller's fault is no error (None); any other code sets
    the span's status and is the `error.type`."""
    if error.code in a.CALLER_FAULT_CODES:
        return None
    span.set_status(Status(StatusCode.ERROR, error.message))
    return str(error.code)


def _cancelled(
    span: Span, record: RequestRecord, reason: CancelReason, error: McpError | None
) -> str | None:
    if record.outcome == "orphaned":
        span.set_status(Status(StatusCode.ERROR, "handler did not exit after cancellation"))
        return "orphaned"
    if reason.client_initiated:
        return None
    message = error.message if error is not None else f"cancelled: {reason.value}"
    span.set_status(Status(StatusCode.ERROR, message))
    return reason.value


def _failed(
    span: Span, record: RequestRecord, error: McpError, metric_attrs: dict[str, Any]
) -> str | None:
    if record.exception is not None:
        span.record_exception(record.exception)
        span.set_status(Status(StatusCode.ERROR, str(record.exception)[:1024] or None))
        return _exception_type(record.exception)
    error_type = error_reply(span, error)
    if error_type is None:
        # the tool or prompt name came from the caller and may not exist: keep it off
        # metrics (cardinality)
        for key in (a.GEN_AI_TOOL_NAME, a.GEN_AI_PROMPT_NAME):
            if key in metric_attrs:
                metric_attrs[key] = a.OTHER
    return error_type


def _exception_type(exc: BaseException) -> str:
    cls = type(exc)
    if cls.__module__ == "builtins":
        return cls.__qualname__
    return f"{cls.__module__}.{cls.__qualname__}"
