"""`Line`: places taken first come, first served, for the reply's write lock and the worker
threads' slots (plain anyio).
"""

from __future__ import annotations

from collections import deque

import anyio


class Line:
    """`total` places taken first come, first served. Free, a place costs a count (no task
    lookup, no checkpoint); else the caller waits in line for an `anyio.Event`. A freed
    place passes straight to the first in line, so nobody jumps the queue; a wait is
    cancellable, and a place handed to a wait being cancelled passes on."""

    __slots__ = ("_waiters", "in_use", "total")

    def __init__(self, total: int) -> None:
        self.total = total
        self.in_use = 0
        """Places held now (read it; only the line changes it)."""
        self._waiters: deque[anyio.Event] | None = None  # made on contention

    @property
    def waiting(self) -> int:
        """Callers waiting in line."""
        return len(self._waiters) if self._waiters else 0

    def take(self) -> bool:
        """Take a free place at once, without a turn of the event loop; False if there is
        none (then `wait_in_line`)."""
        if self.in_use < self.total:
            self.in_use += 1
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
        if self.in_use < self.total:
            self.in_use += 1
        else:
            await self.wait_in_line()

    async def __aexit__(self, *exc_info: object) -> None:
        self.release()

    def release(self) -> None:
        """Give a place back: to the first in line, if any (it stays taken)."""
        if self._waiters:
            self._waiters.popleft().set()
        else:
            self.in_use -= 1
