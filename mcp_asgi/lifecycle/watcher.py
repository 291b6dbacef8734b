"""The watcher: what a request's second task waits for, beside its handler.

::

    watch()            receive() until disconnect ──► CLIENT_GONE
                       keep-alives while the reply is quiet (a failed one ──► CLIENT_GONE)
                       the deadline passes ─────────► DEADLINE
                       stop() ──────────────────────► STOPPED
    until_deadline()   the deadline, or stop() (a request that outlives its client)

It is the one reader of `receive()` once the body is read. It only reports why it stopped:
the request scope decides what that means and does it.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Awaitable, Callable

import anyio
from starlette.types import Receive

from mcp_asgi.lifecycle.cancel_scopes import new_cancel_scope


class WatchEnd(enum.Enum):
    """Why the watcher stopped."""

    CLIENT_GONE = "client_gone"
    """The client disconnected, or a keep-alive could not be written."""
    DEADLINE = "deadline"
    """The request's deadline passed."""
    STOPPED = "stopped"
    """`stop()` was called."""


class Watcher:
    """Watches one request's connection and deadline (an absolute time on the loop's clock)."""

    __slots__ = ("_cancel_scope", "_deadline", "_interval", "_keepalive", "_stopped")

    def __init__(
        self,
        *,
        deadline: float,
        keepalive: Callable[[], Awaitable[bool]] | None,
        keepalive_interval: float,
    ) -> None:
        """`keepalive` writes one keep-alive and says whether it could (None: no keep-alives)."""
        self._deadline = deadline
        self._keepalive = keepalive if keepalive_interval > 0 else None
        self._interval = keepalive_interval if self._keepalive is not None else math.inf
        self._stopped = False
        self._cancel_scope: anyio.CancelScope | None = None

    def stop(self) -> None:
        """Stop watching: a running `watch` or `until_deadline` returns STOPPED. Idempotent."""
        self._stopped = True
        if self._cancel_scope is not None:
            self._cancel_scope.cancel()

    async def watch(self, receive: Receive) -> WatchEnd:
        """Wait until the client is gone, the deadline passes, or `stop()`; write a
        keep-alive each time the reply has been quiet for the interval.

        One cancel scope per quiet period serves the deadline, `stop()` and the next
        keep-alive at once (the earliest of the two times): a request answered before its
        first keep-alive, the common case, costs one scope."""
        while True:
            quiet = self._interval < math.inf
            until = min(self._deadline, anyio.current_time() + self._interval) if quiet else None
            with self._scope(until) as scope:
                while (await receive())["type"] != "http.disconnect":
                    pass
                return WatchEnd.CLIENT_GONE
            if self._stopped or until is None or until >= self._deadline:
                return self._why(scope)
            with self._scope() as scope:  # the quiet period is over: a keep-alive
                if self._keepalive is not None and not await self._keepalive():
                    return WatchEnd.CLIENT_GONE
            if scope.cancel_called:  # stopped, or the deadline passed, while it was written
                return WatchEnd.STOPPED if self._stopped else WatchEnd.DEADLINE

    async def until_deadline(self) -> WatchEnd:
        """Wait, no longer reading `receive()`, until the deadline passes or `stop()`."""
        with self._scope() as scope:
            await anyio.sleep_forever()
        return self._why(scope)

    def _scope(self, deadline: float | None = None) -> anyio.CancelScope:
        """A scope that `stop()` cancels, ending at `deadline` (default: the request's)."""
        until = self._deadline if deadline is None else deadline
        self._cancel_scope = scope = new_cancel_scope(deadline=until)
        if self._stopped:
            scope.cancel()
        return scope

    def _why(self, scope: anyio.CancelScope) -> WatchEnd:
        return (
            WatchEnd.DEADLINE if scope.cancelled_caught and not self._stopped else WatchEnd.STOPPED
        )
