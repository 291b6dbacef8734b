"""`cheap_scope()`: an anyio cancel scope for the common case of a request's handler, made,
entered, cancelled and left for less on asyncio.

It is anyio's asyncio `CancelScope` itself (a subclass with no state of its own but the
task's anyio state, kept from entering to leaving), so everything else anyio does with it
is anyio's: the handler's shields and child scopes, its task groups, a deadline. Only the
steps that almost every request takes are written out: made with no deadline and no
shield; entered by a task with no scope cancelled at the time; left with nothing
cancelled. And those of a request its client left: cancelled from outside its task while
its task alone is in it, and left with that cancellation, in a task with no scope around
it. There anyio's own steps ask for the running task (a Python function before 3.12) up to
three times, look its state up twice, check the deadline, walk the parent scopes, format
the message, and make a loop callback per scope for the delivery's retry; these do what
those steps do to the same fields, and no more, and the retries of all the scopes a turn
cancels share one callback on the next turn (`_Redeliveries`). Anything else (a scope
cancelled before it is entered or by its own task, a deadline set on it, a child scope or
task group in it, a parent scope, an exception group, an exit out of order, a task of the
same loop leaving it) goes through anyio's own steps, which also raise anyio's errors for
misuse. On an anyio whose backend these steps do not fit (`anyio_fit`), every scope is
anyio's own. (Which task leaves it is asked of the scope's own loop, not of the calling thread:
a request's handler scope is only ever left by the request's own task.)
"""

from __future__ import annotations

import asyncio
import math
import threading
import weakref
from collections.abc import Callable
from types import TracebackType

import anyio
import anyio._backends._asyncio as _backend
from anyio._backends._asyncio import CancelScope as _AsyncioScope
from anyio._backends._asyncio import TaskState, _task_states

from mcp_asgi._loop.anyio_fit import FITS
from mcp_asgi._loop.current import native_task, new_cancel_scope, running_loop, task_of

_new = object.__new__
# anyio's task states are a `WeakKeyDictionary`, whose methods are Python: its own dict is
# read and written directly, by weak references to the tasks, as those methods do. (These
# and anyio's test of a cancellation are there wherever its backend fits, `FITS`: no
# `CheapScope` is made elsewhere.)
_states: dict[weakref.ref[asyncio.Task[object]], TaskState] = getattr(_task_states, "data", {})
_forget: Callable[[weakref.ref[asyncio.Task[object]]], None] | None = getattr(
    _task_states, "_remove", None
)  # (its references' callback)
_is_anyio_cancellation: Callable[[asyncio.CancelledError], bool] = getattr(
    _backend, "is_anyio_cancellation", lambda _: False
)
_ref = weakref.ref
_Future = asyncio.Future
_ANYIO_MESSAGE = "Cancelled via cancel scope "  # what anyio's scopes recognise as theirs


class CheapScope(_AsyncioScope):
    """anyio's asyncio `CancelScope`, with no deadline and no shield; see the module."""

    __slots__ = ("_state",)

    _state: TaskState | None  # the host task's anyio state while the scope is in

    def __enter__(self) -> CheapScope:
        # the running task (`asyncio_task()`'s steps without its switch: no `CheapScope`
        # is made with the plain-anyio path on)
        task = task_of(running_loop())
        if self._cancel_called or self._active or task is None or self._deadline != math.inf:
            return super().__enter__()
        self._host_task = task
        self._tasks.add(task)
        state = _states.get(_ref(task))
        if state is None:  # `_task_states[task] = TaskState(None, self)`, written out
            state = _new(TaskState)
            state.parent_id = None
            state.cancel_scope = self
            _states[_ref(task, _forget)] = state
        else:
            parent = self._parent_scope = state.cancel_scope
            state.cancel_scope = self
            if parent is not None:
                parent._child_scopes.add(self)
                parent._tasks.discard(task)
        self._state = state
        self._active = True
        self._cancelling_at_enter = task.cancelling()  # (3.11+, as is this scope)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> bool:
        state = self._state
        task = self._host_task
        if (
            task is None
            or self._timeout_handle is not None  # (a deadline set while it was in)
            or state is None
            or state.cancel_scope is not self
            # left in the task it was entered in: that task is its loop's running one (its
            # loop asked of the task, not of the thread: no getpid() a request)
            or task_of(task.get_loop()) is not task
        ):
            self._state = None
            return super().__exit__(exc_type, exc_val, exc_tb)
        self._state = None
        if self._cancel_called or self._pending_uncancellations:
            if (
                self._cancel_called
                and self._parent_scope is None
                and (exc_val is None or isinstance(exc_val, asyncio.CancelledError))
            ):
                return self._exit_cancelled(task, state, exc_val)
            return super().__exit__(exc_type, exc_val, exc_tb)
        self._active = False
        self._tasks.remove(task)
        parent = self._parent_scope
        state.cancel_scope = parent
        if parent is not None:
            parent._child_scopes.remove(self)
            parent._tasks.add(task)
            self._restart_cancellation_in_parent()
        self._host_task = None
        return False

    def cancel(self, reason: str | None = None) -> None:
        task = self._host_task
        if (
            self._cancel_called
            or task is None  # (not entered yet, or left)
            or reason is not None  # (anyio puts it in the message)
            or self._child_scopes
            or self._timeout_handle is not None
            or len(self._tasks) != 1  # (the host task is in a child scope)
            # (anyio waits until the task next yields; `asyncio_task()`'s steps, as in
            # `__enter__`)
            or task_of(running_loop()) is task
        ):
            super().cancel(reason)
            return
        self._cancel_called = True
        # anyio's message, without the task that cancels (its `repr` costs more than the
        # rest of the cancel): anyio reads only the scope's id of it
        self._cancel_reason = f"{_ANYIO_MESSAGE}{id(self):x}"
        self._deliver_to(task)

    def _deliver_to(self, task: asyncio.Task[object]) -> None:
        """anyio's `_deliver_cancellation` for a scope its host task alone is in: the task
        cancelled unless it is done, about to be, or woken already; retried (`_Redeliveries`)
        as long as it is not done."""
        if task.done():
            return
        if not task._must_cancel:  # type: ignore[attr-defined]
            waiter = task._fut_waiter  # type: ignore[attr-defined]
            if not isinstance(waiter, _Future) or not waiter.done():
                task.cancel(self._cancel_reason)
                self._pending_uncancellations += 1  # type: ignore[assignment,operator,unused-ignore]
        _redeliveries.add(self, task)

    def _exit_cancelled(
        self, task: asyncio.Task[object], state: TaskState, exc: BaseException | None
    ) -> bool:
        """anyio's `__exit__` of a cancelled scope with no parent scope, left by its host
        task with its cancellation or nothing."""
        self._active = False
        self._tasks.remove(task)
        state.cancel_scope = None
        self._host_task = None  # (a retry pending finds the scope left)
        self._cancel_handle = None  # (and skips it: `drop_redelivery` has nothing to drop)
        while self._pending_uncancellations:
            task.uncancel()  # type: ignore[attr-defined,unused-ignore]  # (3.11+, as is this scope)
            self._pending_uncancellations -= 1  # type: ignore[assignment,operator,unused-ignore]
        if task.cancelling() > self._cancelling_at_enter:  # type: ignore[attr-defined,unused-ignore]
            return False  # a native cancel() came too: not swallowed (anyio #1214)
        if isinstance(exc, asyncio.CancelledError) and (
            # this scope's own (the message it cancelled with), else anyio's look at it
            # and at what it replaced
            (exc.args and exc.args[0] is self._cancel_reason) or _is_anyio_cancellation(exc)
        ):
            self._cancelled_caught = True
            return True
        return False


