"""The old import path of `mcp_asgi.lifecycle.cancel`, kept for code that names it."""

from mcp_asgi.lifecycle.cancel import (
    CancelReason,
    CancelToken,
    RequestCancelled,
)

__all__ = [
    "CancelReason",
    "CancelToken",
    "RequestCancelled",
]
