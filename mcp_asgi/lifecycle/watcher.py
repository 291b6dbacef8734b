"""The watcher: a request's second task, beside its handler.

::

    receive() until disconnect ─┐
    keep-alive when quiet       ├─► signal ──► tell the client ──► grace ──► exited | orphaned
    deadline, or cancel() ──────┘

It is the one reader of `receive()` once the body is read, so a disconnect and the deadline
become cancel signals here. After any signal it tells the client what it must hear (the
error of a server-side cancel, or just the end of the reply) and gives the handler
`cancel_grace` seconds to exit; past that, the request ends as an orphan.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Final

import anyio
from starlette.types import Receive

from mcp_asgi.lifecycle.cancel import CancelReason
from mcp_asgi.protocol import jsonrpc
from mcp_asgi.protocol.jsonrpc import INTERNAL_ERROR, JsonObject, McpError

if TYPE_CHECKING:
    from mcp_asgi.lifecycle.scope import RequestScope

_ERROR_WRITE_TIMEOUT: Final = 1.0  # bound on ending the reply after a signal


class Watcher:
    """Watches one request for its client leaving and its deadline; settles its end."""

    def __init__(
        self,
        scope: RequestScope,
        *,
        timeout: float | None,
        keepalive_interval: float,
        cancel_grace: float,
        on_server_end: Callable[[CancelReason], JsonObject] | None,
    ) -> None:
        self._scope_ref = weakref.ref(scope)  # the scope owns the watcher: no cycle
        self._keepalive = keepalive_interval if scope.writer.streams else 0.0
        self._grace = cancel_grace
        self._on_server_end = on_server_end
        self._timeout = timeout
        self._error_sent = False
        self._signalling = False  # the watcher itself is giving the signal
        self._stopped = False
        self._deadline: anyio.CancelScope | None = None  # made when watching starts

    @property
    def _scope(self) -> RequestScope:
        scope = self._scope_ref()
        assert scope is not None, "the watcher outlived its request scope"
        return scope

    def stop(self) -> None:
        """A signal came: stop watching (`watch` goes on to settle the end). A signal the
        watcher gives itself needs no stopping: it is no longer waiting."""
        if self._signalling:
            return
        self._stopped = True
        if self._deadline is not None:
            self._deadline.cancel()

    async def watch(self, receive: Receive) -> None:
        """Run until the reply is complete, or until a signal has been answered and the
        handler has exited or used up its grace period."""
        scope = self._scope
        self._deadline = deadline = anyio.CancelScope(deadline=self._deadline_at())
        if self._stopped:
            deadline.cancel()
        with deadline:
            await self._until_disconnect(receive)
            if scope.answered:
                return  # the reply is complete (ASGI servers then report a disconnect)
            self._signalling = True
            goes_on = scope.client_gone()
            self._signalling = False
            if goes_on:
                await anyio.sleep_forever()  # the handler goes on: keep watching the deadline
        if scope.reason is None and deadline.cancelled_caught:
            scope.cancel(CancelReason.TIMEOUT)
        if scope.reason is not None:
            await self._after_signal(scope.reason)

    async def stopped_from_outside(self) -> None:
        """The request's task itself is being cancelled (call it shielded): a server
        shutdown, answered as one, with the grace period waited out here."""
        scope = self._scope
        scope.cancel(CancelReason.SERVER_SHUTDOWN)
        # also when a lifespan shutdown signalled first: its watcher was cancelled with us
        await self._reply_server_error()
        if scope.outcome is None:
            await scope.work.wait_idle(self._grace)

    def _deadline_at(self) -> float:
        """The deadline on the event loop's clock, counted from the request's start (the
        watcher may start later: it starts once the handler first suspends)."""
        if self._timeout is None:
            return math.inf
        elapsed = max(0.0, self._scope.clock() - self._scope.started)
        return anyio.current_time() + self._timeout - elapsed

    async def _until_disconnect(self, receive: Receive) -> None:
        """Read `receive()` until the client is gone, with keep-alives while it is quiet."""
        while True:
            with anyio.move_on_after(self._keepalive or math.inf) as quiet:
                if (await receive())["type"] == "http.disconnect":
                    return
            if quiet.cancelled_caught and not await self._scope.writer.keepalive():
                return

    async def _after_signal(self, reason: CancelReason) -> None:
        scope = self._scope
        if reason is CancelReason.CLIENT_DISCONNECT:
            pass  # nobody to tell
        elif reason.client_initiated:
            # the client asked but is still connected: end its reply, with no message
            with anyio.CancelScope(shield=True), anyio.move_on_after(_ERROR_WRITE_TIMEOUT):
                await scope.writer.close()
        else:
            await self._reply_server_error()
        if scope.outcome == "too_late":
            return
        if not await scope.work.wait_idle(self._grace):
            scope.end()  # the span ends now; the orphan is counted until the work returns

    async def _reply_server_error(self) -> None:
        """End the reply of a server-side cancel with its error (or `on_server_end`'s
        message), once."""
        scope = self._scope
        reason = scope.reason
        if reason is None or reason.client_initiated or self._error_sent:
            return
        self._error_sent = True
        if self._on_server_end is not None:
            message = self._on_server_end(reason)
        else:
            scope.error = _server_cancel_error(reason, scope.timeout)
            message = jsonrpc.error_response(scope.request.id, scope.error)
        with anyio.CancelScope(shield=True), anyio.move_on_after(_ERROR_WRITE_TIMEOUT):
            await scope.writer.finish(message)


def _server_cancel_error(reason: CancelReason, timeout: float | None) -> McpError:
    if reason is CancelReason.TIMEOUT:
        message = f"Request timed out after {timeout:g} seconds"
    else:
        message = "Request cancelled: the server is shutting down"
    return McpError(INTERNAL_ERROR, message, {"reason": reason.value})
