"""Every logger mcp_asgi writes to. Their names are part of the public contract
(docs/observability.md, "Logs"); each is defined here once."""

from __future__ import annotations

import logging

root_logger = logging.getLogger("mcp_asgi")
"""Bugs of ours caught at the edge (an internal error while serving)."""
errors_logger = logging.getLogger("mcp_asgi.errors")
"""A handler that failed, a reply that could not be encoded, a resource that would not close."""
cancellation_logger = logging.getLogger("mcp_asgi.cancellation")
"""One record per cancelled request (lifecycle.cancel_log)."""
telemetry_logger = logging.getLogger("mcp_asgi.telemetry")
"""Telemetry itself failed."""
bus_logger = logging.getLogger("mcp_asgi.bus")
"""The notification bus (Redis outages)."""
store_logger = logging.getLogger("mcp_asgi.store")
"""The shared-state store (Redis unreachable, and back)."""
subscriptions_logger = logging.getLogger("mcp_asgi.subscriptions")
"""`subscriptions/listen` streams."""
input_logger = logging.getLogger("mcp_asgi.input")
"""MRTR `requestState`."""
sessions_logger = logging.getLogger("mcp_asgi.sessions")
"""2025-era sessions."""
auth_logger = logging.getLogger("mcp_asgi.auth")
"""Access tokens refused (the reason only, never the token) and verifiers unreachable."""
stdio_logger = logging.getLogger("mcp_asgi.stdio")
"""The stdio transport: lines that are not messages, cancels of unknown requests."""
downstream_logger = logging.getLogger("mcp_asgi.downstream")
"""Downstream MCP servers: a connection that failed or broke, and its reconnection."""
routes_logger = logging.getLogger("mcp_asgi.routes")
"""The host app's routes as tools: a route that cannot be one, and why."""
tasks_logger = logging.getLogger("mcp_asgi.tasks")
"""Tasks (the Tasks extension): a store that failed, a worker lost, a signal not sent."""


def redacted_url(url: str) -> str:
    """A URL fit for a log line: without its password (`redis://***@host:6379/0`)."""
    if "@" not in url:
        return url
    scheme, _, rest = url.partition("://")
    return f"{scheme}://***@{rest.rsplit('@', 1)[1]}"
