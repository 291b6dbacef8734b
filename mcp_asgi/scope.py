"""The old import path of `mcp_asgi.lifecycle.scope`, kept for code that names it."""

from mcp_asgi.lifecycle.scope import (
    Outcome,
    RequestScope,
    ScopeObserver,
    SideEffect,
)

__all__ = [
    "Outcome",
    "RequestScope",
    "ScopeObserver",
    "SideEffect",
]
