"""The clock a request's times and deadlines are read on: the running event loop's.

Deadlines are absolute times on this clock, handed to anyio cancel scopes as they are. So
a test that runs the event loop on a fake clock (trio's `MockClock`, through anyio's
backend options) drives every deadline, and the times in records, without waiting.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

Clock = Callable[[], float]
"""Seconds on a monotonic clock; callable from any thread."""


def loop_clock() -> Clock:
    """The running event loop's clock (asyncio's `loop.time`, or trio's current clock)."""
    try:
        if asyncio.current_task() is not None:  # not a trio task hosted on asyncio
            return asyncio.get_running_loop().time
    except RuntimeError:  # no asyncio loop in this thread
        pass
    import trio  # anyio runs on asyncio or trio; trio is imported only when it is the loop

    return trio.lowlevel.current_clock().current_time
