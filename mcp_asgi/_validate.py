"""Validation of a 2026-07-28 request: version, `_meta` envelope, method, standard headers.

Runs the spec's validation ladder in order; the first failing step answers. Produces an
immutable `McpRequest`. Knows the method catalogue only through `MethodCatalog`.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Protocol

from ._asgi import Scope, header
from ._request import IncomingMessage
from .jsonrpc import (
    HEADER_MISMATCH,
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
    UNSUPPORTED_PROTOCOL_VERSION,
    ProtocolError,
    RequestId,
)

PROTOCOL_VERSION: Final = "2026-07-28"
SUPPORTED_VERSIONS: Final = (PROTOCOL_VERSION,)
META_PREFIX: Final = "io.modelcontextprotocol/"
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
_LEGACY_METHODS: Final = frozenset(
    {"initialize", "ping", "logging/setLevel", "resources/subscribe", "resources/unsubscribe"}
)
_HEADER_SAFE = re.compile(r"^[\x21-\x7e]([\x20-\x7e]*[\x21-\x7e])?$|^$")
_B64_SENTINEL = re.compile(r"^=\?base64\?([A-Za-z0-9+/=]*)\?=$")


@dataclass(frozen=True, slots=True)
class ParamHeader:
    """A tool argument mirrored in an `Mcp-Param-<name>` header (`x-mcp-header`)."""

    header: str
    argument: str
    kind: str  # "string" | "integer" | "boolean"


class MethodCatalog(Protocol):
    """What validation needs to know about the server."""

    def has_method(self, method: str) -> bool: ...

    def param_headers(self, tool_name: str) -> tuple[ParamHeader, ...]: ...


@dataclass(frozen=True, slots=True)
class McpRequest:
    """A validated 2026-07-28 request: what a handler's request context is built from."""

    id: RequestId
    method: str
    params: Mapping[str, Any]
    protocol_version: str
    client_capabilities: Mapping[str, Any]
    client_info: Mapping[str, Any] | None
    log_level: str | None
    progress_token: str | int | None
    meta: Mapping[str, Any]

    @property
    def target(self) -> str | None:
        """The tool or prompt name (or resource URI) this request is about."""
        key = NAME_PARAM.get(self.method)
        value = self.params.get(key) if key else None
        return value if isinstance(value, str) else None


def validate(scope: Scope, message: IncomingMessage, catalog: MethodCatalog) -> McpRequest:
    """Check a request against the 2026-07-28 rules; raise `ProtocolError` on the first failure."""
    request_id = message.id
    assert request_id is not None  # notifications never reach here
    fail = _Failer(request_id)
    header_version = _header(scope, b"mcp-protocol-version")
    meta = message.params.get("_meta")
    meta_version = meta.get(META_PREFIX + "protocolVersion") if isinstance(meta, dict) else None
    if header_version is None:
        raise fail(400, HEADER_MISMATCH, "Header mismatch: MCP-Protocol-Version header is required")
    if isinstance(meta_version, str) and meta_version != header_version:
        raise fail(
            400,
            HEADER_MISMATCH,
            f"Header mismatch: MCP-Protocol-Version header value '{header_version}' does not "
            f"match body value '{meta_version}'",
        )
    if header_version not in SUPPORTED_VERSIONS:
        raise fail(
            400,
            UNSUPPORTED_PROTOCOL_VERSION,
            f"Unsupported protocol version: {header_version}",
            {"supported": list(SUPPORTED_VERSIONS), "requested": header_version},
        )
    if not isinstance(meta, dict):
        raise fail(400, INVALID_PARAMS, "Invalid params: params._meta is required")
    if not isinstance(meta_version, str):
        raise fail(
            400, INVALID_PARAMS, f"Invalid params: _meta.{META_PREFIX}protocolVersion is required"
        )
    capabilities = meta.get(META_PREFIX + "clientCapabilities")
    if not isinstance(capabilities, dict):
        raise fail(
            400,
            INVALID_PARAMS,
            f"Invalid params: _meta.{META_PREFIX}clientCapabilities must be an object",
        )
    if not catalog.has_method(message.method):
        data = (
            {"supported": list(SUPPORTED_VERSIONS)} if message.method in _LEGACY_METHODS else None
        )
        raise fail(404, METHOD_NOT_FOUND, f"Method not found: {message.method}", data)
    _check_header(fail, scope, b"mcp-method", "Mcp-Method", message.method)
    name_key = NAME_PARAM.get(message.method)
    if name_key is not None:
        value = message.params.get(name_key)
        if not isinstance(value, str):
            raise fail(400, INVALID_PARAMS, f"Invalid params: '{name_key}' must be a string")
        _check_header(fail, scope, b"mcp-name", "Mcp-Name", value)
        if message.method == "tools/call":
            _check_param_headers(fail, scope, catalog.param_headers(value), message.params)
    log_level = meta.get(META_PREFIX + "logLevel")
    if log_level is not None and log_level not in LOG_LEVELS:
        raise fail(400, INVALID_PARAMS, f"Invalid params: unknown log level {log_level!r}")
    progress_token = meta.get("progressToken")
    if isinstance(progress_token, bool) or not isinstance(progress_token, (str, int, type(None))):
        raise fail(400, INVALID_PARAMS, "Invalid params: progressToken must be a string or integer")
    client_info = meta.get(META_PREFIX + "clientInfo")
    return McpRequest(
        id=request_id,
        method=message.method,
        params=message.params,
        protocol_version=meta_version,
        client_capabilities=capabilities,
        client_info=client_info if isinstance(client_info, dict) else None,
        log_level=log_level,
        progress_token=progress_token,
        meta=meta,
    )


