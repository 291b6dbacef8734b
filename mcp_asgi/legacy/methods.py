"""What a 2025-era request does: `initialize`, the methods only that era has, and the
shared methods' results and errors in their 2025 shapes."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any, Final

from mcp_asgi.legacy.sessions import LegacySession
from mcp_asgi.protocol.jsonrpc import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    JsonObject,
    McpError,
    ResourceNotFound,
)
from mcp_asgi.protocol.request import LOG_LEVELS, NAME_PARAM
from mcp_asgi.server.mcp_server import SERVER_INFO_KEY, McpServer

SESSION_METHODS: Final = frozenset(
    {"ping", "logging/setLevel", "resources/subscribe", "resources/unsubscribe"}
)
"""Methods only the 2025 era has; answered here, from the session."""
MODERN_METHODS: Final = frozenset({"server/discover", "subscriptions/listen"})
"""Methods only 2026-07-28 has: unknown to a 2025-era session."""
RESOURCE_NOT_FOUND: Final = -32002
_MODERN_RESULT_KEYS: Final = ("resultType", "ttlMs", "cacheScope")


def serves(server: McpServer, method: str) -> bool:
    """Whether a 2025-era session can call `method` on `server`."""
    if method in SESSION_METHODS:
        return not method.startswith("resources/") or server.has_method("resources/read")
    return method not in MODERN_METHODS and server.has_method(method)


def check_params(method: str, params: Mapping[str, Any]) -> str | None:
    """What is wrong with a request's params (answered with -32602), or None."""
    key = NAME_PARAM.get(method)
    if key is not None and not isinstance(params.get(key), str):
        return f"Invalid params: '{key}' must be a string"
    meta = params.get("_meta")
    token = meta.get("progressToken") if isinstance(meta, dict) else None
    if isinstance(token, bool) or not isinstance(token, (str, int, type(None))):
        return "Invalid params: progressToken must be a string or integer"
    return None


def initialize_result(server: McpServer, protocol_version: str) -> JsonObject:
    """The `InitializeResult`: the negotiated revision, capabilities, server info."""
    capabilities = copy.deepcopy(server.capabilities())
    capabilities.pop("extensions", None)  # 2026-07-28 only
    result: JsonObject = {
        "protocolVersion": protocol_version,
        "capabilities": capabilities,
        "serverInfo": server.server_info,
    }
    if server.instructions:
        result["instructions"] = server.instructions
    return result


def session_method(session: LegacySession, method: str, params: Mapping[str, Any]) -> JsonObject:
    """Answer `ping`, `logging/setLevel`, `resources/subscribe` or `resources/unsubscribe`."""
    if method == "logging/setLevel":
        level = params.get("level")
        if level not in LOG_LEVELS:
            raise McpError(INVALID_PARAMS, f"Invalid params: unknown log level {level!r}")
        session.log_level = str(level)
    elif method in ("resources/subscribe", "resources/unsubscribe"):
        uri = params.get("uri")
        if not isinstance(uri, str) or not uri:
            raise McpError(INVALID_PARAMS, "Invalid params: 'uri' must be a string")
        if method == "resources/subscribe":
            session.subscribe(uri)  # -32602 past the session's bounds
        else:
            session.unsubscribe(uri)
    return {}


def legacy_result(result: JsonObject) -> JsonObject:
    """A 2026-07-28 result in its 2025 shape: without `resultType`, `ttlMs`, `cacheScope`
    and the server info in `_meta` (a 2025-era client got that from `initialize`).

    2025 says structured content is an object: a tool's `outputSchema` of another type is
    left out of `tools/list` (a client would refuse the whole list) and so is
    `structuredContent` that is not an object (its JSON is in the text block).
    """
    kind = result.get("resultType", "complete")
    if kind != "complete":
        raise McpError(
            INTERNAL_ERROR, f"the result ({kind}) cannot be expressed in a 2025-era session"
        )
    shaped = {k: v for k, v in result.items() if k not in _MODERN_RESULT_KEYS}
    if isinstance(shaped.get("tools"), list):
        shaped["tools"] = [_legacy_tool(tool) for tool in shaped["tools"]]
    if "structuredContent" in shaped and not isinstance(shaped["structuredContent"], dict):
        del shaped["structuredContent"]
    meta = shaped.get("_meta")
    if isinstance(meta, dict):
        meta = {k: v for k, v in meta.items() if k != SERVER_INFO_KEY}
        if meta:
            shaped["_meta"] = meta
        else:
            del shaped["_meta"]
    return shaped


def _legacy_tool(tool: Any) -> Any:
    """A tool as listed to a 2025-era client: an `outputSchema` only for object output."""
    schema = tool.get("outputSchema") if isinstance(tool, dict) else None
    if schema is None or (isinstance(schema, dict) and schema.get("type") == "object"):
        return tool
    return {k: v for k, v in tool.items() if k != "outputSchema"}


def legacy_error(error: ResourceNotFound) -> McpError:
    """A missing resource is -32002 in the 2025 era (-32602 since 2026-07-28)."""
    return McpError(RESOURCE_NOT_FOUND, error.message, error.data)
