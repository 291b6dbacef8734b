"""Writing one request's reply: a single JSON body, or an SSE stream of notifications then
the final response. Knows nothing about parsing or handlers.

`auto` decides as late as it can: a reply whose first write is the final response is one
JSON body; a notification or a keep-alive tick first commits the reply to SSE.
"""

from __future__ import annotations

import enum
from typing import Any, Final

from pydantic_core import to_json
from sse_starlette.event import ServerSentEvent
from starlette.types import Message, Send

from mcp_asgi import _loop
from mcp_asgi._loggers import errors_logger as _errors
from mcp_asgi.http.accept import ResponseMode
from mcp_asgi.protocol.jsonrpc import INTERNAL_ERROR, McpError, error_response

_JSON_HEADERS: Final = [(b"content-type", b"application/json")]
_SSE_HEADERS: Final = [
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache, no-transform"),
    (b"x-accel-buffering", b"no"),
]
_KEEPALIVE: Final = ServerSentEvent(comment="").encode()
# seconds `end()` waits for its sends: the client is gone, so a send should return at once,
# but some servers block it for ever (Hypercorn over HTTP/2 once the connection has closed)
_END_TIMEOUT = 1.0


class ReplyState(enum.Enum):
    PENDING = "pending"
    STREAMING = "streaming"
    DONE = "done"


# a member looked up on an Enum class is a Python-level lookup (3.11): module globals
_PENDING, _STREAMING, _DONE = ReplyState


def dump(message: Any) -> bytes:
    """Compact JSON encoding (UTF-8) of one JSON-RPC message.

    Values plain JSON has no form for (datetimes, UUIDs, models, bytes in an error's
    `data` or a prompt's content) are converted as pydantic does; NaN and infinities
    become null. A response that still cannot be encoded is replaced by a -32603 error
    for the same id, so the client always gets valid JSON; a notification raises
    `TypeError` to the handler that tried to send it.
    """
    return encode_reply(message)[0]


def encode_reply(message: Any) -> tuple[bytes, McpError | None]:
    """`dump`, and the -32603 error that replaced a response that could not be encoded.

    pydantic-core's serializer writes the same JSON as `json.dumps` with compact separators
    and no ASCII escaping, several times faster, and it knows pydantic's types."""
    try:
        return to_json(message, inf_nan_mode="null"), None
    except (TypeError, ValueError):  # PydanticSerializationError is a ValueError
        pass
    if not (isinstance(message, dict) and ("result" in message or "error" in message)):
        raise TypeError("the message cannot be encoded as JSON") from None
    request_id = message.get("id")
    _errors.error("a reply could not be encoded as JSON", extra={"request_id": request_id})
    error = McpError(INTERNAL_ERROR, "Internal error: the reply is not valid JSON")
    return to_json(error_response(request_id, error), inf_nan_mode="null"), error


async def send_json(
    send: Send, status: int, body: bytes, headers: list[tuple[bytes, bytes]]
) -> None:
    """Send one complete JSON response."""
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [*_JSON_HEADERS, (b"content-length", str(len(body)).encode()), *headers],
        }
    )
    await send({"type": "http.response.body", "body": body})


async def send_empty(send: Send, status: int) -> None:
    """Send a response with no body: 202 for an accepted notification, 204 for a DELETE."""
    await send({"type": "http.response.start", "status": status, "headers": []})
    await send({"type": "http.response.body", "body": b""})


