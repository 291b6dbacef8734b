"""The cancellation log: one record per cancelled request on `mcp_asgi.cancellation`.

The record answers "why did this stop?" with structured fields (`extra=`); its message
names the method and the tool or prompt (`tools/call search cancelled: client_disconnect
(exited) after 0.503s`). It is INFO, or
WARNING when the cancel came after a side effect (a reconciliation item). An ignored cancel
and an orphan's late exit are DEBUG. Never arguments, results or header values.
"""

from __future__ import annotations

import logging
from typing import Any

from mcp_asgi._loggers import cancellation_logger as logger
from mcp_asgi.lifecycle.cancel import CancelReason
from mcp_asgi.lifecycle.outcome import RequestRecord
from mcp_asgi.protocol.request import McpRequest


def listens(after_side_effect: bool) -> bool:
    """Whether the cancellation record of a request would be emitted (its level is enabled):
    when not, and no observer wants it, the request scope makes no record at all."""
    return logger.isEnabledFor(_level(after_side_effect))


def _level(after_side_effect: bool) -> int:
    """A cancel after a side effect is a reconciliation item: WARNING; any other, INFO."""
    return logging.WARNING if after_side_effect else logging.INFO


def log_cancelled(record: RequestRecord) -> None:
    """The request's one cancellation record (call once, when the request ends)."""
    level = _level(record.after_side_effect)
    if not logger.isEnabledFor(level):
        return  # nobody listens: the fields are not worked out (200 cancels at once)
    fields = _fields(record)
    name = fields["tool"] or fields["prompt"]
    what = f"{fields['method']} {name}" if name else fields["method"]
    if record.after_side_effect:
        logger.warning(
            "%s cancelled after side effect %r (%s, %s): reconcile",
            what,
            fields["side_effect"],
            fields["reason"],
            fields["outcome"],
            extra=fields,
        )
    else:
        logger.info(
            "%s cancelled: %s (%s) after %.3fs",
            what,
            fields["reason"],
            fields["outcome"],
            fields["elapsed"],
            extra=fields,
        )


def log_ignored(request: McpRequest, reason: CancelReason) -> None:
    """A cancel that came after the request was cancelled or answered."""
    logger.debug(
        "cancel ignored: request already cancelled or answered",
        extra={"request_id": request.id, "reason": reason.value},
    )


def log_orphan_exited(record: RequestRecord) -> None:
    """An orphaned request's work finally returned."""
    if not logger.isEnabledFor(logging.DEBUG):
        return
    logger.debug("orphaned handler exited", extra=_fields(record))


def _fields(record: RequestRecord) -> dict[str, Any]:
    request = record.request
    effect = record.side_effects[-1] if record.after_side_effect else None
    elapsed = record.elapsed
    return {
        "request_id": request.id,
        "method": request.method,
        "tool": request.target if request.method == "tools/call" else None,
        "prompt": request.target if request.method == "prompts/get" else None,
        "elapsed": record.duration if elapsed is None else elapsed,
        "latency": record.cancel_latency if record.outcome == "exited" else None,
        "reason": record.reason.value if record.reason else None,
        "outcome": record.outcome,
        "after_side_effect": record.after_side_effect,
        "side_effect": effect.name if effect else None,
        "idempotency_key": effect.idempotency_key if effect else None,
        "side_effects": [e.name for e in record.side_effects],
    }
