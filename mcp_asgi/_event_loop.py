"""The event loop, for every layer: which loop runs; anyio cancel scopes made cheaply on
asyncio; native cancellation for the waits that almost never end early.

`anyio.CancelScope()` asks sniffio which event loop runs and then the backend for its
scope class: about 3 µs, a third of a request's scope. On asyncio, `new_cancel_scope`
looks the class up once and calls it; anywhere else it is `anyio.CancelScope()`.

Where a whole cancel scope is too dear for a wait that almost never ends early (the body
read's time limit, the watcher's waits, a cancel's grace period), `Interruptible` ends it
with the task's own cancellation, taken back (`uncancel`) once it has done its work
(Python 3.11+; a cancel scope elsewhere). `within` is its time limit alone.

`Line`: places taken first come, first served, for the reply's write lock and the worker
threads' slots.
"""

from __future__ import annotations

import asyncio
import math
import sys
from collections import deque
from collections.abc import Awaitable, Callable
from typing import TypeVar

import anyio

T = TypeVar("T")

_asyncio_scope: type[anyio.CancelScope] | None = None


def on_asyncio() -> bool:
    """Whether the current task is an asyncio task (cheaper than asking anyio or sniffio;
    a trio task hosted on an asyncio loop, in guest mode, is not one)."""
    return asyncio_task() is not None


def new_cancel_scope(*, deadline: float = math.inf, shield: bool = False) -> anyio.CancelScope:
    """`anyio.CancelScope(deadline=..., shield=...)`, the same object, made for less."""
    global _asyncio_scope
    if not on_asyncio():
        return anyio.CancelScope(deadline=deadline, shield=shield)
    if _asyncio_scope is None:
        _asyncio_scope = type(anyio.CancelScope())
    return _asyncio_scope(deadline=deadline, shield=shield)


def asyncio_task() -> asyncio.Task[object] | None:
    """The running asyncio task, or None (on trio, also hosted on an asyncio loop)."""
    try:
        return asyncio.current_task()
    except RuntimeError:  # no asyncio loop is running in this thread
        return None


def native_task() -> asyncio.Task[object] | None:
    """The running asyncio task, where it can be cancelled and uncancelled (Python 3.11+);
    None on trio (or in guest mode) and on 3.10."""
    return asyncio_task() if sys.version_info >= (3, 11) else None


if sys.version_info >= (3, 11):

    def uncancel(task: asyncio.Task[object]) -> int:
        """`task.uncancel()`: the cancellation requests still pending on it."""
        return task.uncancel()

else:  # pragma: no cover - native_task() is None before 3.11

    def uncancel(task: asyncio.Task[object]) -> int:
        raise NotImplementedError


class TimedOut:
    """What `within` returns when the time ran out."""


TIMED_OUT = TimedOut()


def within(
    seconds: float, fn: Callable[..., Awaitable[T]], *args: object
) -> Awaitable[T | TimedOut]:
    """`await within(...)`: `await fn(*args)`, or `TIMED_OUT` once `seconds` have passed
    (like `move_on_after`): one loop timer on asyncio 3.11+ (`Interruptible`), an anyio
    scope elsewhere. A plain function returning the awaitable: no coroutine of its own on
    the body read of every request."""
    if seconds == math.inf:
        return fn(*args)
    task = native_task()
    if task is None:
        return _within_scope(seconds, fn, *args)
    return Interruptible().run(task, task.get_loop().time() + seconds, fn, *args)


async def _within_scope(
    seconds: float, fn: Callable[..., Awaitable[T]], *args: object
) -> T | TimedOut:
    with anyio.move_on_after(seconds):
        return await fn(*args)
    return TIMED_OUT


class Interruptible:
    """Waits of one asyncio task (3.11+, from `native_task()`), each ended early by a time or
    by `interrupt()`: the task is cancelled, and that cancellation taken back once it has
    ended the wait. A cancellation from anywhere else, also one landing with it, passes
    through; one swallowed by the awaited code is taken back all the same."""

    __slots__ = ("_interrupted", "_task")

    def __init__(self) -> None:
        self._task: asyncio.Task[object] | None = None  # the task in a wait
        self._interrupted = False  # it has been cancelled to end that wait

    async def run(
        self,
        task: asyncio.Task[object],
        until: float,
        fn: Callable[..., Awaitable[T]],
        *args: object,
    ) -> T | TimedOut:
        """`await fn(*args)` in `task` (the running one), or `TIMED_OUT` once the loop's
        clock reaches `until` or on `interrupt()`."""
        timer = task.get_loop().call_at(until, self.interrupt) if until < math.inf else None
        self._task, self._interrupted = task, False
        try:
            result = await fn(*args)
        except asyncio.CancelledError:
            if not self._interrupted or uncancel(task) > 0:
                raise  # not ours, or another cancellation came with ours
            return TIMED_OUT
        finally:
            self._task = None
            if timer is not None:
                timer.cancel()
        if self._interrupted:  # `fn` swallowed our cancellation: take it back all the same
            uncancel(task)
        return result

    def interrupt(self) -> None:
        """End the current wait, if there is one (once; on the loop)."""
        task = self._task
        if task is not None and not self._interrupted:
            self._interrupted = True
            task.cancel()


class Line:
    """`total` places taken first come, first served. Free, a place costs a count (no task
    lookup, no checkpoint); else the caller waits in line for an `anyio.Event`. A freed
    place passes straight to the first in line, so nobody jumps the queue; a wait is
    cancellable, and a place handed to a wait being cancelled passes on."""

    __slots__ = ("_in_use", "_waiters", "total")

    def __init__(self, total: int) -> None:
        self.total = total
        self._in_use = 0
        self._waiters: deque[anyio.Event] | None = None  # made on contention

    @property
    def in_use(self) -> int:
        """Places held now."""
        return self._in_use

    @property
    def waiting(self) -> int:
        """Callers waiting in line."""
        return len(self._waiters) if self._waiters else 0

    def take(self) -> bool:
        """Take a free place at once, without a turn of the event loop; False if there is
        none (then `wait_in_line`)."""
        if self._in_use < self.total:
            self._in_use += 1
            return True
        return False

    async def wait_in_line(self) -> None:
        """Wait in line for a place (cancellable); `release` hands it over."""
        turn = anyio.Event()
        if self._waiters is None:
            self._waiters = deque()
        self._waiters.append(turn)
        try:
            await turn.wait()
        except BaseException:
            if turn.is_set():  # handed a place as the wait was cancelled: pass it on
                self.release()
            else:
                self._waiters.remove(turn)
            raise

    async def __aenter__(self) -> None:
        """`async with line:` holds a place for the block (a FIFO lock with one place)."""
        if self._in_use < self.total:
            self._in_use += 1
        else:
            await self.wait_in_line()

    async def __aexit__(self, *exc_info: object) -> None:
        self.release()

    def release(self) -> None:
        """Give a place back: to the first in line, if any (it stays taken)."""
        if self._waiters:
            self._waiters.popleft().set()
        else:
            self._in_use -= 1