class ReplyWriter:
    """The only object that calls `send` for a request once it is dispatched.

    Writes are serialised by a lock so a keep-alive never interleaves with an event. Any
    exception from `send` means the client is gone: the writer turns DONE and reports False.
    `replaced_by` is the -32603 error sent instead of a final response that could not be
    encoded (see `dump`).
    """

    __slots__ = (
        "_ended",
        "_lock",
        "_mode",
        "_preamble",
        "_send_asgi",
        "_started",
        "replaced_by",
        "state",
    )

    def __init__(self, send: Send, mode: ResponseMode, *, preamble: bytes = b"") -> None:
        """`preamble` is written first once the reply is an event stream (a resumable
        stream's priming event)."""
        self._send_asgi = send
        self._mode: ResponseMode = mode
        self._preamble = preamble
        self._lock = _loop.Line(1)  # writes in turn, first come first served
        self._started = False
        self._ended = False
        self.state = _PENDING
        self.replaced_by: McpError | None = None

    async def _send(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self._started = True
        elif not message.get("more_body", False):
            self._ended = True
        await self._send_asgi(message)

    @property
    def streams(self) -> bool:
        """Whether notifications can reach the client (not a JSON-only reply)."""
        return self._mode != "json"

    async def notify(self, message: Any) -> bool:
        """Send a notification event; dropped (True) in JSON mode."""
        if self._mode == "json":
            return True
        return await self._write(_event(dump(message)), final=False)

    async def keepalive(self) -> bool:
        """Send a keep-alive comment; commits an `auto` reply to SSE."""
        if self._mode == "json":
            return True
        return await self._write(_KEEPALIVE, final=False)

    async def finish(self, message: Any, status: int = 200) -> bool:
        """Send the final response and end the reply.

        A reply not yet begun is one JSON body with `status` (an error's status, chosen
        before anything was sent), except a 200 in SSE mode, which is an event stream.
        Once an SSE reply has begun, its status is fixed: the message is its last event.
        """
        lock = self._lock  # `async with lock`, written out: no coroutine to enter, to leave
        if not lock.take():
            await lock.wait_in_line()
        try:
            if self.state is _DONE:
                return False
            body, self.replaced_by = encode_reply(message)
            if self.state is _PENDING and (self._mode != "sse" or status != 200):
                # `send_json` through `_send`, written out: most replies end here
                send = self._send_asgi
                headers = [*_JSON_HEADERS, (b"content-length", str(len(body)).encode())]
                try:
                    self._started = True
                    await send(
                        {"type": "http.response.start", "status": status, "headers": headers}
                    )
                    self._ended = True
                    await send({"type": "http.response.body", "body": body})
                except Exception:
                    return self._gone()
                self.state = _DONE
                return True
        finally:
            lock.release()
        return await self._write(_event(body), final=True)

    async def close_early(self) -> bool:
        """End the HTTP response now while the request goes on, where the rest can be
        fetched later (a resumable stream: the client polls); False: this reply cannot."""
        return False

    def abandon(self) -> None:
        """Never write again (the client is gone)."""
        self.state = _DONE

    def end_at_once(self) -> bool:
        """`end()` where the reply is complete and nobody is writing (most requests): done
        now, True; else False, and `await end()`."""
        if self._ended and not self._lock.in_use:
            self.state = _DONE  # what `end` does then, without taking the lock
            return True
        return False

    async def end(self) -> None:
        """Complete the HTTP exchange of a request that ended without a reply because its
        client left: an empty last chunk ends a started stream, and a response never
        started becomes an empty `499` (nginx's "client closed request"), so middleware
        wrapping this one (e.g. Starlette's `BaseHTTPMiddleware`) sees a response instead
        of raising. No JSON-RPC message is written; servers discard it: the client is gone.
        A server that blocks the send (the connection is closed) is given up after a second.
        """
        # the reply is complete: done at once (this class's test: a subclass's `end_at_once`
        # may say no to send its callers here, and then ends more before calling this)
        if ReplyWriter.end_at_once(self):
            return
        lock = self._lock
        if not lock.take():  # `async with lock`, written out as in `finish`
            await lock.wait_in_line()
        try:
            self.state = _DONE
            if self._ended:
                return
            try:
                await _loop.within_after_first_step(_END_TIMEOUT, self._end_exchange())
            except Exception:
                self._ended = True
        finally:
            lock.release()

    async def _end_exchange(self) -> None:
        send = self._send_asgi  # `_send`, written out: no coroutine per message
        if not self._started:
            self._started = True
            await send({"type": "http.response.start", "status": 499, "headers": []})
        self._ended = True
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def close(self) -> None:
        """End a reply that is still open, without another message (its request was
        cancelled while the client stays connected). A reply not yet begun becomes an
        empty event stream, or `202 Accepted` with no body in JSON mode."""
        async with self._lock:
            state, self.state = self.state, _DONE
            if state is _DONE:
                return
            try:
                if state is _PENDING:
                    sse = self._mode != "json"
                    await self._send(
                        {
                            "type": "http.response.start",
                            "status": 200 if sse else 202,
                            "headers": _SSE_HEADERS if sse else [],
                        }
                    )
                await self._send({"type": "http.response.body", "body": b""})
            except Exception:
                return

    async def _write(self, chunk: bytes, *, final: bool) -> bool:
        async with self._lock:
            if self.state is _DONE:
                return False
            try:
                if self.state is _PENDING:
                    await self._send(
                        {"type": "http.response.start", "status": 200, "headers": _SSE_HEADERS}
                    )
                    self.state = _STREAMING
                    chunk = self._preamble + chunk
                await self._send(
                    {"type": "http.response.body", "body": chunk, "more_body": not final}
                )
            except Exception:
                return self._gone()
            if final:
                self.state = _DONE
            return True

    def _gone(self) -> bool:
        self.state = _DONE
        return False


def _event(body: bytes, event_id: str | None = None) -> bytes:
    return ServerSentEvent(data=body.decode("utf-8"), event="message", id=event_id).encode()


def sse_event(body: bytes, event_id: str | None) -> bytes:
    """One `message` event carrying a JSON-RPC message, with its id (None: without)."""
    return _event(body, event_id)
