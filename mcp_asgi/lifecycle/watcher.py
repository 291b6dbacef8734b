"""The watcher: what a request's second task waits for, beside its handler.

::

    watch()            receive() until disconnect ──► CLIENT_GONE
                       keep-alives while the reply is quiet (a failed one ──► CLIENT_GONE)
                       the deadline passes ─────────► DEADLINE
                       stop() ──────────────────────► STOPPED
    until_deadline()   the deadline, or stop() (a request that outlives its client)

It is the one reader of `receive()` once the body is read. It only reports why it stopped:
the request scope decides what that means and does it.

Each wait is bounded by one time (the deadline, or the next keep-alive if sooner) and by
`stop()` (`mcp_asgi._loop.Waits`: a loop timer and the task's own cancellation on asyncio,
an anyio cancel scope elsewhere). A cancellation that is not the watcher's own passes
through.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Awaitable, Callable
from typing import TypeVar

import anyio
from starlette.types import Receive

from mcp_asgi._loop import TIMED_OUT, Clock, TimedOut, Waits

T = TypeVar("T")


class WatchEnd(enum.Enum):
    """Why the watcher stopped."""

    CLIENT_GONE = "client_gone"
    """The client disconnected, or a keep-alive could not be written."""
    DEADLINE = "deadline"
    """The request's deadline passed."""
    STOPPED = "stopped"
    """`stop()` was called."""


class Watcher(Waits):
    """Watches one request's connection and deadline (an absolute time on the loop's clock).
    It is its own waits (`Waits`, one at a time): no object of their own per request."""

    __slots__ = ("_clock", "_deadline", "_interval", "_keepalive", "_stopped")

    def __init__(
        self,
        *,
        deadline: float,
        keepalive: Callable[[], Awaitable[bool]] | None,
        keepalive_interval: float,
        clock: Clock | None = None,
    ) -> None:
        """`keepalive` writes one keep-alive and says whether it could (None: no
        keep-alives); `clock` is the loop's, the deadline's (default `anyio.current_time`,
        which asks anyio for the running backend each time)."""
        super().__init__()
        self._clock = clock or anyio.current_time
        self._deadline = deadline
        self._keepalive = keepalive if keepalive_interval > 0 else None
        self._interval = keepalive_interval if self._keepalive is not None else math.inf
        self._stopped = False

    def stop(self) -> None:
        """Stop watching: a running `watch` or `until_deadline` returns STOPPED. Idempotent."""
        self._stopped = True
        self.interrupt()

    async def watch(self, receive: Receive) -> WatchEnd:
        """Wait until the client is gone, the deadline passes, or `stop()`; write a
        keep-alive each time the reply has been quiet for the interval."""
        while True:
            until = min(self._deadline, self._clock() + self._interval)
            # `receive()` itself is waited for (no coroutine of ours around it): anything
            # but a disconnect is read past, each read a wait of its own
            message = await self.run(until, receive)
            while not isinstance(message, TimedOut) and message["type"] != "http.disconnect":
                message = await self.run(until, receive)
            if not isinstance(message, TimedOut):
                return WatchEnd.CLIENT_GONE
            if self._stopped:
                return WatchEnd.STOPPED
            if until >= self._deadline:
                return WatchEnd.DEADLINE
            if self._keepalive is not None:  # the quiet period is over: a keep-alive
                written = await self.run(self._deadline, self._keepalive)
                if written is False:
                    return WatchEnd.CLIENT_GONE
                if written is TIMED_OUT or self._stopped:
                    return WatchEnd.STOPPED if self._stopped else WatchEnd.DEADLINE

    async def until_deadline(self) -> WatchEnd:
        """Wait, no longer reading `receive()`, until the deadline passes or `stop()`."""
        await self.run(self._deadline, anyio.sleep_forever)
        return WatchEnd.STOPPED if self._stopped else WatchEnd.DEADLINE
