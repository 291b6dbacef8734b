"""The clock a request's times and deadlines are read on: the running event loop's (asked
of asyncio or trio directly: anyio's `current_time` cannot be called from a thread).

Deadlines are absolute times on this clock, handed to anyio cancel scopes as they are. So
a test that runs the event loop on a fake clock (trio's `MockClock`, through anyio's
backend options) drives every deadline, and the times in records, without waiting.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from mcp_asgi._loop import switch

Clock = Callable[[], float]
"""Seconds on a monotonic clock; callable from any thread."""

_ASYNCIO_TIME = asyncio.BaseEventLoop.time  # time.monotonic()


def loop_clock() -> Clock:
    """The running event loop's clock (asyncio's `loop.time`, or trio's current clock).

    On asyncio's own loops that is `time.monotonic`, returned directly (it is called on
    every request), unless the plain-anyio path is forced.
    """
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:  # no asyncio loop in this thread: trio
        return _trio_clock()
    if asyncio.current_task(loop) is None:  # a trio task hosted on asyncio (guest mode)
        return _trio_clock()
    if type(loop).time is _ASYNCIO_TIME and not switch._plain:
        return time.monotonic
    return loop.time


def task_clock(task: asyncio.Task[object] | None) -> Clock:
    """The clock of the loop `task` runs on, asked of the task (a request's own task, as
    `native_task()` or `asyncio_task()` gave it: no second look-up of the running loop);
    without one (trio, the plain-anyio path, Python 3.10), `loop_clock()`."""
    if task is None:
        return loop_clock()
    loop = task.get_loop()
    return time.monotonic if type(loop).time is _ASYNCIO_TIME else loop.time


def _trio_clock() -> Clock:
    import trio  # anyio runs on asyncio or trio; trio is imported only when it is the loop

    return trio.lowlevel.current_clock().current_time
