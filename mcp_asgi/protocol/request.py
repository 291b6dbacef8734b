"""`McpRequest`, the validated request every later stage reads, and the protocol's constants."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Protocol

from mcp_asgi.protocol.jsonrpc import RequestId

PROTOCOL_VERSION: Final = "2026-07-28"
"""The protocol revision served (`MCP-Protocol-Version`, `_meta`), and the one
`mcp_asgi.testing`'s client speaks."""


MODERN_VERSIONS: Final = (PROTOCOL_VERSION,)


META_PREFIX: Final = "io.modelcontextprotocol/"
META_VERSION_KEY: Final = META_PREFIX + "protocolVersion"
"""The `_meta` key of a 2026-era request's protocol version (its presence marks the era)."""


LOG_LEVELS: Final = (
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
)


NAME_PARAM: Final = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}
"""The body field a method is about (its span's target), mirrored in `Mcp-Name`."""

TASKS_EXTENSION: Final = "io.modelcontextprotocol/tasks"
"""The Tasks extension's identifier (`capabilities.extensions`, client and server)."""

TASK_METHODS: Final = ("tasks/get", "tasks/update", "tasks/cancel")
"""The Tasks extension's methods (`tasks/result` and `tasks/list` are gone: -32601)."""

MCP_NAME_PARAM: Final = {**NAME_PARAM, **dict.fromkeys(TASK_METHODS, "taskId")}
"""The body field each method's `Mcp-Name` header must match: `NAME_PARAM`, and `taskId`
for the Tasks extension's methods (a task id is never a span's target: it is a handle)."""


@dataclass(frozen=True, slots=True)
class ParamHeader:
    """A tool argument mirrored in an `Mcp-Param-<header>` header (`x-mcp-header`).

    `path` is the chain of `properties` keys from the arguments object to the value.
    """

    header: str
    path: tuple[str, ...]
    kind: str  # "string" | "integer" | "boolean"

    @property
    def argument(self) -> str:
        """The argument's dotted path, for messages."""
        return ".".join(self.path)


class MethodCatalog(Protocol):
    """What validation needs to know about the server."""

    def has_method(self, method: str) -> bool: ...

    def param_headers(self, tool_name: str) -> tuple[ParamHeader, ...]: ...


# Not frozen: a frozen dataclass's `__init__` sets each field through
# `object.__setattr__`, ≈ 17,000 instructions more (with keywords) for one made per request.
@dataclass(slots=True)
class McpRequest:
    """A validated request: what a handler's request context is built from.

    `session_id` is set only for a 2025-era request, served in an `Mcp-Session-Id` session.

    Read-only: every field is `Final`, which the type checker enforces.
    """

    id: Final[RequestId]
    method: Final[str]
    params: Final[Mapping[str, Any]]
    protocol_version: Final[str]
    client_capabilities: Final[Mapping[str, Any]]
    client_info: Final[Mapping[str, Any] | None]
    log_level: Final[str | None]
    progress_token: Final[str | int | None]
    meta: Final[Mapping[str, Any]]
    session_id: Final[str | None] = None

    @property
    def target(self) -> str | None:
        """The tool or prompt name (or resource URI) this request is about."""
        key = NAME_PARAM.get(self.method)
        value = self.params.get(key) if key else None
        return value if isinstance(value, str) else None
