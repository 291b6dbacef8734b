"""The client watched from the request's own task while its handler waits (asyncio).

A handler that waits needs somebody to notice the client leaving, the deadline passing and
the time of a keep-alive. Until one of them happens, that needs no task of its own:

::

    receive()'s first step, taken in the request's task ──► what it waits for: a callback
    the deadline, or the first keep-alive's time ─────────► the loop's timer (one for all)

Either of them, or a signal from outside (a shutdown, a cancel), starts the watcher's task
(`TakesOver.start_watcher`), which goes on with the same `receive()`. A handler that answers
first, the most common end, needs no task at all: the `receive()` is finished in the
request's task, where the server woke it as the reply ended, or given up (`finish`).

A `receive()` begun in one task and finished in another must take no cancel scope and
start no task in its first step (a `BaseHTTPMiddleware` around us enters a task group
there; `asyncio.timeout` binds to the task): only a receive known to be plain is begun
here (`plainness`), any other gets the watcher's task from the start, as before. One whose
steps need no task at all (a server's: uvicorn's, `asyncio.Queue.get`) is finished in the
callback itself when it wakes: its message goes to `TakesOver.received`, so the client
leaving cancels the handler with no task made for it.
"""

from __future__ import annotations

import asyncio
import contextvars
import math
from typing import Any, Final, Protocol, TypeVar

from starlette.types import Message, Receive

from mcp_asgi._loop import WAITING, Begun, add_deadline, discard_deadline
from mcp_asgi.lifecycle.watcher import Received

_PLAIN: Final = "plain_receive"
_PLAIN_SERVERS: Final = (("uvicorn.protocols.http.", "receive"), ("asyncio.queues", "get"))
"""Bound methods known to be plain anywhere, by their object's module (a prefix) and their
name: uvicorn's request-response cycles (h11, httptools), which only wait on an
`asyncio.Event` and then make the message, and `asyncio.Queue.get`, which Hypercorn hands
over as `receive` on asyncio."""

NOT_PLAIN: Final = 0
"""A `receive()` that is only ever awaited, by one task (the watcher's)."""
PLAIN: Final = 1
"""Begun in one task and finished in another (its first step takes no cancel scope and
starts no task)."""
ANYWHERE: Final = 2
"""`PLAIN`, and its later steps need no task at all (no anyio, no running task asked for):
finished in a loop callback once what it waits for is done."""

R = TypeVar("R")


def plain(receive: R) -> R:
    """Mark `receive` (a function) as `PLAIN`. Returns it. (A callable object says so with
    an attribute `plain_receive` of its own: true, or `ANYWHERE`.)"""
    setattr(receive, _PLAIN, PLAIN)
    return receive


def plain_anywhere(receive: R) -> R:
    """Mark `receive` (a function) as `ANYWHERE` plain. Returns it."""
    setattr(receive, _PLAIN, ANYWHERE)
    return receive


def plainness(receive: Receive) -> int:
    """How plain `receive` is known to be (`NOT_PLAIN`, `PLAIN`, `ANYWHERE`): as marked
    (`plain`), or `ANYWHERE` for a bound method of a server known to keep it so
    (`_PLAIN_SERVERS`)."""
    # the server first: a bound method's missing attribute would cost an AttributeError
    server = getattr(receive, "__self__", None)
    if server is not None:
        module, name = type(server).__module__, getattr(receive, "__name__", "")
        for prefix, method in _PLAIN_SERVERS:
            if name == method and module.startswith(prefix):
                return ANYWHERE
    marked = getattr(receive, _PLAIN, False)
    return ANYWHERE if marked == ANYWHERE else PLAIN if marked else NOT_PLAIN


def begins_plainly(receive: Receive) -> bool:
    """Whether `receive` is known to be plain (`PLAIN` or `ANYWHERE`)."""
    return plainness(receive) != NOT_PLAIN


class TakesOver(Protocol):
    """Who takes over once something happens: the request's scope."""

    def start_watcher(
        self,
        receive: Receive,
        first: Received | None,
        since: float,
        context: contextvars.Context | None,
    ) -> None: ...

    def received(
        self,
        message: Message,
        receive: Receive,
        since: float,
        context: contextvars.Context,
    ) -> None:
        """The armed `receive()`, finished where it woke (`ANYWHERE`), answered `message`
        (on the loop, in the request's `context`)."""


class ArmedWatch:
    """One request's watch while its handler waits in the request's task: `receive()`
    begun there, a callback on what it waits for, and the deadline or first keep-alive on
    the loop's timer. Made only where that wait is an asyncio future."""

    __slots__ = ("_anywhere", "_context", "_first", "_owner", "_receive", "_since", "_timed")

    def __init__(
        self,
        owner: TakesOver,
        receive: Receive,
        first: Begun[Message],
        *,
        since: float,
        until: float,
        context: contextvars.Context,
        anywhere: bool = False,
    ) -> None:
        """`first`: `receive()` begun, waiting on an asyncio future; `since`: when the
        handler began to wait (on the request's clock); `until`: when the watch must act
        by itself (the deadline, or the first keep-alive); `context`: the request's, for
        the watcher's task; `anywhere`: `receive` is `ANYWHERE` plain."""
        self._owner: TakesOver | None = owner
        self._receive = receive
        self._first = first
        self._since = since
        self._context = context
        self._anywhere = anywhere
        self._timed = until < math.inf
        future: asyncio.Future[Any] = first.pending
        future.add_done_callback(self._woke, context=context)
        if self._timed:
            add_deadline(self, until)

    def _woke(self, _: asyncio.Future[Any]) -> None:
        """What `receive()` waits for is done: a message came (the client left, mostly).
        An `ANYWHERE` receive is finished here and its message handed over; one that waits
        again goes on in the watcher's task, and so does one that fails (raising there)."""
        if not self._anywhere:
            self.fire()
            return
        owner = self._disarm(woken=True)
        if owner is None:
            return
        first, receive, since, context = self._first, self._receive, self._since, self._context
        try:
            message = first.step()
        except BaseException as failed:  # raised in the watcher's task, as if it failed there
            first = Begun.raising(failed)
        else:
            if message is not WAITING:
                owner.received(message, receive, since, context)
                return
        owner.start_watcher(receive, first, since, context)

    def time_up(self) -> None:
        """The deadline, or the first keep-alive's time (`Due`)."""
        self.fire()

    def fire(self) -> None:
        """Hand over to the watcher's task, which goes on with the `receive()` begun
        (once; on the loop)."""
        owner = self._disarm()
        if owner is not None:
            owner.start_watcher(self._receive, self._first, self._since, self._context)

    def finish(self) -> None:
        """The handler has answered and nothing else happened (in the request's task):
        the `receive()` is finished here if the server has woken it (as it does once the
        reply is complete: its message is of no interest then), else given up, as a
        cancelled task would give it up. What it raises is raised."""
        if self._disarm() is None:
            return
        first = self._first
        if first.woken and first.step() is not WAITING:
            return
        first.abandon()  # not woken, or waiting again

    def _disarm(self, *, woken: bool = False) -> TakesOver | None:
        """The callback and the deadline taken back; the owner, the first time only.
        `woken`: called from the callback, whose future has let go of it already."""
        owner, self._owner = self._owner, None
        if owner is not None:
            if not woken:
                future: asyncio.Future[Any] = self._first.pending
                future.remove_done_callback(self._woke)
            if self._timed:
                discard_deadline(self)
        return owner
