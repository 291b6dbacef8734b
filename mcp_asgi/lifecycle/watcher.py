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

import asyncio
import enum
import math
from collections.abc import Awaitable, Callable
from typing import TypeVar

import anyio
from starlette.types import Receive

from mcp_asgi._event_loop import native_task, new_cancel_scope, uncancel

T = TypeVar("T")


class WatchEnd(enum.Enum):
    """Why the watcher stopped."""

    CLIENT_GONE = "client_gone"
    """The client disconnected, or a keep-alive could not be written."""
    DEADLINE = "deadline"
    """The request's deadline passed."""
    STOPPED = "stopped"
    """`stop()` was called."""


class _Interrupted:
    """What a bounded wait returns when its time came or `stop()` was called."""


_INTERRUPTED = _Interrupted()


class Watcher:
    """Watches one request's connection and deadline (an absolute time on the loop's clock)."""

    __slots__ = (
        "_cancel_scope",
        "_deadline",
        "_interrupting",
        "_interval",
        "_keepalive",
        "_stopped",
        "_waiting",
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
        self._waiting: asyncio.Task[object] | None = None  # the task in a wait, on asyncio
        self._interrupting = False  # it has been cancelled to end its wait

    def stop(self) -> None:
        """Stop watching: a running `watch` or `until_deadline` returns STOPPED. Idempotent."""
        self._stopped = True
        self._interrupt()
        if self._cancel_scope is not None:
            self._cancel_scope.cancel()

    async def watch(self, receive: Receive) -> WatchEnd:
        """Wait until the client is gone, the deadline passes, or `stop()`; write a
        keep-alive each time the reply has been quiet for the interval."""
        while True:
            until = min(self._deadline, anyio.current_time() + self._interval)
            if await self._until(until, _disconnect, receive) is not _INTERRUPTED:
                return WatchEnd.CLIENT_GONE
            if self._stopped:
                return WatchEnd.STOPPED
            if until >= self._deadline:
                return WatchEnd.DEADLINE
            if self._keepalive is not None:  # the quiet period is over: a keep-alive
                written = await self._until(self._deadline, self._keepalive)
                if written is False:
                    return WatchEnd.CLIENT_GONE
                if written is _INTERRUPTED or self._stopped:
                    return WatchEnd.STOPPED if self._stopped else WatchEnd.DEADLINE

    async def until_deadline(self) -> WatchEnd:
        """Wait, no longer reading `receive()`, until the deadline passes or `stop()`."""
        await self._until(self._deadline, anyio.sleep_forever)
        return WatchEnd.STOPPED if self._stopped else WatchEnd.DEADLINE

    async def _until(
        self, until: float, fn: Callable[..., Awaitable[T]], *args: object
    ) -> T | _Interrupted:
        """`await fn(*args)`, or `_INTERRUPTED` once `until` passes or on `stop()`."""
        if self._stopped:
            return _INTERRUPTED
        self._interrupting = False
        task = native_task()
        if task is not None:
            return await self._until_on_asyncio(task, until, fn, *args)
        with new_cancel_scope(deadline=until) as scope:
            self._cancel_scope = scope
            return await fn(*args)
        return _INTERRUPTED

    async def _until_on_asyncio(
        self,
        task: asyncio.Task[object],
        until: float,
        fn: Callable[..., Awaitable[T]],
        *args: object,
    ) -> T | _Interrupted:
        loop = asyncio.get_running_loop()
        timer = loop.call_at(until, self._interrupt) if until < math.inf else None
        self._waiting = task
        try:
            result = await fn(*args)
        except asyncio.CancelledError:
            if not self._interrupting or uncancel(task) > 0:
                raise  # not ours, or another cancellation came with ours
            return _INTERRUPTED
        finally:
            self._waiting = None
            if timer is not None:
                timer.cancel()
        if self._interrupting:  # `fn` swallowed our cancellation: take it back all the same
            uncancel(task)
        return result

    def _interrupt(self) -> None:
        """End the current wait on asyncio (the timer's callback, and `stop()`), once."""
        task = self._waiting
        if task is not None and not self._interrupting:
            self._interrupting = True
            task.cancel()


async def _disconnect(receive: Receive) -> None:
    """Read `receive()` until the client is gone."""
    while (await receive())["type"] != "http.disconnect":
        pass
