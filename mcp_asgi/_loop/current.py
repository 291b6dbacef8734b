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

import anyio

from mcp_asgi._loop import switch

_asyncio_scope: type[anyio.CancelScope] | None = None


if sys.version_info >= (3, 12):  # C already, and its internals moved

    def _current_task() -> asyncio.Task[object] | None:
        try:
            return asyncio.current_task()
        except RuntimeError:  # no asyncio loop is running in this thread
            return None

else:
    # `asyncio.current_task()` is a Python function here, which raises without a loop;
    # its two C halves: the running loop (None without one) and that loop's current task
    _running_loop = asyncio.events._get_running_loop
    _current_tasks: dict[object, asyncio.Task[object]] = asyncio.tasks._current_tasks  # type: ignore[attr-defined]

    def _current_task() -> asyncio.Task[object] | None:
        return _current_tasks.get(_running_loop())


def asyncio_task() -> asyncio.Task[object] | None:
    """The running asyncio task, or None (on trio, also hosted on an asyncio loop; or with
    the plain-anyio path forced)."""
    return None if switch._plain else _current_task()


def on_asyncio() -> bool:
    """Whether the fast paths for asyncio apply to the current task (cheaper than asking
    anyio or sniffio)."""
    return asyncio_task() is not None


def native_task() -> asyncio.Task[object] | None:
    """The running asyncio task, where it can be cancelled and uncancelled (Python 3.11+);
    None where `asyncio_task()` is, and on 3.10."""
    return asyncio_task() if sys.version_info >= (3, 11) else None


if sys.version_info >= (3, 11):

    def uncancel(task: asyncio.Task[object]) -> int:
        """`task.uncancel()`: the cancellation requests still pending on it."""
        return task.uncancel()

else:  # pragma: no cover - native_task() is None before 3.11

    def uncancel(task: asyncio.Task[object]) -> int:
        raise NotImplementedError


def new_cancel_scope(*, deadline: float = math.inf, shield: bool = False) -> anyio.CancelScope:
    """`anyio.CancelScope(deadline=..., shield=...)`, the same object, made for less."""
    global _asyncio_scope
    if not on_asyncio():
        return anyio.CancelScope(deadline=deadline, shield=shield)
    if _asyncio_scope is None:
        _asyncio_scope = type(anyio.CancelScope())
    return _asyncio_scope(deadline=deadline, shield=shield)
