"""Worker threads for sync (`def`) handlers: the hop to a thread and back, made cheap.

::

    event loop                          worker thread (one per call running at once)
    run_in_thread(fn) ── job ──► SimpleQueue ──► fn() in a copy of the caller's context
        await future ◄── one wake-up per batch ◄── results appended to a shared list

`anyio.to_thread.run_sync` costs ~50-70 µs of CPU per call on asyncio (a checkpoint and a
limiter's turns of the loop, a cancel scope, a `queue.Queue` with its condition variables,
one self-pipe write per result). This pool keeps what a handler's thread sees the same and
drops the rest (~5 µs a call):

- `fn` runs in a copy of the caller's context (contextvars: the request's span, ...), with
  sniffio reporting no async library, in a thread anyio knows as its own worker thread
  under the cancel scope of the call, as anyio's are: `anyio.from_thread.run`/`run_sync`
  work without a token, and `from_thread.check_cancelled` raises once the call is
  cancelled;
- an idle thread takes the next job at once (a `SimpleQueue`, in C); a new thread is
  started only when none is idle; an idle thread ends after `IDLE_SECONDS`;
- results go back to the loop in batches: the first result of a batch schedules one
  callback on the loop, later ones join it (one wake-up however many threads finish);
- cancellation abandons the call, as `abandon_on_cancel=True` does: the awaiting caller
  moves on at once; a job whose caller has gone before it started is skipped.

How many threads may run at once is the caller's business (`work.ThreadSlots`). The pool
is per event loop (an anyio `RunVar`). Only on asyncio loops (uvloop included); on any
other (trio) `anyio.to_thread.run_sync` is used as it is.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import queue
import threading
from collections.abc import Callable
from typing import Any, TypeVar

import anyio
import anyio.lowlevel
import anyio.to_thread

from mcp_asgi._event_loop import new_cancel_scope

T = TypeVar("T")
IDLE_SECONDS = 10.0  # as anyio's worker threads

_AsyncIOBackend: Any = None
try:  # what makes a thread one of anyio's worker threads (not a public API of anyio)
    from anyio._backends._asyncio import AsyncIOBackend as _AsyncIOBackend
    from anyio._core._eventloop import set_current_async_library as _set_library
    from anyio._core._eventloop import threadlocals as _anyio_threadlocals
except ImportError:  # pragma: no cover - an anyio without them: its own threads are used
    pass

_POOL: anyio.lowlevel.RunVar[_Pool | None] = anyio.lowlevel.RunVar("mcp_asgi.threads")


async def run_in_thread(fn: Callable[[], T], limiter: anyio.CapacityLimiter | None = None) -> T:
    """Run `fn` in a worker thread; on cancel, move on at once (the thread is abandoned).

    Without a `limiter` the caller has not bounded its threads: anyio's own threads run
    `fn`, under anyio's default limiter. With one, on asyncio this pool runs it (the caller
    bounds the threads; the limiter is not used); elsewhere anyio's threads, under it."""
    pool = _pool() if limiter is not None else None
    if pool is None:
        return await anyio.to_thread.run_sync(fn, abandon_on_cancel=True, limiter=limiter)
    await anyio.lowlevel.checkpoint_if_cancelled()  # a cancelled call starts no thread
    future: asyncio.Future[T] = pool.loop.create_future()
    # the scope anyio gives a thread (`from_thread.run` and `check_cancelled` use it)
    with new_cancel_scope() as scope:
        pool.submit((contextvars.copy_context(), fn, future, scope))
        return await future
    raise AssertionError("unreachable: only an outer cancellation leaves the scope")


def _pool() -> _Pool | None:
    try:
        return _POOL.get()
    except LookupError:
        pass
    pool: _Pool | None = None
    if _AsyncIOBackend is not None:
        try:
            pool = _Pool(asyncio.get_running_loop())
        except RuntimeError:  # not on an asyncio loop
            pool = None
    _POOL.set(pool)
    return pool


_Job = tuple[contextvars.Context, Callable[[], Any], "asyncio.Future[Any]", anyio.CancelScope]


class _Pool:
    """The worker threads of one event loop."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self._jobs: queue.SimpleQueue[_Job] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._idle = 0  # threads waiting for a job, not yet promised one
        self._results: list[tuple[asyncio.Future[Any], bool, Any]] = []
        self._wake_pending = False  # a `_deliver` is scheduled on the loop

    def submit(self, job: _Job) -> None:
        """On the loop: hand `job` to an idle thread, or to a new one."""
        with self._lock:
            start = self._idle == 0
            if not start:
                self._idle -= 1
        self._jobs.put(job)
        if start:
            threading.Thread(target=self._work, name="mcp_asgi worker", daemon=True).start()

    def _work(self) -> None:
        """A worker thread: run jobs until idle for `IDLE_SECONDS`."""
        token = anyio.lowlevel.EventLoopToken(_AsyncIOBackend, self.loop)
        _anyio_threadlocals.current_token = token
        while True:
            try:
                context, fn, future, scope = self._jobs.get(timeout=IDLE_SECONDS)
            except queue.Empty:
                with self._lock:
                    if self._idle:  # nobody has promised this thread a job: end it
                        self._idle -= 1
                        return
                continue  # a job was promised to an idle thread: wait for it
            if future.cancelled():  # its caller has gone: never start it
                outcome: tuple[bool, Any] = (False, None)
            else:
                _anyio_threadlocals.current_cancel_scope = scope
                try:
                    context.run(_set_library, None)
                    outcome = (True, context.run(fn))
                except BaseException as exc:  # handed to the caller, as anyio does
                    outcome = (False, exc)
                finally:
                    del _anyio_threadlocals.current_cancel_scope
            self._report(future, outcome)
            del context, fn, future, scope, outcome

    def _report(self, future: asyncio.Future[Any], outcome: tuple[bool, Any]) -> None:
        """In the thread: queue the outcome; the first of a batch wakes the loop."""
        with self._lock:
            self._results.append((future, *outcome))
            self._idle += 1
            if self._wake_pending:
                return
            self._wake_pending = True
        with contextlib.suppress(RuntimeError):  # a closed loop: nobody waits any more
            self.loop.call_soon_threadsafe(self._deliver)

    def _deliver(self) -> None:
        """On the loop: complete the futures of every result queued so far."""
        with self._lock:
            results, self._results = self._results, []
            self._wake_pending = False
        for future, ok, value in results:
            if future.cancelled():
                continue
            if ok:
                future.set_result(value)
            elif isinstance(value, StopIteration):  # a future cannot hold one
                error = RuntimeError("the function raised StopIteration")
                error.__cause__ = value
                future.set_exception(error)
            elif value is not None:
                future.set_exception(value)
