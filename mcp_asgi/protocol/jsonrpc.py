"""JSON-RPC 2.0 shapes and the MCP error codes. Pure: no I/O.

Error tree::

    McpError                  raise in a handler: answered as that JSON-RPC error (HTTP 200)
     ├── ProtocolError        a request the transport rejects, with its HTTP status
     └── ResourceNotFound     no resource at a URI: -32602 (2025-era sessions get -32002)
"""

from __future__ import annotations

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


class McpError(Exception):
    """A JSON-RPC error to answer a request with.

    Raise it in a handler to control the error code the client sees. Codes between
    -32768 and -32000 are reserved by JSON-RPC and MCP; application errors should use
    codes outside that range.
    """

    http_status: int = 200
    """The HTTP status of the response that carries the error (200 for handler errors)."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        if not isinstance(code, int) or isinstance(code, bool):
            raise TypeError("McpError code must be an int")
        super().__init__(message)
        self.code = code
        """The JSON-RPC error code (an int)."""
        self.message = message
        """The error message the client sees."""
        self.data = data
        """Additional JSON data for the client (`error.data`), or None for none."""

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
    ) -> None:
        super().__init__(code, message, data)
        self.http_status = status
        self.request_id = request_id


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