class _Failer:
    def __init__(self, request_id: RequestId) -> None:
        self.request_id = request_id

    def __call__(self, status: int, code: int, message: str, data: Any = None) -> ProtocolError:
        return ProtocolError(status, code, message, data, request_id=self.request_id)


def _header(scope: Scope, name: bytes) -> str | None:
    value = header(scope, name)
    return None if value is None else value.strip(" \t")


def decode_header_value(raw: str) -> str | None:
    """Decode an MCP header value (plain or `=?base64?…?=`); None when it is malformed."""
    match = _B64_SENTINEL.match(raw)
    if match is None:
        return raw if _HEADER_SAFE.match(raw) else None
    try:
        return base64.b64decode(match.group(1), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return None


def _check_header(fail: _Failer, scope: Scope, name: bytes, label: str, expected: str) -> None:
    raw = _header(scope, name)
    if raw is None:
        raise fail(400, HEADER_MISMATCH, f"Header mismatch: {label} header is required")
    value = decode_header_value(raw)
    if value is None:
        raise fail(400, HEADER_MISMATCH, f"Header mismatch: {label} header value is malformed")
    if value != expected:
        raise fail(
            400,
            HEADER_MISMATCH,
            f"Header mismatch: {label} header value '{value}' does not match body value "
            f"'{expected}'",
        )


def _check_param_headers(
    fail: _Failer, scope: Scope, specs: tuple[ParamHeader, ...], params: Mapping[str, Any]
) -> None:
    if not specs:
        return
    arguments = params.get("arguments")
    arguments = arguments if isinstance(arguments, dict) else {}
    for spec in specs:
        label = f"Mcp-Param-{spec.header}"
        raw = _header(scope, b"mcp-param-" + spec.header.lower().encode("latin-1"))
        body_value = arguments.get(spec.argument)
        if raw is not None and decode_header_value(raw) is None:
            raise fail(400, HEADER_MISMATCH, f"Header mismatch: {label} header value is malformed")
        if body_value is None:
            continue
        if raw is None:
            raise fail(400, HEADER_MISMATCH, f"Header mismatch: {label} header is required")
        value = decode_header_value(raw)
        if not _same_value(spec.kind, value, body_value):
            raise fail(
                400,
                HEADER_MISMATCH,
                f"Header mismatch: {label} header value '{value}' does not match body value "
                f"'{body_value}'",
            )


def _same_value(kind: str, header_value: str | None, body_value: Any) -> bool:
    if header_value is None:
        return False
    if kind == "boolean":
        return isinstance(body_value, bool) and header_value == ("true" if body_value else "false")
    if kind == "integer":
        try:
            return float(header_value) == float(body_value)
        except (TypeError, ValueError):
            return False
    return isinstance(body_value, str) and header_value == body_value
