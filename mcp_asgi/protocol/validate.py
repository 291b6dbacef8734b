"""Validation of a 2026-07-28 request: version, `_meta` envelope, method, standard headers.

Runs the spec's validation ladder in order; the first failing step answers. Produces an
`McpRequest` (read-only). Knows the method catalogue only through `MethodCatalog`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any, Final

from mcp_asgi.protocol.headers import (
    MCP_METHOD,
    MCP_NAME,
    PROTOCOL_VERSION,
    RequestHeaders,
    decode_header_value,
)
from mcp_asgi.protocol.jsonrpc import (
    HEADER_MISMATCH,
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
    UNSUPPORTED_PROTOCOL_VERSION,
    ProtocolError,
)
from mcp_asgi.protocol.message import IncomingMessage
from mcp_asgi.protocol.request import (
    LOG_LEVELS,
    MCP_NAME_PARAM,
    META_PREFIX,
    META_VERSION_KEY,
    MODERN_VERSIONS,
    McpRequest,
    MethodCatalog,
    ParamHeader,
)

_LEGACY_METHODS: Final = frozenset(
    {"initialize", "ping", "logging/setLevel", "resources/subscribe", "resources/unsubscribe"}
)
_CANONICAL_DECIMAL = re.compile(r"-?[0-9]+(?:\.[0-9]+)?")
_CAPABILITIES_KEY: Final = META_PREFIX + "clientCapabilities"
_CLIENT_INFO_KEY: Final = META_PREFIX + "clientInfo"
_LOG_LEVEL_KEY: Final = META_PREFIX + "logLevel"


def validate(
    headers: RequestHeaders | None, message: IncomingMessage, catalog: MethodCatalog
) -> McpRequest:
    """Check a request against the 2026-07-28 rules; raise `ProtocolError` on the first failure.

    `headers` is None for a transport without headers (stdio): the `_meta` envelope is
    then checked alone, and no `MCP-Protocol-Version`, `Mcp-Method`, `Mcp-Name` or
    `Mcp-Param-*` header is expected.
    """
    # One function with few calls: each Python call costs hundreds of instructions, and this
    # runs for every request (the ladder's order and messages are the spec's).
    request_id = message.id
    if request_id is None:
        raise ValueError("validate() takes requests, not notifications")
    method, params = message.method, message.params
    meta = params.get("_meta")
    meta_version = meta.get(META_VERSION_KEY) if isinstance(meta, dict) else None
    if headers is None:  # stdio: the body's version is the only one
        header_version = meta_version if isinstance(meta_version, str) else None
        if header_version is None:
            raise _fail(
                message,
                400,
                INVALID_PARAMS,
                f"Invalid params: _meta.{META_VERSION_KEY} is required",
            )
    else:
        found, repeated = headers.first, headers.repeated
        if repeated & _VERSION_BIT:
            raise _twice(message, "MCP-Protocol-Version")
        raw = found[PROTOCOL_VERSION]
        header_version = None if raw is None else raw.decode("latin-1").strip(" \t")
    if header_version is None:
        raise _fail(
            message,
            400,
            HEADER_MISMATCH,
            "Header mismatch: MCP-Protocol-Version header is required",
        )
    if isinstance(meta_version, str) and meta_version != header_version:
        raise _fail(
            message,
            400,
            HEADER_MISMATCH,
            f"Header mismatch: MCP-Protocol-Version header value '{header_version}' does not "
            f"match body value '{meta_version}'",
        )
    if header_version not in MODERN_VERSIONS:
        raise _fail(
            message,
            400,
            UNSUPPORTED_PROTOCOL_VERSION,
            f"Unsupported protocol version: {header_version}",
            {"supported": list(MODERN_VERSIONS), "requested": header_version},
        )
    if not isinstance(meta, dict):
        raise _fail(message, 400, INVALID_PARAMS, "Invalid params: params._meta is required")
    if not isinstance(meta_version, str):
        raise _fail(
            message,
            400,
            INVALID_PARAMS,
            f"Invalid params: _meta.{META_VERSION_KEY} is required",
        )
    capabilities = meta.get(_CAPABILITIES_KEY)
    if not isinstance(capabilities, dict):
        raise _fail(
            message,
            400,
            INVALID_PARAMS,
            f"Invalid params: _meta.{META_PREFIX}clientCapabilities must be an object",
        )
    client_info = meta.get(_CLIENT_INFO_KEY)
    if client_info is not None and not isinstance(client_info, dict):
        raise _fail(
            message,
            400,
            INVALID_PARAMS,
            f"Invalid params: _meta.{META_PREFIX}clientInfo must be an object",
        )
    log_level = meta.get(_LOG_LEVEL_KEY)
    if log_level is not None and log_level not in LOG_LEVELS:
        raise _fail(
            message, 400, INVALID_PARAMS, f"Invalid params: unknown log level {log_level!r}"
        )
    progress_token = meta.get("progressToken")
    if progress_token is not None and (
        isinstance(progress_token, bool) or not isinstance(progress_token, (str, int))
    ):
        raise _fail(
            message,
            400,
            INVALID_PARAMS,
            "Invalid params: progressToken must be a string or integer",
        )
    if not catalog.has_method(method):
        data = {"supported": list(MODERN_VERSIONS)} if method in _LEGACY_METHODS else None
        raise _fail(message, 404, METHOD_NOT_FOUND, f"Method not found: {method}", data)
    if headers is not None:
        raw = found[MCP_METHOD]
        # a served method's name is plain ASCII: a header that spells it passes at once
        if repeated & _METHOD_BIT or raw is None or raw.decode("latin-1") != method:
            _check_header(message, raw, repeated & _METHOD_BIT, "Mcp-Method", method)
    name_key = MCP_NAME_PARAM.get(method)
    if name_key is not None:
        value = params.get(name_key)
        if not isinstance(value, str):
            raise _fail(
                message, 400, INVALID_PARAMS, f"Invalid params: '{name_key}' must be a string"
            )
        if headers is not None:
            raw = found[MCP_NAME]
            # a plain name (ASCII, no space, not `=?`) that the header spells passes at once
            if (
                repeated & _NAME_BIT
                or raw is None
                or raw.decode("latin-1") != value
                or not (value.isascii() and value.isidentifier())
            ):
                _check_header(message, raw, repeated & _NAME_BIT, "Mcp-Name", value)
            specs = catalog.param_headers(value) if method == "tools/call" else ()
            if specs:  # the tool declares Mcp-Param-* headers
                _check_param_headers(message, _mcp_headers(headers.raw), specs, params)
    return McpRequest(  # positional: keywords are matched by name on every call
        request_id,
        method,
        params,
        meta_version,
        capabilities,
        client_info,
        log_level,
        progress_token,
        meta,
    )


_VERSION_BIT: Final = 1 << PROTOCOL_VERSION
_METHOD_BIT: Final = 1 << MCP_METHOD
_NAME_BIT: Final = 1 << MCP_NAME


def _fail(
    request: IncomingMessage, status: int, code: int, text: str, data: Any = None
) -> ProtocolError:
    """The error `request` fails with (made only when it fails)."""
    if request.method == "initialize" and data is None:
        # A 2025-era client opening with `initialize` cannot fall forward: name what works.
        data = {"supported": list(MODERN_VERSIONS)}
    return ProtocolError(status, code, text, data, request_id=request.id)


_Headers = dict[bytes, list[bytes]]


def _mcp_headers(raw: Iterable[tuple[bytes, bytes]]) -> _Headers:
    """The `Mcp-*` request headers, by lower-case name, in one pass over the headers."""
    found: _Headers = {}
    for key, value in raw:
        if key[:1] in b"mM" and key[:4].lower() == b"mcp-":
            found.setdefault(key.lower(), []).append(value)
    return found


def _twice(message: IncomingMessage, label: str) -> ProtocolError:
    return _fail(
        message, 400, HEADER_MISMATCH, f"Header mismatch: {label} header appears more than once"
    )


def _header(message: IncomingMessage, headers: _Headers, name: bytes, label: str) -> str | None:
    """A header's value with optional whitespace trimmed; -32020 if it is sent twice."""
    values = headers.get(name, ())
    if len(values) > 1:
        raise _twice(message, label)
    return values[0].decode("latin-1").strip(" \t") if values else None


