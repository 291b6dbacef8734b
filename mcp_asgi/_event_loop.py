"""The event loop, for every layer: which loop runs; anyio cancel scopes made cheaply on
asyncio; native cancellation for the waits that almost never end early.

`anyio.CancelScope()` asks sniffio which event loop runs and then the backend for its
scope class: about 3 µs, a third of a request's scope. On asyncio, `new_cancel_scope`
looks the class up once and calls it; anywhere else it is `anyio.CancelScope()`.

Where a whole cancel scope is too dear for a wait that almost never ends early (the body
read's time limit, the watcher's waits), `native_task()` gives the asyncio task to cancel
directly, and `uncancel` takes that cancellation back once it has done its work (Python
3.11+; None, and a cancel scope, elsewhere).
"""

from __future__ import annotations

import asyncio
import math
import sys
from collections.abc import Awaitable, Callable
from typing import TypeVar

import anyio

T = TypeVar("T")

_asyncio_scope: type[anyio.CancelScope] | None = None


def on_asyncio() -> bool:
    """Whether the current task is an asyncio task (cheaper than asking anyio or sniffio;
    a trio task hosted on an asyncio loop, in guest mode, is not one)."""
    try:
        return asyncio.current_task() is not None
    except RuntimeError:  # no asyncio loop is running in this thread
        return False


def new_cancel_scope(*, deadline: float = math.inf, shield: bool = False) -> anyio.CancelScope:
    """`anyio.CancelScope(deadline=..., shield=...)`, the same object, made for less."""
    global _asyncio_scope
    if not on_asyncio():
        return anyio.CancelScope(deadline=deadline, shield=shield)
    if _asyncio_scope is None:
        _asyncio_scope = type(anyio.CancelScope())
    return _asyncio_scope(deadline=deadline, shield=shield)


def native_task() -> asyncio.Task[object] | None:
    """The running asyncio task, where it can be cancelled and uncancelled (Python 3.11+);
    None on trio (or in guest mode) and on 3.10."""
    if sys.version_info < (3, 11):
        return None
    try:
        return asyncio.current_task()
    except RuntimeError:  # no asyncio loop in this thread: trio
        return None


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


async def within(seconds: float, fn: Callable[..., Awaitable[T]], *args: object) -> T | TimedOut:
    """`await fn(*args)`, or `TIMED_OUT` once `seconds` have passed (like `move_on_after`).

    On asyncio 3.11+ the limit is one loop timer that cancels the task, and that
    cancellation is taken back (`uncancel`) once it has ended the wait; a cancellation from
    anywhere else, also one landing with it, passes through. Elsewhere an anyio scope."""
    if seconds == math.inf:
        return await fn(*args)
    task = native_task()
    if task is None:
        with anyio.move_on_after(seconds):
            return await fn(*args)
        return TIMED_OUT
    fired = False

    def expire() -> None:
        nonlocal fired
        fired = True
        task.cancel()

    loop = asyncio.get_running_loop()
    timer = loop.call_at(loop.time() + seconds, expire)
    try:
        return await fn(*args)
    except asyncio.CancelledError:
        if not fired or uncancel(task) > 0:
            raise  # not ours, or another cancellation came with ours
        return TIMED_OUT
    finally:
        timer.cancel()
