"""`cheap_scope()`: an anyio cancel scope for the common case of a request's handler, made,
entered and left for less on asyncio.

It is anyio's asyncio `CancelScope` itself (a subclass with no state of its own but the
task's anyio state, kept from entering to leaving), so everything else anyio does with it
is anyio's: a cancellation's delivery, the handler's shields and child scopes, `cancel()`
from anywhere. Only three steps are written out for the case that almost every request
takes: made with no deadline and no shield; entered by a task with no scope cancelled at
the time; left with nothing cancelled. There anyio's own steps ask for the running task
(a Python function before 3.12) twice, look its state up twice, check the deadline, and
check its arguments and every parent scope's; these do what those steps do to the same
fields, and no more. Anything else (a scope cancelled before it is entered or while it is
in, a deadline set on it, a cancellation still to take back, an exit out of order) goes
through anyio's own `__enter__` and `__exit__`, which also raise anyio's errors for misuse.
"""

from __future__ import annotations

import math
from types import TracebackType

import anyio
from anyio._backends._asyncio import CancelScope as _AsyncioScope
from anyio._backends._asyncio import TaskState, _task_states

from mcp_asgi._loop.current import asyncio_task, cancelling, native_task, new_cancel_scope

_new = object.__new__
_get_state = _task_states.get


class CheapScope(_AsyncioScope):
    """anyio's asyncio `CancelScope`, with no deadline and no shield; see the module."""

    __slots__ = ("_state",)

    _state: TaskState | None  # the host task's anyio state while the scope is in

    def __enter__(self) -> CheapScope:
        task = asyncio_task()
        if self._cancel_called or self._active or task is None or self._deadline != math.inf:
            return super().__enter__()
        self._host_task = task
        self._tasks.add(task)
        state = _get_state(task)
        if state is None:
            state = _task_states[task] = TaskState(None, self)
        else:
            parent = self._parent_scope = state.cancel_scope
            state.cancel_scope = self
            if parent is not None:
                parent._child_scopes.add(self)
                parent._tasks.discard(task)
        self._state = state
        self._active = True
        self._cancelling_at_enter = cancelling(task)
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
            or self._cancel_called
            or self._pending_uncancellations
            or self._timeout_handle is not None  # (a deadline set while it was in)
            or state is None
            or state.cancel_scope is not self
            or asyncio_task() is not task
        ):
            self._state = None
            return super().__exit__(exc_type, exc_val, exc_tb)
        self._state = None
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


def cheap_scope() -> anyio.CancelScope:
    """A new cancel scope with no deadline and no shield: a `CheapScope` on asyncio
    (3.11+), elsewhere the loop's own."""
    if native_task() is None:
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