def _check_header(
    message: IncomingMessage, raw: bytes | None, repeated: int, label: str, expected: str
) -> None:
    """-32020 unless the header (its first value `raw`; `repeated` when sent more than
    once) is there once and decodes (`decode_header_value`) to `expected`."""
    if repeated:
        raise _twice(message, label)
    if raw is None:
        raise _fail(message, 400, HEADER_MISMATCH, f"Header mismatch: {label} header is required")
    text = raw.decode("latin-1").strip(" \t")
    # a plain value (most are) is itself; decode_header_value says the same, with a call
    plain = text.isascii() and text.isprintable() and not text.startswith("=?")
    value = text if plain else decode_header_value(text)
    if value is None:
        raise _fail(
            message, 400, HEADER_MISMATCH, f"Header mismatch: {label} header value is malformed"
        )
    if value != expected:
        raise _fail(
            message,
            400,
            HEADER_MISMATCH,
            f"Header mismatch: {label} header value '{value}' does not match body value "
            f"'{expected}'",
        )


def _check_param_headers(
    message: IncomingMessage,
    headers: _Headers,
    specs: tuple[ParamHeader, ...],
    params: Mapping[str, Any],
) -> None:
    arguments = params.get("arguments")
    for spec in specs:
        label = f"Mcp-Param-{spec.header}"
        raw = _header(message, headers, b"mcp-param-" + spec.header.lower().encode("ascii"), label)
        value = None if raw is None else decode_header_value(raw)
        if raw is not None and value is None:
            raise _fail(
                message, 400, HEADER_MISMATCH, f"Header mismatch: {label} header value is malformed"
            )
        body_value = _value_at(arguments, spec.path)
        rendered = _render(body_value)
        if rendered is None:  # null, absent or not a scalar: no header is expected
            if value is not None:
                raise _fail(
                    message,
                    400,
                    HEADER_MISMATCH,
                    f"Header mismatch: {label} header is present but argument "
                    f"'{spec.argument}' is not",
                )
            continue
        if value is None:
            raise _fail(
                message, 400, HEADER_MISMATCH, f"Header mismatch: {label} header is required"
            )
        if not _same_value(spec.kind, value, body_value, rendered):
            raise _fail(
                message,
                400,
                HEADER_MISMATCH,
                f"Header mismatch: {label} header value '{value}' does not match body value "
                f"'{rendered}'",
            )


def _value_at(arguments: Any, path: tuple[str, ...]) -> Any:
    node = arguments
    for key in path:
        if not isinstance(node, dict):
            return None
        node = node.get(key)
    return node


def _render(value: Any) -> str | None:
    """A body value as a client writes it in a header; None when it has no header form."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (str, int, float)):
        return str(value)
    return None


def _same_value(kind: str, header_value: str, body_value: Any, rendered: str) -> bool:
    """Integers compare numerically (`42.0` equals `42`); everything else as written."""
    integral = isinstance(body_value, int) or (
        isinstance(body_value, float) and body_value.is_integer()
    )
    if kind == "integer" and integral and not isinstance(body_value, bool):
        if not _CANONICAL_DECIMAL.fullmatch(header_value):
            return False
        whole, _, fraction = header_value.partition(".")
        return not fraction.strip("0") and int(whole) == int(body_value)
    return header_value == rendered
