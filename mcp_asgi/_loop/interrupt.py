"""Waits that almost never end early, ended by the task's own cancellation: cheaper than
a cancel scope.

Where a whole cancel scope is too dear for such a wait (the body read's time limit, the
watcher's waits, a cancel's grace period), `Interruptible` ends it with the task's own
cancellation, taken back (`uncancel`) once it has done its work (asyncio, Python 3.11+).
`within` is its time limit alone, and `Waits` the watcher's waits; both use an anyio cancel
scope where there is no such task (trio, 3.10, the plain-anyio path).

The time limits of a loop's waits share one loop timer (`_Deadlines`), set for the
earliest of them: a timer of its own per wait (made, then cancelled, on the body read of
every request) costs a `TimerHandle` and a push onto the loop's heap, whose comparisons are
Python calls, and the cancelled handles stay in the heap until the loop sweeps them out.
"""

from __future__ import annotations

import asyncio
import math
import types
import weakref
from collections.abc import Awaitable, Callable, Coroutine, Generator
from typing import Any, Protocol, TypeVar

import anyio

from mcp_asgi._loop.current import native_task, new_cancel_scope, uncancel
from mcp_asgi._loop.eager import Begun, at_once, given, ready

T = TypeVar("T")


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
    return Interruptible()._wait(task, task.get_loop().time() + seconds, fn, *args)


@types.coroutine
def within_after_first_step(
    seconds: float, coro: Coroutine[Any, Any, T]
) -> Generator[Any, Any, T | TimedOut]:
    """`await within_after_first_step(seconds, coro)`: `await coro`, or `TIMED_OUT` once
    `seconds` have passed since it first waited (like `within`).

    On asyncio 3.11+ (`native_task()`) its first step is taken at once, with no limit (it
    cannot take long: it waits for nothing); only a coroutine that then waits gets one,
    `within`'s. For sends that almost always return without waiting (the 499 to a client
    that left): no timer and no coroutine of `within`'s for them. Elsewhere the limit is an
    anyio cancel scope, which the coroutine's own scopes must nest in (a scope entered in
    the first step would not): `within` from the start.
    """
    if native_task() is None:
        return (yield from within(seconds, given, coro).__await__())
    first = at_once(coro)
    if not isinstance(first, Begun):
        return first
    return (yield from within(seconds, given, first).__await__())


async def _within_scope(
    seconds: float, fn: Callable[..., Awaitable[T]], *args: object
) -> T | TimedOut:
    with anyio.move_on_after(seconds):
        return await fn(*args)
    return TIMED_OUT


class _Wait:
    """One wait at a time of one asyncio task (3.11+, from `native_task()`), ended early by
    a time or by `_end_wait()`: the task is cancelled, and that cancellation taken back
    once it has ended the wait. A cancellation from anywhere else, also one landing with
    it, passes through; one swallowed by the awaited code is taken back all the same.
    (`Interruptible` is this; `Waits` builds on it without an object of its own for it.)"""

    __slots__ = ("_ended", "_task")

    def __init__(self) -> None:
        self._task: asyncio.Task[object] | None = None  # the task in a wait
        self._ended = False  # it has been cancelled to end that wait

    async def _wait(
        self,
        task: asyncio.Task[object],
        until: float,
        fn: Callable[..., Awaitable[T]],
        *args: object,
    ) -> T | TimedOut:
        """`await fn(*args)` in `task` (the running one), or `TIMED_OUT` once the loop's
        clock reaches `until` or on `_end_wait()`."""
        deadlines = _deadlines(task.get_loop()) if until < math.inf else None
        if deadlines is not None:
            deadlines.add(self, until)
        self._task, self._ended = task, False
        try:
            result = await fn(*args)
        except asyncio.CancelledError:
            if not self._ended or uncancel(task) > 0:
                raise  # not ours, or another cancellation came with ours
            return TIMED_OUT
        finally:
            self._task = None
            if deadlines is not None:
                deadlines.discard(self)
        if self._ended:  # `fn` swallowed our cancellation: take it back all the same
            uncancel(task)
        return result

    def _end_wait(self) -> None:
        """End the current wait, if there is one (once; on the loop)."""
        task = self._task
        if task is not None and not self._ended:
            self._ended = True
            task.cancel()

    time_up = _end_wait
    """What `_Deadlines` calls at the wait's time (`Due`)."""


