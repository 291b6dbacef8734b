"""Parsing one JSON-RPC message from a request body into a read-only `IncomingMessage`.

Knows nothing about methods, handlers or HTTP."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Final

from pydantic_core import from_json

from mcp_asgi.protocol import jsonrpc
from mcp_asgi.protocol.jsonrpc import (
    INVALID_REQUEST,
    PARSE_ERROR,
    ProtocolError,
    RequestId,
    is_request_id,
)
from mcp_asgi.protocol.sizes import json_values

_UTF8_BOM: Final = b"\xef\xbb\xbf"
# where a float may overflow to infinity (an exponent, or 309 digits in a row), and where a
# value begins ([, {, comma or colon)
_SHAPE: Final = bytes(
    ord("0")
    if chr(i).isdigit() and i < 128
    else ord("e")
    if chr(i) in "eE"
    else ord(",")
    if chr(i) in "[{,:"
    else ord(" ")
    for i in range(256)
)
"""`bytes.translate` table: a digit becomes 0, e or E becomes e, `[`, `{` and `:` become
commas, anything else a space."""
_DOUBLE_DIGITS: Final = 309
_LONGEST_DOUBLE: Final = b"0" * _DOUBLE_DIGITS  # more digits than a double's 1.8e308 has
# searched for only in a body that long (in a shorter one it still costs ≈ 2,000 instructions)


# Not frozen, as `McpRequest` (one is made per request).
@dataclass(slots=True)
class IncomingMessage:
    """One JSON-RPC request or notification as it arrived.

    Read-only: the fields are `Final` for the type checker."""

    method: Final[str]
    params: Final[dict[str, Any]]
    id: Final[RequestId | None]
    is_notification: Final[bool]


@dataclass(frozen=True, slots=True)
class IncomingReply:
    """A JSON-RPC response a 2025-era client POSTs: its answer to a server-to-client
    request (`elicitation/create`, `sampling/createMessage`, `roots/list`, `ping`)."""

    id: RequestId
    result: dict[str, Any] | None
    """The result (an object), or None for an error response."""
    error: dict[str, Any] | None
    """The error (`code`, `message`, `data`), or None."""


def parse_message(body: bytes, max_values: int) -> IncomingMessage:
    """Parse the body as exactly one JSON-RPC request or notification, of at most
    `max_values` JSON values (`load`)."""
    message = parse_post(body, max_values)
    if isinstance(message, IncomingReply):
        raise _invalid(message.id, "clients must not POST JSON-RPC responses")
    return message


def parse_post(body: bytes, max_values: int) -> IncomingMessage | IncomingReply:
    """Parse the body as exactly one JSON-RPC request, notification or response (responses
    are for 2025-era sessions only: the caller refuses them elsewhere), of at most
    `max_values` JSON values (`load`: 413 above)."""
    try:
        data = load(body, max_values)
    except TooManyValues:
        raise ProtocolError(
            413, INVALID_REQUEST, f"Request body holds more than {max_values} JSON values"
        ) from None
    except ValueError:
        raise ProtocolError(400, PARSE_ERROR, "Parse error: body is not valid JSON") from None
    if isinstance(data, list):
        raise ProtocolError(
            400, INVALID_REQUEST, "Invalid Request: batches are not supported; send one message"
        )
    if not isinstance(data, dict):
        raise ProtocolError(400, INVALID_REQUEST, "Invalid Request: expected a JSON-RPC object")
    # `_read_id` and `is_request_id` inline: this runs for every request
    request_id = data.get("id")
    if request_id is not None and (
        isinstance(request_id, bool) or not isinstance(request_id, (str, int))
    ):
        raise _bad_id()
    notification = request_id is None and "id" not in data
    if request_id is None and not notification:
        raise _bad_id()  # "id": null
    if data.get("jsonrpc") != jsonrpc.JSONRPC_VERSION:
        raise _invalid(request_id, "'jsonrpc' must be \"2.0\"")
    method = data.get("method")
    if not isinstance(method, str) or not method:
        if "result" in data or "error" in data:
            return _reply(data, request_id)
        raise _invalid(request_id, "'method' must be a non-empty string")
    params = data.get("params")
    if params is None and "params" not in data:
        params = {}
    elif not isinstance(params, dict):
        raise _invalid(request_id, "'params' must be an object")
    return IncomingMessage(method, params, request_id, notification)


def peek_id(body: bytes | None, max_values: int) -> RequestId | None:
    """The request id, if `body` is a JSON object with a valid one (for error replies)."""
    if not body:
        return None
    try:
        data = load(body, max_values)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    value = data.get("id")
    return value if is_request_id(value) else None


class TooManyValues(ValueError):
    """The JSON text holds more values than allowed."""


def load(body: bytes, max_values: int) -> Any:
    """Parse JSON text: UTF-8 only, as RFC 8259 requires between systems, and a leading
    byte order mark ignored, as it allows. `NaN`, `Infinity` and `-Infinity` are not JSON,
    and a number too large for a double (`1e999`) is refused rather than read as infinity.
    Text of more than `max_values` values (`sizes.json_values`, keys included) is refused
    before it is parsed: what its objects take is then bounded by `sizes.held_bytes`.
    Raises `ValueError` (`TooManyValues`)."""
    if body.startswith(_UTF8_BOM):
        body = body[len(_UTF8_BOM) :]
    # one translate and two substring searches, in C (a regular expression took 6 µs):
    # an exponent or 309 digits (in a string too) has the parsed value walked for an
    # infinity. Each value starts at a byte of its own, so only a body of max_values
    # bytes or more counts them (a count loops over every byte: 2,000 instructions for a
    # 250-byte call): exactly outside strings, and strings are set apart above the limit
    shape = body.translate(_SHAPE)
    if (
        len(body) >= max_values
        and shape.count(b",") >= max_values
        and json_values(body, max_values) > max_values
    ):
        raise TooManyValues(f"more than {max_values} values")
    # keys only in pydantic-core's string cache (16,384 strings, process-wide): values are
    # ids, tokens, task ids and arguments, new with each request, which would fill it, a
    # string at a time, over hours of traffic (issue 28's soak); keys repeat
    data = from_json(body, allow_inf_nan=False, cache_strings="keys")
    if (
        b"0e" in shape or (len(shape) >= _DOUBLE_DIGITS and _LONGEST_DOUBLE in shape)
    ) and not _finite(data):
        raise ValueError("a number is out of range")
    return data


def _finite(value: Any) -> bool:
    """Whether every number in a parsed JSON value is finite (iterative: no deep recursion)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, float):
            if not math.isfinite(item):
                return False
        elif isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return True


def _bad_id() -> ProtocolError:
    return ProtocolError(400, INVALID_REQUEST, "Invalid Request: 'id' must be a string or integer")


def _reply(data: dict[str, Any], request_id: RequestId | None) -> IncomingReply:
    result, error = data.get("result"), data.get("error")
    if request_id is None or ("result" in data) == ("error" in data):
        raise _invalid(request_id, "a response needs an 'id' and either 'result' or 'error'")
    if error is not None and not (isinstance(error, dict) and isinstance(error.get("code"), int)):
        raise _invalid(request_id, "'error' must be an object with an integer 'code'")
    if "result" in data and not isinstance(result, dict):
        raise _invalid(request_id, "'result' must be an object")
    return IncomingReply(id=request_id, result=result, error=error)


def _invalid(request_id: RequestId | None, detail: str) -> ProtocolError:
    return ProtocolError(400, INVALID_REQUEST, f"Invalid Request: {detail}", request_id=request_id)
