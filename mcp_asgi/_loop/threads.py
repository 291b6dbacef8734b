"""Worker threads for sync (`def`) handlers: the hop to a thread and back, made cheap.

::

    event loop                          worker thread (one per call running at once)
    run_in_thread(fn) ── job ──► SimpleQueue ──► fn() in a copy of the caller's context
        await future ◄── one wake-up per batch ◄── results appended to a shared list

`anyio.to_thread.run_sync` costs ~50-70 µs of CPU per call on asyncio (a checkpoint and a
limiter's turns of the loop, a cancel scope, a `queue.Queue` with its condition variables,
one self-pipe write per result). This pool keeps what a handler's thread sees the same and
drops the rest:

- `fn` runs in a copy of the caller's context (contextvars: the request's span, ...), with
  sniffio reporting no async library, in a thread anyio knows as its own worker thread,
  under a cancel scope of its own inside the caller's while the caller waits, as anyio's
  are: `anyio.from_thread.run`/`run_sync` work without a token, the tasks of
  `from_thread.run` are cancelled with the caller, and `from_thread.check_cancelled`
  raises once the call is cancelled. That scope is not entered (the caller's task stays in
  its own scope; entering and leaving one is dearer than the rest of the hop): it is put
  among the caller's scope's children for the call, and the pool keeps it for the next
  call once the thread has returned;
- an idle thread takes the next job at once (a `SimpleQueue`, in C); a new thread is
  started only when none is idle; an idle thread ends after `IDLE_SECONDS`;
- results go back to the loop in batches: the first result of a batch schedules one
  callback on the loop, later ones join it (one wake-up however many threads finish);
- cancellation abandons the call, as `abandon_on_cancel=True` does: the awaiting caller
  moves on at once; a call cancelled before its thread started never runs.

Who counts threads learns when each one is over through `over(on_loop)`, called once: on
the loop as the call returns, fails or is cancelled before its thread started; for a thread
abandoned while it ran, once it really returns (on the loop, or in the thread with
`on_loop=False` if the loop is gone by then). Who reports is settled by a claim of two
turns (`_claims`: a `bytearray` whose `pop()`, one C call under the GIL, takes them in
order; not a lock pair: two objects the garbage collector tracks, per call): the thread
takes a turn as it starts and one as it returns, a call ending by an exception takes one.
The thread runs only if it took the first turn; a call ending by an exception reports now
if it took the first (the thread never starts) or found none left (the thread has
returned), else the thread reports when it returns.

How many threads may run at once is the caller's business (`lifecycle.work.ThreadSlots`): a
call it has bounded (`bounded=True`) runs in this pool, on asyncio loops (uvloop included);
any other (on trio, unbounded, or with the plain-anyio path forced) in anyio's own threads,
under anyio's default limiter if unbounded.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import math
import queue
import threading
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any, TypeVar, cast

import anyio
import anyio.lowlevel
import anyio.to_thread

from mcp_asgi._loop.current import asyncio_task

T = TypeVar("T")
_Future = asyncio.Future
IDLE_SECONDS = 10.0  # as anyio's worker threads

_AsyncIOBackend: Any = None
_AsyncIOCancelScope: Any = None
_library_cvar: contextvars.ContextVar[str | None] | None = None
try:  # what makes a thread one of anyio's worker threads (not a public API of anyio)
    from anyio._backends._asyncio import AsyncIOBackend as _AsyncIOBackend
    from anyio._backends._asyncio import CancelScope as _AsyncIOCancelScope
    from anyio._backends._asyncio import _task_states
    from anyio._core._eventloop import threadlocals as _anyio_threadlocals
except ImportError:  # pragma: no cover - an anyio without them: its own threads are used
    pass
with contextlib.suppress(ImportError):  # anyio sets it to None in its threads, if installed
    from sniffio import current_async_library_cvar as _library_cvar

_POOL: anyio.lowlevel.RunVar[_Pool] = anyio.lowlevel.RunVar("mcp_asgi.threads")
_last_pool: _Pool | None = None  # the pool used last: found without asking anyio
_UNBOUNDED: anyio.lowlevel.RunVar[anyio.CapacityLimiter] = anyio.lowlevel.RunVar(
    "mcp_asgi.threads.unbounded"
)


def _ignore(on_loop: bool) -> None:
    pass


def run_in_thread(
    fn: Callable[..., T],
    over: Callable[[bool], object] = _ignore,
    *,
    bounded: bool = False,
    kwargs: dict[str, Any] | None = None,
) -> Awaitable[T]:
    """`await run_in_thread(fn)`: run `fn(**kwargs)` in a worker thread; on cancel, move
    on at once (the thread is abandoned). A plain function returning the awaitable (one
    coroutine frame less on every call); call it only to await it at once. (`kwargs`
    spares the caller a `partial` that would live as long as the call.)

    `over(on_loop)` is called once the thread is over (see the module's docstring). With
    `bounded` the caller bounds its threads: this pool runs `fn` on asyncio, anyio's
    threads under no limiter elsewhere; without it anyio's threads, under anyio's default
    limiter."""
    task = asyncio_task() if bounded and _AsyncIOBackend is not None else None
    if task is None:
        return _in_anyio_thread(partial(fn, **kwargs) if kwargs else fn, over, bounded)
    loop = task.get_loop()
    pool = _last_pool
    if pool is None or pool.loop is not loop:
        pool = _pool(loop)
    state = _task_states.get(task)
    return _hop(loop, pool, fn, kwargs, over, state.cancel_scope if state is not None else None)


async def _hop(
    loop: asyncio.AbstractEventLoop,
    pool: _Pool,
    fn: Callable[..., T],
    kwargs: dict[str, Any] | None,
    over: Callable[[bool], object],
    parent: Any,
) -> T:
    """Hand `fn(**kwargs)` to the pool's threads and wait for its outcome; `parent` is the caller's
    current anyio cancel scope (None: in none). The scopes here are those of anyio's
    asyncio backend, whose private attributes are used: typed `Any`."""
    claims = _claims()
    # the scope anyio gives a thread (`from_thread.run` puts its tasks in it,
    # `from_thread.check_cancelled` looks at it and its parents): a child of the caller's
    # while the caller waits, as if entered for the call, without entering it (which costs
    # more than the rest of the hop): the caller's task stays in the caller's scope
    scopes = pool.scopes
    scope: Any = scopes.pop() if scopes else _AsyncIOCancelScope()
    if parent is not None:
        scope._parent_scope = parent
        parent._child_scopes.add(scope)
    try:
        # a cancelled call starts no thread (anyio's checkpoint_if_cancelled, if so)
        visible = parent  # (its attributes, not `cancel_called` and `shield`: properties)
        while visible is not None:
            if visible._cancel_called:
                await _AsyncIOBackend.checkpoint_if_cancelled()
                break
            if visible._shield:
                break
            visible = visible._parent_scope
        future: asyncio.Future[T] = _Future(loop=loop)  # `loop.create_future()`, no call
        context = contextvars.copy_context()
        if _library_cvar is not None and _library_cvar.get(None) is not None:
            context.run(_library_cvar.set, None)  # (unset, as under uvicorn: nothing to do)
        pool.submit((context, fn, kwargs, future, scope, claims, over))
        result = await future
    except BaseException:
        _settle(claims, over)
        raise
    finally:
        if parent is not None:  # the caller moves on: later tasks of the thread's are its own
            parent._child_scopes.discard(scope)
    over(True)
    # the thread has returned, and with it every task it ran through `from_thread.run`:
    # nothing refers to its scope any more, the next call's thread may have it
    if not scope._tasks and not scope._child_scopes and not scope._cancel_called:
        scope._parent_scope = None
        scopes.append(scope)
    return result


_FIRST = 1  # the first turn of a call's claims (`pop()` takes the last byte first)


def _claims() -> bytearray:
    """A call's two turns: whoever takes the first decides whether its thread runs."""
    return bytearray(b"\x00\x01")


def _take(claims: bytearray) -> int | None:
    """Take the next turn (atomic: `bytearray.pop` is one C call under the GIL): `_FIRST`,
    the second, or None when both are taken."""
    try:
        return claims.pop()
    except IndexError:
        return None


def _settle(claims: bytearray, over: Callable[[bool], object]) -> None:
    """On the loop, as a call ends by an exception (its own, or a cancel): report the
    thread over now, unless it is still running (then it reports itself when it returns)."""
    turn = _take(claims)
    if turn == _FIRST or turn is None:
        over(True)  # never started (and never will), or already returned


async def _in_anyio_thread(fn: Callable[[], T], over: Callable[[bool], object], bounded: bool) -> T:
    """`run_in_thread` in one of anyio's threads (not on asyncio, or not bounded)."""
    token = anyio.lowlevel.current_token()
    claims = _claims()

    def claimed() -> T | None:
        if _take(claims) != _FIRST:
            return None  # abandoned before it started: never run
        try:
            return fn()
        finally:
            if _take(claims) is None:  # abandoned while it ran: report its return
                try:
                    token.backend_class.run_sync_soon(over, (True,), token.native_token)
                except RuntimeError:  # the event loop is gone
                    over(False)

    limiter = _unbounded() if bounded else None
    try:
        result = await anyio.to_thread.run_sync(claimed, abandon_on_cancel=True, limiter=limiter)
    except BaseException:
        _settle(claims, over)
        raise
    over(True)
    return cast(T, result)  # None only for a call never started, which nobody awaits


def _unbounded() -> anyio.CapacityLimiter:
    try:
        return _UNBOUNDED.get()
    except LookupError:
        limiter = anyio.CapacityLimiter(math.inf)
        _UNBOUNDED.set(limiter)
        return limiter


def _pool(loop: asyncio.AbstractEventLoop) -> _Pool:
    """The pool of the running loop (an asyncio one)."""
    global _last_pool
    try:
        pool = _POOL.get()
    except LookupError:
        pool = _Pool(loop)
        _POOL.set(pool)
    _last_pool = pool
    return pool


_Job = tuple[
    contextvars.Context,
    Callable[..., Any],
    "dict[str, Any] | None",
    "asyncio.Future[Any]",
    Any,  # the thread's cancel scope (anyio's asyncio backend's)
    bytearray,
    Callable[[bool], object],
]


class _Pool:
    """The worker threads of one event loop."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self._jobs: queue.SimpleQueue[_Job] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._idle = 0  # threads waiting for a job, not yet promised one
        self._results: list[tuple[asyncio.Future[Any], bool, Any]] = []
        self._wake_pending = False  # a `_deliver` is scheduled on the loop
        # the threads' cancel scopes of calls that returned, for the next calls (on the loop)
        self.scopes: list[Any] = []

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
                context, fn, kwargs, future, scope, claims, over = self._jobs.get(
                    timeout=IDLE_SECONDS
                )
            except queue.Empty:
                with self._lock:
                    if self._idle:  # nobody has promised this thread a job: end it
                        self._idle -= 1
                        return
                continue  # a job was promised to an idle thread: wait for it
            ok, value = False, None
            # a call abandoned before its thread started is never run
            if not future.cancelled() and _take(claims) == _FIRST:
                _anyio_threadlocals.current_cancel_scope = scope
                try:
                    ok, value = True, context.run(fn, **kwargs) if kwargs else context.run(fn)
                except BaseException as exc:  # handed to the caller, as anyio does
                    value = exc
                del _anyio_threadlocals.current_cancel_scope
                if _take(claims) is None:  # abandoned while it ran: report its return
                    self._returned_late(over)
            with self._lock:  # queue the outcome; the first of a batch wakes the loop
                self._results.append((future, ok, value))
                self._idle += 1
                wake, self._wake_pending = not self._wake_pending, True
            del context, fn, kwargs, future, scope, claims, over, value
            if wake:
                with contextlib.suppress(RuntimeError):  # a closed loop: nobody waits
                    self.loop.call_soon_threadsafe(self._deliver)

    def _returned_late(self, over: Callable[[bool], object]) -> None:
        try:
            self.loop.call_soon_threadsafe(over, True)
        except RuntimeError:  # the event loop is gone
            over(False)

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
