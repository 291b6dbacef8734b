"""Reading one MCP POST: HTTP checks, the size limit, and the JSON-RPC envelope.

Knows nothing about methods or handlers; produces a read-only `IncomingMessage`.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable
from typing import cast

from starlette.types import Message, Receive

from mcp_asgi import _loop
from mcp_asgi.protocol.headers import CONTENT_LENGTH, CONTENT_TYPE, RequestHeaders
from mcp_asgi.protocol.jsonrpc import INVALID_REQUEST, ProtocolError


def check_content_type(headers: RequestHeaders) -> None:
    """415 unless the body is declared as JSON."""
    value = headers.first[CONTENT_TYPE]
    if value == b"application/json":  # as clients send it
        return
    media_type = (value or b"").decode("latin-1").split(";", 1)[0].strip().lower()
    if media_type != "application/json":
        raise ProtocolError(
            415, INVALID_REQUEST, "Unsupported Media Type: Content-Type must be application/json"
        )


def read_body(
    headers: RequestHeaders,
    receive: Receive,
    limit: int,
    task: asyncio.Task[object] | None,
    within: float = math.inf,
) -> bytes | Awaitable[bytes]:
    """The whole request body: itself where it came whole in the first message (most
    requests: no coroutine for them), else an awaitable of it (await it at once). 413 as
    soon as it is known to exceed `limit` bytes; 408 when it has not all arrived within
    `within` seconds (a slow sender holds memory and a connection for as long as it likes
    otherwise). `task` is the request's own task where anyio's cancellation is asyncio's
    (`native_task()`), else None."""
    declared = headers.first[CONTENT_LENGTH]
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise _too_large(limit)
    # On asyncio the first step of receive() is taken before the time limit is set: the
    # whole body is there already for most requests, and then no limit is needed. Not
    # elsewhere: a cancel scope that step entered would be left inside the limit's scope.
    first = _loop.at_once(receive()) if task is not None else receive()
    if isinstance(first, dict) and not first.get("more_body", False):
        return _whole(first, limit)
    return _rest(receive, limit, first, within)


async def _rest(
    receive: Receive, limit: int, first: Message | Awaitable[Message], within: float
) -> bytes:
    """The body from `first` on, within `within` seconds (408 past them)."""
    body = await _loop.within(within, _read, receive, limit, first)
    if isinstance(body, _loop.TimedOut):
        raise _too_slow(within)
    return body


def _too_slow(within: float) -> ProtocolError:
    return ProtocolError(
        408,
        INVALID_REQUEST,
        f"Request Timeout: the body did not arrive within {within:g} seconds",
        headers=[(b"connection", b"close")],  # the rest of the body is not read
    )


def _whole(message: Message, limit: int) -> bytes:
    """The body of a request that came in one message."""
    if message["type"] == "http.disconnect":
        raise ClientGone
    body: bytes = message.get("body", b"")
    if len(body) > limit:
        raise _too_large(limit)
    return body


async def _read(receive: Receive, limit: int, first: Message | Awaitable[Message]) -> bytes:
    """The body from `first` on (the first message, or the wait for it)."""
    chunks: list[bytes] = []
    size = 0
    message = first if isinstance(first, dict) else await cast(Awaitable[Message], first)
    while True:
        if message["type"] == "http.disconnect":
            raise ClientGone
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise _too_large(limit)
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)
        message = await receive()


class ClientGone(Exception):
    """The client disconnected before the request body was read."""


def _too_large(limit: int) -> ProtocolError:
    return ProtocolError(413, INVALID_REQUEST, f"Request body exceeds {limit} bytes")
