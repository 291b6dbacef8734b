"""Reading one MCP POST: HTTP checks, the size limit, and the JSON-RPC envelope.

Knows nothing about methods or handlers; produces an immutable `IncomingMessage`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from pydantic_core import from_json

from . import jsonrpc
from ._asgi import Receive, Scope, header
from .jsonrpc import INVALID_REQUEST, PARSE_ERROR, ProtocolError, RequestId


@dataclass(frozen=True, slots=True)
class IncomingMessage:
    """One JSON-RPC request or notification as it arrived."""

    method: str
    params: dict[str, Any]
    id: RequestId | None
    is_notification: bool


def check_content_type(scope: Scope) -> None:
    """415 unless the body is declared as JSON."""
    value = header(scope, b"content-type")
    media_type = (value or "").split(";", 1)[0].strip().lower()
    if media_type != "application/json":
        raise ProtocolError(
            415, INVALID_REQUEST, "Unsupported Media Type: Content-Type must be application/json"
        )


async def read_body(scope: Scope, receive: Receive, limit: int) -> bytes:
    """The whole request body, or 413 as soon as it is known to exceed `limit` bytes."""
    declared = header(scope, b"content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise _too_large(limit)
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientGone
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise _too_large(limit)
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


class ClientGone(Exception):
    """The client disconnected before the request body was read."""


_UTF8_BOM: Final = b"\xef\xbb\xbf"


def parse_message(body: bytes) -> IncomingMessage:
    """Parse the body as exactly one JSON-RPC request or notification."""
    try:
        data = _load(body)
    except ValueError:
        raise ProtocolError(400, PARSE_ERROR, "Parse error: body is not valid JSON") from None
    if isinstance(data, list):
        raise ProtocolError(
            400, INVALID_REQUEST, "Invalid Request: batches are not supported; send one message"
        )
    if not isinstance(data, dict):
        raise ProtocolError(400, INVALID_REQUEST, "Invalid Request: expected a JSON-RPC object")
    request_id = _read_id(data)
    if data.get("jsonrpc") != jsonrpc.JSONRPC_VERSION:
        raise _invalid(request_id, "'jsonrpc' must be \"2.0\"")
    method = data.get("method")
    if not isinstance(method, str) or not method:
        if "result" in data or "error" in data:
            raise _invalid(request_id, "clients must not POST JSON-RPC responses")
        raise _invalid(request_id, "'method' must be a non-empty string")
    params = data.get("params", {})
    if not isinstance(params, dict):
        raise _invalid(request_id, "'params' must be an object")
    return IncomingMessage(
        method=method, params=params, id=request_id, is_notification="id" not in data
    )


def peek_id(body: bytes | None) -> RequestId | None:
    """The request id, if `body` is a JSON object with a valid one (for error replies)."""
    if not body:
        return None
    try:
        data = _load(body)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    value = data.get("id")
    return value if isinstance(value, (str, int)) and not isinstance(value, bool) else None


def _load(body: bytes) -> Any:
    """Parse JSON text: UTF-8 only, as RFC 8259 requires between systems, and a leading
    byte order mark ignored, as it allows. Raises `ValueError`."""
    if body.startswith(_UTF8_BOM):
        body = body[len(_UTF8_BOM) :]
    return from_json(body)


def _read_id(data: dict[str, Any]) -> RequestId | None:
    if "id" not in data:
        return None
    value = data["id"]
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise ProtocolError(
            400, INVALID_REQUEST, "Invalid Request: 'id' must be a string or integer"
        )
    return value


def _invalid(request_id: RequestId | None, detail: str) -> ProtocolError:
    return ProtocolError(400, INVALID_REQUEST, f"Invalid Request: {detail}", request_id=request_id)


def _too_large(limit: int) -> ProtocolError:
    return ProtocolError(413, INVALID_REQUEST, f"Request body exceeds {limit} bytes")
