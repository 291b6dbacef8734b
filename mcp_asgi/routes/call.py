"""One in-process HTTP exchange with the app: `call_app` runs the app on a scope and a
body, in the caller's task, and collects its answer.

    receive   the body, once; then `http.disconnect` once the answer is complete, the
              answer was cut, or the request was cancelled (until then it waits)
    send      the status and headers; the body up to `max_bytes`. One byte more and
              the answer is cut: the app is told the client left and its work is
              cancelled, as when a client closes the connection mid-stream

The call runs in the caller's task and cancel scope: when the MCP request is cancelled
(its client left, its deadline passed, the server shuts down) the route's work is
cancelled where it awaits, its `yield` dependencies are closed with the cancellation,
and `receive` reports `http.disconnect` from then on (to shielded cleanup code); a probe
that cancels its own wait (Starlette's `Request.is_disconnected()`) hears nothing until
then. A task's call is cancelled the same way by `tasks/cancel` (reason
`task_cancelled`) or its deadline, never by its creator's disconnect. The current
OpenTelemetry context goes along, so the app's own span (its instrumentation's) is a
child of the tool call's span. Background tasks run before the call returns, as with any ASGI
test client. An exception the app raises (after its 500, as Starlette re-raises) is
logged here and the call answers 500.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import anyio
import anyio.lowlevel
from starlette.types import ASGIApp, Message, Scope

from mcp_asgi._loggers import errors_logger as _errors


@dataclass(slots=True)
class Answer:
    """What the app answered: status, headers, the body (as much as was read)."""

    status: int = 0
    headers: list[tuple[bytes, bytes]] = field(default_factory=list)
    chunks: list[bytes] = field(default_factory=list)
    size: int = 0
    complete: bool = False
    cut: bool = False

    @property
    def body(self) -> bytes:
        return b"".join(self.chunks)

    def header(self, name: bytes) -> str | None:
        for key, value in self.headers:
            if key.lower() == name:
                return value.decode("latin-1")
        return None


async def call_app(
    app: ASGIApp,
    scope: Scope,
    body: bytes,
    *,
    max_bytes: int,
    cancelled: Callable[[], bool] = lambda: False,
) -> Answer:
    """Run `app` on `scope` with `body` and return its answer (cut after `max_bytes`).
    `cancelled` says whether the call's request is cancelled (then `receive` reports
    `http.disconnect`, e.g. to a route's shielded cleanup)."""
    answer = Answer()
    gone = anyio.Event()
    delivered = False

    async def receive() -> Message:
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}
        if cancelled():
            gone.set()
        try:
            await gone.wait()
        finally:
            if cancelled():  # the request cancelled while waiting: gone for good
                gone.set()  # (not a probe's own cancel: Request.is_disconnected())
        return {"type": "http.disconnect"}

    with anyio.CancelScope() as cut:

        async def send(message: Message) -> None:
            await anyio.lowlevel.checkpoint()  # a cancel (a cut's too) lands here
            if answer.complete or answer.cut:
                return
            if message["type"] == "http.response.start":
                answer.status = int(message["status"])
                answer.headers = list(message.get("headers", []))
            elif message["type"] == "http.response.body":
                chunk = bytes(message.get("body", b""))
                room = max_bytes - answer.size
                answer.chunks.append(chunk[:room])
                answer.size += min(len(chunk), room)
                if len(chunk) > room:
                    answer.cut = True
                    gone.set()
                    cut.cancel()
                elif not message.get("more_body", False):
                    answer.complete = True
                    gone.set()

        try:
            await app(scope, receive, send)
        except Exception:
            _errors.error("the route %s %s raised", scope["method"], scope["path"], exc_info=True)
            if not answer.status or not (answer.complete or answer.cut):
                return Answer(500, [(b"content-type", b"text/plain")], [b"Internal Server Error"])
    if not answer.status:
        return Answer(500, [(b"content-type", b"text/plain")], [b"the app sent no response"])
    return answer