class Interruptible(_Wait):
    """Waits of one asyncio task (3.11+, from `native_task()`), each ended early by a time or
    by `interrupt()`: the task is cancelled, and that cancellation taken back once it has
    ended the wait. A cancellation from anywhere else, also one landing with it, passes
    through; one swallowed by the awaited code is taken back all the same."""

    __slots__ = ()

    run = _Wait._wait
    """`await run(task, until, fn, *args)`: `await fn(*args)` in `task` (the running one),
    or `TIMED_OUT` once the loop's clock reaches `until` or on `interrupt()`."""
    interrupt = _Wait._end_wait
    """End the current wait, if there is one (once; on the loop)."""


class Waits(_Wait):
    """The waits of one task, one at a time, each ended early by a time or by `interrupt()`
    (then `TIMED_OUT`; or, for a task already about to resume when interrupted, with what
    it waited for): the task's own cancellation on a native task (`_Wait`, which it
    is), an anyio cancel scope elsewhere. A cancellation that is not its own passes through
    either way. (A request's watcher is one: `lifecycle.watcher.Watcher` subclasses it, so
    a watched request has one object for all of this.)"""

    __slots__ = ("_cancel_scope", "_interrupted")

    def __init__(self) -> None:  # (every field set here: no chain of __init__ calls)
        self._task = None
        self._ended = False
        self._interrupted = False
        self._cancel_scope: anyio.CancelScope | None = None  # the wait's, off asyncio

    @property
    def interrupted(self) -> bool:
        """Whether `interrupt()` was called (every wait ends at once from then on)."""
        return self._interrupted

    def interrupt(self) -> None:
        """End the current wait, and every later one at once. Idempotent.

        A task already about to resume (what it waits for is done: a server wakes a
        pending `receive()` once the reply is complete) is not cancelled now: its wait may
        end by itself, with what it waited for; if it is still waiting on the next turn of
        the loop, it is ended then. (As anyio's delivery of a cancellation does; a
        cancellation thrown through the awaited code costs several times the turn.)"""
        self._interrupted = True
        task = self._task
        if task is not None:
            self._end_wait_of(task)
        if self._cancel_scope is not None:
            self._cancel_scope.cancel()

    def _end_wait_of(self, task: asyncio.Task[object]) -> None:
        """End `task`'s wait if it is still in it: now, or on the next turn if the task is
        about to resume (then again, until it has)."""
        if self._task is not task or self._ended:
            return
        waiter = getattr(task, "_fut_waiter", None)  # what the task awaits (asyncio's)
        if waiter is not None and waiter.done():
            _deadlines(task.get_loop()).end_later(self, task)
        else:
            self._end_wait()

    def run(
        self, until: float, fn: Callable[..., Awaitable[T]], *args: object
    ) -> Awaitable[T | TimedOut]:
        """`await waits.run(...)`: `await fn(*args)`, or `TIMED_OUT` once the loop's clock
        reaches `until` or on `interrupt()` (at once, if it came before). A plain function
        returning the awaitable, as `within`."""
        if self._interrupted:
            return ready(TIMED_OUT)
        task = native_task()
        if task is None:
            return self._run_in_scope(until, fn, *args)
        return self._wait(task, until, fn, *args)

    async def _run_in_scope(
        self, until: float, fn: Callable[..., Awaitable[T]], *args: object
    ) -> T | TimedOut:
        with new_cancel_scope(deadline=until) as scope:
            self._cancel_scope = scope
            return await fn(*args)
        return TIMED_OUT


class Due(Protocol):
    """What a loop's deadlines hold: `time_up()` is called on the loop once its time comes
    (unless discarded first)."""

    def time_up(self) -> None: ...


def add_deadline(due: Due, until: float) -> None:
    """Call `due.time_up()` once the running loop's clock reaches `until` (asyncio; one
    loop timer for every deadline of the loop)."""
    _deadlines(asyncio.get_running_loop()).add(due, until)


