"""A request's running work: its handler, the worker threads it started, and the resources
(subprocesses) it owns, none of which may outlive it unnoticed.

The request is idle only once the handler and all its threads have returned. A thread
cannot be stopped: when the handler is cancelled while awaiting one, the handler moves on at
once and the thread is abandoned. It keeps counting until it really returns, then reports
itself to the event loop (directly, if the loop is gone). Resources the handler left open
are closed when it exits.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Protocol, TypeVar

import anyio
import anyio.lowlevel

from mcp_asgi._loggers import errors_logger as _errors
from mcp_asgi._loop import Line, checkpoint, run_in_thread, within
from mcp_asgi.lifecycle.lazy_event import LazyEvent

T = TypeVar("T")


class Closable(Protocol):
    """Something a request owns that must not outlive its handler (e.g. a subprocess)."""

    async def aclose(self) -> None: ...


class ThreadSlots(Line):
    """The worker threads that sync handlers of one endpoint may run at once.

    A call takes a slot before its thread starts (`take`, else `wait_in_line`: first come,
    first served; cancellable, so its request's deadline and disconnect still apply), and
    the slot comes back only when the thread really returns (`release`): an abandoned
    thread keeps its slot, so "call, then hang up" cannot make threads faster than they
    finish.
    """

    __slots__ = ()

    def __init__(self, total: int) -> None:
        if total < 1:
            raise ValueError("max_threads must be at least 1")
        super().__init__(total)


class Owner(Protocol):
    """Who is told once the work is idle (a request scope: `work_returned`)."""

    def work_returned(self) -> None: ...


class RunningWork:
    """Counts the work still running for one request; tells its owner (`work_returned`)
    once when none is left.

    What most requests never need (the set of owned resources, the event waited for in the
    grace period) is made when first needed: fewer objects per request in flight."""

    __slots__ = ("_idle", "_owned", "_owner", "_threads", "running")

    def __init__(
        self, owner: Owner | None, threads: ThreadSlots | None = None, running: int = 1
    ) -> None:
        """`running`: 1, the handler itself, counted until `handler_returned`; 0 for work
        counted from after the handler returned (no owner is told then)."""
        self.running = running
        self._threads = threads
        self._idle: LazyEvent | None = None  # made by the first wait_idle that waits
        self._owner = owner  # (itself, not a bound method made per request)
        self._owned: set[Closable] | None = None  # made by the first own()

    def own(self, resource: Closable) -> None:
        """Close `resource` when the handler exits, if the handler has not closed it."""
        if self._owned is None:
            self._owned = set()
        self._owned.add(resource)

    def disown(self, resource: Closable) -> None:
        """The handler closed `resource` itself."""
        if self._owned is not None:
            self._owned.discard(resource)

    def handler_returned(self) -> bool:
        """The handler returned: count it out at once if it left nothing open (True);
        else False, and `await handler_exited()` closes what it left and counts it out."""
        if self._owned:
            return False
        self.done()
        return True

    async def handler_exited(self) -> None:
        """The handler returned: close what it left open, then count it out (even if
        closing is interrupted)."""
        try:
            owned = self._owned
            while owned:
                resource = owned.pop()
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
        if on_loop and self._idle is not None:
            self._idle.set()
        owner, self._owner = self._owner, None  # once; and no cycle left behind
        if owner is not None:
            owner.work_returned()

    async def wait_idle(self, grace: float, *, turned: bool = False) -> bool:
        """Wait up to `grace` seconds for all the work to return; True if it has.

        A cancelled async handler usually returns as soon as it runs again: one turn of the
        event loop is waited first (unless the caller has, `turned`), and only work still
        running then starts the timer.
        """
        if self.running and not turned:
            await checkpoint()
        if self.running:  # one loop timer (anyio's scope off asyncio): on every cancel
            if self._idle is None:
                self._idle = LazyEvent()
            await within(grace, self._idle.wait)
        return not self.running

    def run_sync(self, fn: Callable[..., T], kwargs: dict[str, Any] | None = None) -> Awaitable[T]:
        """`await work.run_sync(fn)`: run `fn(**kwargs)` in a worker thread, counted until
        it returns.
        On cancel the caller moves on at once: the thread is abandoned (`fn` learns it
        through the request's token). A plain function returning the awaitable (no
        coroutine of its own on every call): call it only to await it at once."""
        slots = self._threads
        if slots is not None and not slots.take():
            return self._run_in_line(fn, kwargs, slots)
        self.running += 1
        return run_in_thread(fn, self._thread_over, bounded=slots is not None, kwargs=kwargs)

    async def _run_in_line(
        self, fn: Callable[..., T], kwargs: dict[str, Any] | None, slots: ThreadSlots
    ) -> T:
        """`run_sync` once every thread is taken: wait for a slot first."""
        await slots.wait_in_line()
        self.running += 1
        return await run_in_thread(fn, self._thread_over, bounded=True, kwargs=kwargs)

    def _thread_over(self, on_loop: bool) -> None:
        """A thread returned, or never started (`on_loop=False`: from the thread, its event
        loop gone): its slot comes back and it is counted out."""
        if on_loop and self._threads is not None:
            self._threads.release()
        self.done(on_loop=on_loop)
