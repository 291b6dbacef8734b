"""Serving 2025-era clients (2025-11-25, 2025-06-18, 2025-03-26) beside 2026-07-28.

`_era` tells the eras apart, `sessions` holds the `Mcp-Session-Id` sessions, `endpoint`
serves their POSTs, GET streams and DELETEs, `_methods` adapts methods and results. See
docs/compatibility.md.
"""

from ._era import SUPPORTED_VERSIONS, is_legacy, is_session_request
from .endpoint import LegacyEndpoint
from .sessions import LegacySession, SessionStore

__all__ = [
    "SUPPORTED_VERSIONS",
    "LegacyEndpoint",
    "LegacySession",
    "SessionStore",
    "is_legacy",
    "is_session_request",
]
