"""The old import path of `mcp_asgi.server.context`, kept for code that names it."""

from mcp_asgi.server.context import (
    Context,
)

__all__ = [
    "Context",
]
