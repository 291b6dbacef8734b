"""Which era a request belongs to, and which 2025-era revision a session speaks.

Era routing follows the backward-compatibility rules of 2026-07-28, body first::

    params._meta claims io.modelcontextprotocol/protocolVersion   -> 2026-07-28
    initialize without that claim                                 -> 2025
    no MCP-Protocol-Version header (a 2025-03-26 client)          -> 2025
    a 2025-era (or older) MCP-Protocol-Version                    -> 2025
    any other MCP-Protocol-Version (2026-07-28, unknown values)   -> 2026-07-28
    GET or DELETE with Mcp-Session-Id                             -> 2025
    GET or DELETE without                                         -> 405, as 2026-07-28 says

So every request a 2026-07-28 client can send stays on the modern path and keeps its
400/404 JSON-RPC error bodies, which dual-era clients read to choose their era.
"""

from __future__ import annotations

from typing import Final

from starlette.types import Scope

from mcp_asgi.protocol.headers import PROTOCOL_VERSION, SESSION_ID, RequestHeaders
from mcp_asgi.protocol.message import IncomingMessage
from mcp_asgi.protocol.request import META_VERSION_KEY

LEGACY_VERSIONS: Final = ("2025-11-25", "2025-06-18", "2025-03-26")
"""The 2025-era revisions served, newest first."""
LATEST_VERSION: Final = LEGACY_VERSIONS[0]
HANDSHAKE_VERSIONS: Final = frozenset({*LEGACY_VERSIONS, "2024-11-05", "2024-10-07"})
"""Every revision reached through `initialize`: headers naming them are routed here (and
the unsupported ones refused here, with 400)."""
HTTP_METHODS: Final = frozenset({"GET", "DELETE"})
"""HTTP methods only the 2025 era has (its session's stream, and its end)."""


def is_legacy(headers: RequestHeaders, message: IncomingMessage) -> bool:
    """Whether a POSTed message belongs to the 2025 era (see the module's table)."""
    meta = message.params.get("_meta")
    if isinstance(meta, dict) and META_VERSION_KEY in meta:
        return False
    if message.method == "initialize":
        return True
    version = headers.text(PROTOCOL_VERSION)
    return version is None or version.strip(" \t") in HANDSHAKE_VERSIONS


def is_session_request(asgi_scope: Scope, headers: RequestHeaders) -> bool:
    """Whether a GET or DELETE names a 2025-era session (else it gets 405)."""
    return asgi_scope["method"] in HTTP_METHODS and headers.first[SESSION_ID] is not None


def negotiate_version(requested: object) -> str:
    """The revision to answer `initialize` with: the client's if served, else the latest."""
    if isinstance(requested, str) and requested in LEGACY_VERSIONS:
        return requested
    return LATEST_VERSION
