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
`stop()`. On asyncio (3.11+) that is a loop timer and a direct `Task.cancel()`, taken back
with `uncancel()` once it has woken the wait: an anyio cancel scope costs about ten times
as much to make, enter, cancel (anyio formats the cancelling task's repr) and leave, on
every request whose handler waits for anything. Elsewhere (trio, 3.10) it is an anyio
cancel scope. A cancellation that is not the watcher's own passes through either way.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Awaitable, Callable
from typing import TypeVar

import anyio
from starlette.types import Receive

from mcp_asgi._event_loop import (
    TIMED_OUT,
    Interruptible,
    TimedOut,
    native_task,
    new_cancel_scope,
)

T = TypeVar("T")


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

    __slots__ = (
        "_cancel_scope",
        "_deadline",
        "_interrupt",
        "_interval",
        "_keepalive",
        "_stopped",
    )

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
        self._cancel_scope: anyio.CancelScope | None = None  # the wait's, off asyncio
        self._interrupt: Interruptible | None = None  # the waits', on asyncio (made on the first)

    def stop(self) -> None:
        """Stop watching: a running `watch` or `until_deadline` returns STOPPED. Idempotent."""
        self._stopped = True
        if self._interrupt is not None:
            self._interrupt.interrupt()
        if self._cancel_scope is not None:
            self._cancel_scope.cancel()

    async def watch(self, receive: Receive) -> WatchEnd:
        """Wait until the client is gone, the deadline passes, or `stop()`; write a
        keep-alive each time the reply has been quiet for the interval."""
        while True:
            until = min(self._deadline, anyio.current_time() + self._interval)
            if await self._until(until, _disconnect, receive) is not TIMED_OUT:
                return WatchEnd.CLIENT_GONE
            if self._stopped:
                return WatchEnd.STOPPED
            if until >= self._deadline:
                return WatchEnd.DEADLINE
            if self._keepalive is not None:  # the quiet period is over: a keep-alive
                written = await self._until(self._deadline, self._keepalive)
                if written is False:
                    return WatchEnd.CLIENT_GONE
                if written is TIMED_OUT or self._stopped:
                    return WatchEnd.STOPPED if self._stopped else WatchEnd.DEADLINE

    async def until_deadline(self) -> WatchEnd:
        """Wait, no longer reading `receive()`, until the deadline passes or `stop()`."""
        await self._until(self._deadline, anyio.sleep_forever)
        return WatchEnd.STOPPED if self._stopped else WatchEnd.DEADLINE

    async def _until(
        self, until: float, fn: Callable[..., Awaitable[T]], *args: object
    ) -> T | TimedOut:
        """`await fn(*args)`, or `TIMED_OUT` once `until` passes or on `stop()`."""
        if self._stopped:
            return TIMED_OUT
        task = native_task()
        if task is not None:
            if self._interrupt is None:
                self._interrupt = Interruptible()
            return await self._interrupt.run(task, until, fn, *args)
        with new_cancel_scope(deadline=until) as scope:
            self._cancel_scope = scope
            return await fn(*args)
        return TIMED_OUT


async def _disconnect(receive: Receive) -> None:
    """Read `receive()` until the client is gone."""
    while (await receive())["type"] != "http.disconnect":
        pass