def discard_deadline(due: Due) -> None:
    """`due`'s time no longer counts (on the loop that `add_deadline` was called on)."""
    _deadlines(asyncio.get_running_loop()).discard(due)


class _Deadlines:
    """The time limits of one event loop's waits (`Interruptible`, `Waits`), kept by one loop timer
    set for the earliest of them: when it fires, it interrupts every wait whose time has
    come and is set again for the earliest left. A wait interrupted this way is ended as by
    a timer of its own at its time (never before it)."""

    __slots__ = ("__weakref__", "_at", "_later", "_timer", "_waits")

    def __init__(self) -> None:
        # the waits `Waits.interrupt` ends on the next turn if still in them, each with its
        # task: one callback of the loop's for all those of a turn (`loop.call_soon` is
        # Python code: dearer, per request, than the rest of the stop)
        self._later: list[tuple[Waits, asyncio.Task[object]]] | None = None
        self._waits: dict[Due, float] = {}  # each running wait (or other `Due`), until when
        # the pending timer, weakly: it holds its loop, which must stay free to go
        self._timer: weakref.ref[asyncio.TimerHandle] | None = None
        self._at = math.inf  # when the timer fires

    def add(self, wait: Due, until: float) -> None:
        """Interrupt `wait` once the loop's clock reaches `until` (unless discarded)."""
        self._waits[wait] = until
        if until < self._at:
            self._set(asyncio.get_running_loop(), until)

    def discard(self, wait: Due) -> None:
        """`wait` is over: its time limit no longer counts (the timer may then fire for
        nothing, and is set again for the next)."""
        self._waits.pop(wait, None)

    def end_later(self, wait: Waits, task: asyncio.Task[object]) -> None:
        """On the loop's next turn, end `task`'s wait in `wait` if it is still in it."""
        later = self._later
        if later is None:
            later = self._later = []
            task.get_loop().call_soon(self._end_later)
        later.append((wait, task))

    def _end_later(self) -> None:
        """The next turn after `end_later`: end the waits still waited in (a task woken
        after this callback was scheduled has not resumed yet: on the turn after)."""
        later, self._later = self._later, None
        for wait, task in later or ():  # `wait._end_wait_of(task)`, inline (most: returned)
            if wait._task is task and not wait._ended:
                waiter = getattr(task, "_fut_waiter", None)
                if waiter is not None and waiter.done():
                    self.end_later(wait, task)
                else:
                    wait._end_wait()

    def _set(self, loop: asyncio.AbstractEventLoop, at: float) -> None:
        pending = self._timer() if self._timer is not None else None
        if pending is not None:
            pending.cancel()
        self._timer = weakref.ref(loop.call_at(at, self._fire))
        self._at = at

    def _fire(self) -> None:
        """On the loop, at the earliest time limit: interrupt the waits whose time has
        come; set the timer for the earliest of the others."""
        self._timer, self._at = None, math.inf
        loop = asyncio.get_running_loop()
        now = loop.time()
        due = [wait for wait, until in self._waits.items() if until <= now]
        for wait in due:
            del self._waits[wait]
            wait.time_up()  # that wait only (a Waits is not stopped by its time)
        if self._waits:  # a timer may fire a hair early (the loop's clock resolution)
            self._set(loop, min(self._waits.values()))


_by_loop: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Deadlines] = (
    weakref.WeakKeyDictionary()
)
_last: tuple[weakref.ref[asyncio.AbstractEventLoop], _Deadlines] | None = None
"""The loop last asked about and its deadlines (one tuple: read at once from any thread)."""


def _deadlines(loop: asyncio.AbstractEventLoop) -> _Deadlines:
    """The deadlines of `loop` (made at its first wait with a time limit)."""
    global _last
    last = _last
    if last is not None and last[0]() is loop:
        return last[1]
    deadlines = _by_loop.get(loop)
    if deadlines is None:
        deadlines = _by_loop[loop] = _Deadlines()
    _last = (weakref.ref(loop), deadlines)
    return deadlines
