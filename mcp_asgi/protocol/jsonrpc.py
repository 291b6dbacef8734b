"""JSON-RPC 2.0 shapes and the MCP error codes. Pure: no I/O.

Error tree::

    McpError                  raise in a handler: answered as that JSON-RPC error, with the
     │                        HTTP status the spec gives its code (`spec_status`)
     ├── ProtocolError        a request the transport rejects, with its HTTP status
     └── ResourceNotFound     no resource at a URI: -32602 (2025-era sessions get -32002)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final, TypeGuard

JSONRPC_VERSION: Final = "2.0"

PARSE_ERROR: Final = -32700
INVALID_REQUEST: Final = -32600
METHOD_NOT_FOUND: Final = -32601
INVALID_PARAMS: Final = -32602
INTERNAL_ERROR: Final = -32603
HEADER_MISMATCH: Final = -32020
MISSING_CLIENT_CAPABILITY: Final = -32021
UNSUPPORTED_PROTOCOL_VERSION: Final = -32022

RequestId = str | int


def is_request_id(value: object) -> TypeGuard[RequestId]:
    """Whether `value` may be a JSON-RPC request id here: a string or an integer (not a
    boolean, which JSON tells apart but Python's `int` does not)."""
    return isinstance(value, (str, int)) and not isinstance(value, bool)


JsonObject = dict[str, Any]

_SPEC_STATUS: Final = {
    HEADER_MISMATCH: 400,
    MISSING_CLIENT_CAPABILITY: 400,
    UNSUPPORTED_PROTOCOL_VERSION: 400,
    METHOD_NOT_FOUND: 404,
}


def spec_status(code: int) -> int:
    """The HTTP status the 2026-07-28 spec gives a JSON-RPC error code on Streamable HTTP:
    400 for -32020, -32021 and -32022, 404 for -32601, and 200 (the error in-band) for
    every other code."""
    return _SPEC_STATUS.get(code, 200)


class McpError(Exception):
    """A JSON-RPC error to answer a request with.

    Raise it in a handler to control the error the client sees. The HTTP status of the
    reply follows the spec's table for the code (`http_status`): 400 for -32020
    (HeaderMismatch), -32021 (MissingRequiredClientCapability) and -32022
    (UnsupportedProtocolVersion), 404 for -32601 (Method not found), and 200, the error
    in-band, for every other code. `http_status=` chooses the status where the code alone
    does not tell it (400 for a -32602 about a malformed `_meta`). A status can only be
    chosen before the reply has started: once an SSE reply has sent an event (a progress
    or log notification, a keep-alive), the error is its last event, under 200. 2025-era
    sessions always get their errors in-band.

    Codes between -32768 and -32000 are reserved by JSON-RPC and MCP; application errors
    should use codes outside that range.
    """

    def __init__(
        self, code: int, message: str, data: Any = None, *, http_status: int | None = None
    ) -> None:
        if not isinstance(code, int) or isinstance(code, bool):
            raise TypeError("McpError code must be an int")
        if http_status is not None and not (http_status == 200 or 400 <= http_status <= 599):
            raise ValueError("McpError http_status must be 200 or an error status (400-599)")
        super().__init__(message)
        self.code = code
        """The JSON-RPC error code (an int)."""
        self.message = message
        """The error message the client sees."""
        self.data = data
        """Additional JSON data for the client (`error.data`), or None for none."""
        self.http_status = spec_status(code) if http_status is None else http_status
        """The HTTP status of a reply that carries only this error: `http_status=` if
        given, else the spec's status for the code (`spec_status`)."""

    def to_error(self) -> JsonObject:
        """The JSON-RPC `error` member for this error."""
        error: JsonObject = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return error


class ProtocolError(McpError):
    """A request rejected by the transport or the protocol layer, with an HTTP status."""

    def __init__(
        self,
        status: int,
        code: int,
        message: str,
        data: Any = None,
        *,
        request_id: RequestId | None = None,
        headers: Sequence[tuple[bytes, bytes]] = (),
    ) -> None:
        super().__init__(code, message, data, http_status=status)
        self.request_id = request_id
        self.headers = list(headers)
        """Response headers to send with the error (e.g. `Retry-After`)."""


def store_unavailable(request_id: RequestId | None = None) -> ProtocolError:
    """503 (`Retry-After: 1`), reason `store_unavailable`: the shared store (Redis) that
    the request needs cannot be reached now."""
    return ProtocolError(
        503,
        INTERNAL_ERROR,
        "Service Unavailable: the shared store (Redis) cannot be reached; retry shortly",
        {"reason": "store_unavailable"},
        request_id=request_id,
        headers=[(b"retry-after", b"1")],
    )


class ResourceNotFound(McpError):
    """No resource matches `uri` (`resources/read`): -32602 since 2026-07-28."""

    def __init__(self, uri: str) -> None:
        super().__init__(INVALID_PARAMS, f"Resource not found: {uri}", {"uri": uri})
        self.uri = uri


def response(request_id: RequestId | None, result: JsonObject) -> JsonObject:
    """A JSON-RPC success response."""
    return {"jsonrpc": JSONRPC_VERSION, "id": request_id, "result": result}


def error_response(request_id: RequestId | None, error: McpError) -> JsonObject:
    """A JSON-RPC error response; `id` is null when the request id could not be read."""
    return {"jsonrpc": JSONRPC_VERSION, "id": request_id, "error": error.to_error()}


def notification(method: str, params: JsonObject) -> JsonObject:
    """A JSON-RPC notification."""
    return {"jsonrpc": JSONRPC_VERSION, "method": method, "params": params}
