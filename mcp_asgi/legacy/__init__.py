"""Serving 2025-era clients (2025-11-25, 2025-06-18, 2025-03-26) beside 2026-07-28.

`era` tells the eras apart, `sessions` holds the `Mcp-Session-Id` sessions, `endpoint`
serves their POSTs, GET streams and DELETEs, `methods` adapts methods and results, `stream`
is the GET stream (`notify` what it carries, `parked` its notifications logged while its
client is away, `handover` its move between replicas), `resumable`/`resume` the event logs
and `Last-Event-ID`, `outbound` the server's own requests to the client, `shared` sessions
across replicas. Sits above the
server (it dispatches to it) and below the middleware. See docs/compatibility.md.
"""

from mcp_asgi.legacy.endpoint import LegacyEndpoint
from mcp_asgi.legacy.era import LEGACY_VERSIONS, is_legacy, is_session_request
from mcp_asgi.legacy.sessions import LegacySession, SessionStore

__all__ = [
    "LEGACY_VERSIONS",
    "LegacyEndpoint",
    "LegacySession",
    "SessionStore",
    "is_legacy",
    "is_session_request",
]
