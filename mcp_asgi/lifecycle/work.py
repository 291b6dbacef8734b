"""A request's running work: its handler, the worker threads it started, and the resources
(subprocesses) it owns, none of which may outlive it unnoticed.

The request is idle only once the handler and all its threads have returned. A thread
cannot be stopped: when the handler is cancelled while awaiting one, the handler moves on at
once and the thread is abandoned. It keeps counting until it really returns, then reports
itself to the event loop (directly, if the loop is gone). Resources the handler left open
are closed when it exits.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from typing import Literal, Protocol, TypeVar

import anyio
import anyio.lowlevel

from mcp_asgi._loggers import errors_logger as _errors
from mcp_asgi.lifecycle.cancel import CancelReason, CancelToken, RequestCancelled
from mcp_asgi.lifecycle.lazy_event import LazyEvent
from mcp_asgi.lifecycle.threads import run_in_thread

T = TypeVar("T")


class Closable(Protocol):
    """Something a request owns that must not outlive its handler (e.g. a subprocess)."""

    async def aclose(self) -> None: ...


class ThreadSlots:
    """The worker threads that sync handlers of one endpoint may run at once.

    A call takes a slot before its thread starts, waiting in line (cancellable: its
    request's deadline and disconnect still apply), and the slot comes back only when the
    thread really returns: an abandoned thread keeps its slot, so "call, then hang up"
    cannot make threads faster than they finish. (anyio's own limiter is given back when a
    thread is abandoned; the one handed to it here is unbounded.)
    """

    def __init__(self, total: int) -> None:
        if total < 1:
            raise ValueError("max_threads must be at least 1")
        self.total = total
        self._slots: anyio.CapacityLimiter | None = None  # made on the event loop
        self._unbounded: anyio.CapacityLimiter | None = None

    @property
    def in_use(self) -> int:
        """Slots held now: threads running, abandoned or not, and calls starting one."""
        return 0 if self._slots is None else int(self._slots.borrowed_tokens)

    @property
    def waiting(self) -> int:
        """Calls waiting in line for a slot."""
        return 0 if self._slots is None else self._slots.statistics().tasks_waiting

    async def acquire(self, borrower: object) -> anyio.CapacityLimiter:
        """Wait for a slot (cancellable); returns the limiter to hand to `to_thread`. A
        free slot is taken without a turn of the event loop (the caller checks for a
        cancellation before it starts the thread)."""
        if self._slots is None or self._unbounded is None:
            self._slots = anyio.CapacityLimiter(self.total)
            self._unbounded = anyio.CapacityLimiter(math.inf)
        try:
            self._slots.acquire_on_behalf_of_nowait(borrower)
        except anyio.WouldBlock:
            await self._slots.acquire_on_behalf_of(borrower)
        return self._unbounded

    def release(self, borrower: object) -> None:
        """Give a slot back (on the event loop)."""
        if self._slots is not None:
            self._slots.release_on_behalf_of(borrower)


class RunningWork:
    """Counts the work still running for one request; calls `on_idle` when none is left."""

    def __init__(self, on_idle: Callable[[], None], threads: ThreadSlots | None = None) -> None:
        self.running = 1  # the handler itself
        self._threads = threads
        self._idle = LazyEvent()
        self._on_idle = on_idle
        self._owned: set[Closable] = set()

    def own(self, resource: Closable) -> None:
        """Close `resource` when the handler exits, if the handler has not closed it."""
        self._owned.add(resource)

    def disown(self, resource: Closable) -> None:
        """The handler closed `resource` itself."""
        self._owned.discard(resource)

    async def handler_exited(self) -> None:
        """The handler returned: close what it left open, then count it out (even if
        closing is interrupted)."""
        try:
            while self._owned:
                resource = self._owned.pop()
                with anyio.CancelScope(shield=True):
                    try:
                        await resource.aclose()
                    except Exception:
                        _errors.warning("closing a request's resource failed", exc_info=True)
        finally:
            self.done()

    def done(self, *, on_loop: bool = True) -> None:
        """One piece of work returned (the handler, or a thread; `on_loop=False` from a
        thread whose event loop is gone)."""
        self.running -= 1
        if self.running:
            return
        if on_loop:
            self._idle.set()
        on_idle, self._on_idle = self._on_idle, _nothing  # once; and no cycle left behind
        on_idle()

    async def wait_idle(self, grace: float) -> bool:
        """Wait up to `grace` seconds for all the work to return; True if it has.

        A cancelled async handler usually returns as soon as it runs again: one turn of the
        event loop is waited first, and only work still running then starts the timer.
        """
        if self.running:
            await anyio.lowlevel.checkpoint()
        if self.running:
            with anyio.move_on_after(grace):
                await self._idle.wait()
        return not self.running

    async def run_sync(self, fn: Callable[[], T], token: CancelToken) -> T:
        """Run `fn` in a worker thread, counted until it returns. On cancel the caller moves
        on at once: the thread is abandoned (told through `token`)."""
        loop = anyio.lowlevel.current_token()
        job = _ThreadJob()
        slots = self._threads
        limiter = await slots.acquire(job) if slots is not None else None

        def returned() -> None:  # on the loop, once the thread is over
            if slots is not None:
                slots.release(job)
            self.done()

        def work() -> T:
            if not job.begin():
                raise RequestCancelled(token.reason or CancelReason.SERVER_SHUTDOWN)
            try:
                return fn()
            finally:
                if job.end():  # abandoned while running: tell the loop it has returned
                    try:
                        loop.backend_class.run_sync_soon(returned, (), loop.native_token)
                    except RuntimeError:  # the event loop is gone
                        self.done(on_loop=False)

        self.running += 1
        try:
            result = await run_in_thread(work, limiter)
        except BaseException:
            if not job.abandon():
                returned()
            raise
        returned()
        return result


def _nothing() -> None:
    pass


class _ThreadJob:
    """Who accounts for a worker thread: the loop (it returned in time, or never started)
    or the thread itself (abandoned while running)."""

    __slots__ = ("_lock", "_state")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._state: Literal["queued", "running", "done", "abandoned"] = "queued"

    def begin(self) -> bool:
        """In the thread: False if the call was abandoned before it started."""
        with self._lock:
            if self._state == "abandoned":
                return False
            self._state = "running"
            return True

    def end(self) -> bool:
        """In the thread: True if the loop abandoned it while it ran."""
        with self._lock:
            abandoned = self._state == "abandoned"
            self._state = "done"
            return abandoned

    def abandon(self) -> bool:
        """On the loop, on cancel: True if the thread is still running (it reports itself)."""
        with self._lock:
            running = self._state == "running"
            if self._state == "queued" or running:
                self._state = "abandoned"
            return running