class _Batch(list["CheapScope"]):
    """The scopes whose retry one loop callback makes, and the loop (weakly: free to go)."""

    __slots__ = ("loop", "taken")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__()
        self.loop = weakref.ref(loop)
        self.taken = False  # its callback has begun: a scope cancelled now is in the next


class _Redeliveries(threading.local):
    """anyio's retry of a cancellation's delivery while the scope's task is still in it (a
    task that swallowed the cancellation gets it again at its next wait or checkpoint), for
    every scope cancelled in a turn of the loop by one callback on the next turn, where
    anyio makes one a scope. The callback is a timer due at once: asyncio's loop runs it
    after the callbacks already queued, so after the cancelled tasks have run and left
    their scopes (a burst's retries cost a look each, and none of them comes before a
    handler that is yet to stop); uvloop runs it in its turn, as a callback (the order
    anyio's own has). A task woken but not yet run then is looked at again on the
    turn after, as anyio's own retry would find it. The batch being filled is the
    thread's (a thread runs one loop at a time); a batch whose callback has begun, or of
    another loop, is never added to."""

    batch: _Batch | None = None

    def add(self, scope: CheapScope, task: asyncio.Task[object]) -> None:
        scope._cancel_handle = _PENDING  # type: ignore[assignment]  # (anyio's: a retry to come)
        batch = self.batch
        loop = task.get_loop()
        if batch is None or batch.taken or batch.loop() is not loop:
            batch = self.batch = _Batch(loop)
            loop.call_later(0, self._retry, batch)
        batch.append(scope)

    def _retry(self, batch: _Batch) -> None:
        batch.taken = True
        for scope in batch:
            task = scope._host_task
            handle: object = scope._cancel_handle
            if handle is not _PENDING or task is None:
                continue  # left, or its retry dropped
            scope._cancel_handle = None
            if scope._child_scopes or len(scope._tasks) != 1:
                scope._deliver_cancellation(scope)  # anyio's own (it retries by itself)
            else:
                scope._deliver_to(task)


class _Pending:
    """A scope's `_cancel_handle` while its retry is in a batch; dropping it
    (`drop_redelivery`) leaves the batch to skip the scope."""

    __slots__ = ()

    def cancel(self) -> None:
        pass


_PENDING = _Pending()
_redeliveries = _Redeliveries()


def _cheap(task: asyncio.Task[object] | None = None) -> anyio.CancelScope:
    """`cheap_scope` where anyio's backend fits."""
    if task is None and native_task() is None:
        return new_cancel_scope()
    scope: CheapScope = _new(CheapScope)
    scope._deadline = math.inf
    scope._shield = False
    scope._parent_scope = None
    scope._child_scopes = set()
    scope._cancel_called = False
    scope._cancel_reason = None
    scope._cancelled_caught = False
    scope._active = False
    scope._timeout_handle = None
    scope._cancel_handle = None
    scope._tasks = set()
    scope._host_task = None
    scope._cancelling_at_enter = 0
    scope._pending_uncancellations = 0  # type: ignore[assignment,unused-ignore]  # (3.11+)
    scope._state = None
    return scope


def _anyios(task: asyncio.Task[object] | None = None) -> anyio.CancelScope:
    """`cheap_scope` where anyio's backend does not fit: anyio's own scope."""
    return new_cancel_scope()


cheap_scope = _cheap if FITS else _anyios
"""`cheap_scope(task=None)`: a new cancel scope with no deadline and no shield: a
`CheapScope` on asyncio (3.11+, with an anyio whose backend fits), elsewhere the loop's
own. `task`: the running task (`native_task()`), where the caller has it; None: asked
here."""
