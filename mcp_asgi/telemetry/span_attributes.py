"""A span's name and attributes, read from the ASGI scope and the request.

Span names never contain client input other than a tool or prompt name: an unknown method
is `_OTHER`, and a resource URI is an attribute only.
"""

from __future__ import annotations

import json
from typing import Any, Final

from starlette.types import Scope

from mcp_asgi.auth.principal import Principal, principal_in
from mcp_asgi.protocol.jsonrpc import McpError
from mcp_asgi.protocol.message import IncomingMessage
from mcp_asgi.protocol.request import NAME_PARAM, McpRequest
from mcp_asgi.telemetry import names as a

STDIO_SCOPE_TYPE: Final = "mcp.stdio"
"""The `type` of the stand-in scope a request read from stdio is observed with: its spans
say `network.transport` `pipe`, with no HTTP attributes."""
_MAX_JSON: Final = 8192
_MAX_SHAPES: Final = 1024
_NAMED_METHODS: Final = frozenset({"tools/call", "prompts/get"})  # their target names the span


class SpanShapes:
    """A request's span name and the attributes its span and metrics share, made once per
    kind of request: HTTP version, method, protocol version, and tool or prompt name.

    The shared attributes are never changed once made (callers copy them). A tool or prompt
    name comes from the client, so the store is bounded: emptied when full.
    """

    __slots__ = ("_record_principal", "_shapes")

    def __init__(self, *, record_principal: bool = False) -> None:
        self._shapes: dict[tuple[Any, ...], tuple[str, dict[str, Any]]] = {}
        self._record_principal = record_principal

    def request_span(
        self, asgi_scope: Scope, request: McpRequest
    ) -> tuple[str, dict[str, Any], dict[str, Any]]:
        """The span name, the attributes the metrics share (read only), and the span's
        attributes."""
        method = request.method
        target = request.target if method in _NAMED_METHODS else None
        key = (
            asgi_scope.get("type"),
            asgi_scope.get("http_version"),
            method,
            request.protocol_version,
            target,
        )
        shape = self._shapes.get(key)
        if shape is None:
            common = _network(asgi_scope)
            common[a.MCP_METHOD_NAME] = method
            common[a.MCP_PROTOCOL_VERSION] = request.protocol_version
            shape = (_target(method, target, common), common)
            if len(self._shapes) >= _MAX_SHAPES:
                self._shapes.clear()
            self._shapes[key] = shape
        name, common = shape
        attributes = dict(common)
        attributes[a.JSONRPC_REQUEST_ID] = str(request.id)
        if request.session_id is not None:  # 2025-era sessions only; never on metrics
            attributes[a.MCP_SESSION_ID] = request.session_id
        if method == "resources/read":
            uri = request.target
            if uri:
                attributes[a.MCP_RESOURCE_URI] = uri
        client = asgi_scope.get("client")
        if client:
            attributes[a.CLIENT_ADDRESS] = str(client[0])
            attributes[a.CLIENT_PORT] = int(client[1])
        principal = principal_in(asgi_scope)
        if principal is not None:  # never on metrics: a client id is unbounded
            principal_attributes(attributes, principal, record_principal=self._record_principal)
        return name, common, attributes


def principal_attributes(
    attributes: dict[str, Any], principal: Principal, *, record_principal: bool
) -> None:
    """How the request was authenticated, its client id, and (opt-in) its subject."""
    attributes[a.AUTH_OUTCOME] = principal.source
    if principal.client_id:
        attributes[a.AUTH_CLIENT_ID] = principal.client_id
    if record_principal:
        attributes[a.ENDUSER_ID] = principal.subject


def rejected_span(
    asgi_scope: Scope, message: IncomingMessage, error: McpError
) -> tuple[str, dict[str, Any]]:
    """The span name and attributes of a request that validation rejected."""
    method = message.method if message.method in a.KNOWN_METHODS else a.OTHER
    attributes = _network(asgi_scope)
    attributes[a.MCP_METHOD_NAME] = method
    if message.id is not None:
        attributes[a.JSONRPC_REQUEST_ID] = str(message.id)
    attributes[a.RPC_RESPONSE_STATUS_CODE] = str(error.code)
    key = NAME_PARAM.get(method)
    target = message.params.get(key) if key else None
    name = _target(method, target if isinstance(target, str) else None, attributes)
    return name, attributes


def json_value(value: Any) -> str:
    """`value` as a JSON span attribute (tool arguments and results), truncated."""
    try:
        text = json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return "<unserialisable>"
    return text if len(text) <= _MAX_JSON else text[:_MAX_JSON] + "…"


def _network(asgi_scope: Scope) -> dict[str, Any]:
    if asgi_scope.get("type") == STDIO_SCOPE_TYPE:
        return {a.NETWORK_TRANSPORT: "pipe"}
    attributes: dict[str, Any] = {a.NETWORK_TRANSPORT: "tcp", a.NETWORK_PROTOCOL_NAME: "http"}
    http_version = asgi_scope.get("http_version")
    if http_version:
        attributes[a.NETWORK_PROTOCOL_VERSION] = str(http_version)
    return attributes


def _target(method: str, target: str | None, attributes: dict[str, Any]) -> str:
    """Add the tool or prompt attributes and return the span name."""
    if not target:
        return method
    if method == "tools/call":
        attributes[a.GEN_AI_TOOL_NAME] = target
        attributes[a.GEN_AI_OPERATION_NAME] = "execute_tool"
    elif method == "prompts/get":
        attributes[a.GEN_AI_PROMPT_NAME] = target
    else:
        return method  # a resource URI is never part of the name
    return f"{method} {target}"
