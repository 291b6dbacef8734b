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
from typing import TypeAlias

import anyio
from starlette.types import Message, Receive

from mcp_asgi._loop import TIMED_OUT, WAITING, Begun, Clock, TimedOut, Waits, given, ready


class WatchEnd(enum.Enum):
    """Why the watcher stopped."""

    CLIENT_GONE = "client_gone"
    """The client disconnected, or a keep-alive could not be written."""
    DEADLINE = "deadline"
    """The request's deadline passed."""
    STOPPED = "stopped"
    """`stop()` was called."""


_CLIENT_GONE, _DEADLINE, _STOPPED = WatchEnd  # module globals: no Enum class lookup

Received: TypeAlias = "Begun[Message] | Message"
"""A `receive()` begun in another task (its wait), or the message it answered at once."""


def quiet_for(keepalive_interval: float, streams: bool) -> float:
    """How long a reply may be quiet before a keep-alive is written: `keepalive_interval`
    for a reply that streams (0: never), else never (inf)."""
    return keepalive_interval if streams and keepalive_interval > 0 else math.inf


class Watcher(Waits):
    """Watches one request's connection and deadline (an absolute time on the loop's clock).
    Its waits are its own (`Waits`, which it is: made only when a request is watched)."""

    __slots__ = ("_clock", "_deadline", "_interval", "_keepalive")

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
        self._interval = quiet_for(keepalive_interval, keepalive is not None)
        self._keepalive = keepalive if self._interval < math.inf else None

    def stop(self) -> None:
        """Stop watching: a running `watch` or `until_deadline` returns STOPPED, and so does
        every later one at once. Idempotent."""
        self.interrupt()

    async def watch(
        self,
        receive: Receive,
        first: Received | None = None,
        since: float | None = None,
    ) -> WatchEnd:
        """Wait until the client is gone, the deadline passes, or `stop()`; write a
        keep-alive each time the reply has been quiet for the interval.

        `first`: a `receive()` already begun (or its message, if it answered at once), gone
        on with before `receive` is called again, given up if stopped first; `since`: when
        the reply's quiet began (default now)."""
        quiet_since = self._clock() if since is None else since
        while True:
            until = min(self._deadline, quiet_since + self._interval)
            if first is None:
                message = await self.run(until, receive)  # no coroutine of ours around it
            else:
                message = await self._go_on(until, first)
                first = None
            while not isinstance(message, TimedOut) and message["type"] != "http.disconnect":
                message = await self.run(until, receive)  # (none is expected after the body)
            if not isinstance(message, TimedOut):
                return _CLIENT_GONE
            if self.interrupted:
                return _STOPPED
            if until >= self._deadline:
                return _DEADLINE
            if self._keepalive is not None:  # the quiet period is over: a keep-alive
                written = await self.run(self._deadline, self._keepalive)
                if written is False:
                    return _CLIENT_GONE
                if written is TIMED_OUT or self.interrupted:
                    return _STOPPED if self.interrupted else _DEADLINE
            quiet_since = self._clock()

    def _go_on(self, until: float, first: Received) -> Awaitable[Message | TimedOut]:
        """`await self._go_on(...)`: the message of a `receive()` begun elsewhere, as `run`
        would wait for a new one (given up if stopped already)."""
        if not isinstance(first, Begun):
            return ready(first)
        if self.interrupted:
            first.abandon()
            return ready(TIMED_OUT)
        if first.woken:  # woken already (the client left, mostly): no wait to time or interrupt
            message = first.step()
            if message is not WAITING:
                return ready(message)
        return self.run(until, given, first)

    async def until_deadline(self) -> WatchEnd:
        """Wait, no longer reading `receive()`, until the deadline passes or `stop()`."""
        await self.run(self._deadline, anyio.sleep_forever)
        return _STOPPED if self.interrupted else _DEADLINE
