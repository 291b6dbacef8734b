"""The running task, as the fast paths see it: an asyncio task (which they may use), or
None (trio, a trio task hosted on asyncio in guest mode, or the plain-anyio switch on); and
anyio cancel scopes made without anyio's backend lookup.

`anyio.CancelScope()` asks sniffio which event loop runs and then the backend for its
scope class. On asyncio, `new_cancel_scope` looks the class up once and calls it; anywhere
else it is `anyio.CancelScope()`.
"""

from __future__ import annotations

import asyncio
import math
import sys
from asyncio.tasks import _enter_task, _leave_task

import anyio
from anyio._backends._asyncio import _task_states  # the scopes each task is in

from mcp_asgi._loop import switch

_asyncio_scope: type[anyio.CancelScope] | None = None


# The running loop (None without one) and a loop's running task, asked with no Python
# frame: asyncio.current_task() is a Python function before 3.12, which asks for the
# running loop (raising without one) and then reads this dict; here it is read directly.
running_loop = asyncio._get_running_loop
if sys.version_info >= (3, 12):
    task_of = asyncio.current_task  # a C function since 3.12 (given the loop)
else:
    from asyncio.tasks import _current_tasks  # type: ignore[attr-defined]

    task_of = _current_tasks.get


def asyncio_task() -> asyncio.Task[object] | None:
    """The running asyncio task, or None (on trio, also hosted on an asyncio loop; or
    with the plain-anyio path forced)."""
    if switch._plain:
        return None
    loop = running_loop()
    return None if loop is None else task_of(loop)


def on_asyncio() -> bool:
    """Whether the fast paths for asyncio apply to the current task (cheaper than asking
    anyio or sniffio)."""
    return asyncio_task() is not None


if sys.version_info >= (3, 11):
    native_task = asyncio_task
    """The running asyncio task, where it can be cancelled and uncancelled (Python 3.11+);
    None where `asyncio_task()` is, and on 3.10."""

else:  # pragma: no cover - no uncancel() before 3.11

    def native_task() -> asyncio.Task[object] | None:
        return None


if sys.version_info >= (3, 11):

    def uncancel(task: asyncio.Task[object]) -> int:
        """`task.uncancel()`: the cancellation requests still pending on it."""
        return task.uncancel()

    def cancelling(task: asyncio.Task[object]) -> int:
        """`task.cancelling()`: the cancellation requests pending on it (each taken back by
        whoever consumes it: anyio's scopes, `asyncio.timeout`, a `TaskGroup`)."""
        return task.cancelling()

else:  # pragma: no cover - native_task() is None before 3.11

    def uncancel(task: asyncio.Task[object]) -> int:
        raise NotImplementedError

    def cancelling(task: asyncio.Task[object]) -> int:
        raise NotImplementedError


def entered_cancelling(scope: anyio.CancelScope) -> int:
    """The count of cancellations pending on its task when `scope` was entered (anyio's
    asyncio scope keeps it, on 3.11+; 0 elsewhere)."""
    count: int = getattr(scope, "_cancelling_at_enter", 0)
    return count


def new_cancel_scope(*, deadline: float = math.inf, shield: bool = False) -> anyio.CancelScope:
    """`anyio.CancelScope(deadline=..., shield=...)`, the same object, made for less."""
    global _asyncio_scope
    if not on_asyncio():
        return anyio.CancelScope(deadline=deadline, shield=shield)
    if _asyncio_scope is None:
        _asyncio_scope = type(anyio.CancelScope())
    return _asyncio_scope(deadline=deadline, shield=shield)


def cancel_from_outside(scope: anyio.CancelScope) -> None:
    """`scope.cancel()`, called from a task that runs nothing inside `scope` (a request's
    watcher cancelling its handler's scope, entered in another task).

    On asyncio the running task is out of sight for the call (asyncio's own
    `_leave_task`, then `_enter_task`): anyio 4.16 names the task that cancels in the
    cancellation's message, formatting its `repr` (the coroutine, its location, the
    callbacks: ~40,000 instructions, more than the rest of the cancel); the message then
    names only the scope, which is all anyio reads of it (`is_anyio_cancellation`). The
    delivery is anyio's own, unchanged: only the tasks inside `scope` are cancelled, and a
    shielded scope in them is respected. The caller must not be one of those tasks: for
    the running task anyio waits until it next yields, which a hidden task would not.
    """
    task = asyncio_task()
    if task is None:
        scope.cancel()
        return
    loop = task.get_loop()
    _leave_task(loop, task)
    try:
        scope.cancel()
    finally:
        _enter_task(loop, task)


def sent_from_within(scope: anyio.CancelScope, cancelled: BaseException) -> bool:
    """Whether `cancelled`, a cancellation thrown into the running asyncio task, is anyio's
    delivery for `scope` or for a scope the task entered inside it (a task group's, a
    `move_on_after`): anyio names the scope that cancels in the message
    (`is_anyio_cancellation`). False for any other: the task's own `cancel()` called by
    somebody else (an ASGI server's), or a scope outside `scope`."""
    message = cancelled.args[0] if cancelled.args else None
    if not isinstance(message, str) or not message.startswith(_ANYIO_CANCEL):
        return False
    task = asyncio_task()
    state = _task_states.get(task) if task is not None else None
    inner = state.cancel_scope if state is not None else None
    try:  # "Cancelled via cancel scope 7f3a… [by <task>][; reason: …]"
        named = int(message[len(_ANYIO_CANCEL) :].split(" ", 1)[0].rstrip(";"), 16)
    except ValueError:
        return False
    while inner is not None:
        if id(inner) == named:
            return True
        if inner is scope:
            return False
        inner = inner._parent_scope
    return False


_ANYIO_CANCEL = "Cancelled via cancel scope "


def drop_redelivery(scope: anyio.CancelScope) -> None:
    """Once a cancelled `scope` has been left: drop anyio's pending re-delivery of its
    cancellation. anyio 4 on asyncio retries the delivery on the next turn of the loop as
    long as a task was in the scope when it was cancelled (so that a task that swallowed
    the cancellation gets it again at its next wait); once the scope is left no task is in
    it (its child scopes were left before it), and the retry would find nothing to do. A
    no-op where there is no retry pending (or no such handle: other backends)."""
    handle = getattr(scope, "_cancel_handle", None)
    if handle is not None:
        handle.cancel()
        scope._cancel_handle = None  # type: ignore[attr-defined]
