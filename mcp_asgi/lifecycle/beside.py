"""Run one coroutine beside the current task, like a task group with one child, cheaply.

::

    async with beside(watch, receive) as child:
        ...                 # the body, in the current task
        child.cancel()      # or not: leaving the block waits for the child

On asyncio the child is a plain `asyncio.Task`: an anyio task group, its cancel scope and
the cancel that ends it cost several times more, and every request pays for one. On any
other event loop (trio) the child runs in an anyio task group. Either way:

- the child runs in a copy of the current context (contextvars), as in a task group;
- leaving the block waits for the child; if the body raised (a cancellation from outside
  included), the child is cancelled first, through its own anyio cancel scope, so its
  shielded clean-up is respected;
- a cancellation that reaches the caller while it waits is held until the child has
  finished, then propagates: no child is ever left running;
- the child's exception is raised when the block is left (from a task group, wrapped in an
  exception group).

Three differences on asyncio, all cheaper: the child's task is made only when the body
first suspends or the block is left (cancelled before then, the child never runs, as a
task cancelled before its first step); `cancel()` cancels the task itself (meant for a
child that is waiting, not one in a shielded section); and a failing child does not cancel
the body (the caller decides what its failure means).
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Callable, Coroutine
from types import TracebackType
from typing import Any, Protocol

import anyio

from mcp_asgi._event_loop import new_cancel_scope, on_asyncio

Child = Callable[..., Coroutine[Any, Any, None]]


class Beside(Protocol):
    """A child running beside the body of an `async with` block."""

    async def __aenter__(self) -> Beside: ...

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None: ...

    def cancel(self) -> None:
        """Cancel the child (leaving the block still waits for it to finish)."""


def beside(fn: Child, *args: Any) -> Beside:
    """Run `fn(*args)` beside the body of the `async with` block this is used in."""
    if on_asyncio():
        return TaskBeside(fn, *args)
    return GroupBeside(fn, *args)


class TaskBeside:
    """On asyncio: the child is a native task inside its own anyio cancel scope.

    The task is made only once the body first lets the event loop run, or when the block
    is left: a child cancelled before then (a quick handler's watcher) costs no task.
    """

    __slots__ = ("_args", "_context", "_fn", "_scope", "_start", "_task")

    def __init__(self, fn: Child, *args: Any) -> None:
        self._fn = fn
        self._args = args
        self._scope: anyio.CancelScope | None = None  # made when the child starts running
        self._task: asyncio.Task[None] | None = None
        self._start: asyncio.Handle | None = None

    async def __aenter__(self) -> TaskBeside:
        self._context = contextvars.copy_context()  # the child's, as of entering the block
        self._start = asyncio.get_running_loop().call_soon(self._create_task, context=self._context)
        return self

    def _create_task(self) -> None:
        self._start = None
        self._task = asyncio.get_running_loop().create_task(self._child())

    async def _child(self) -> None:
        self._scope = scope = new_cancel_scope()
        with scope:
            await self._fn(*self._args)

    def cancel(self) -> None:
        if self._start is not None:  # not started: it never will be
            self._start.cancel()
            self._start = None
        elif self._task is not None:
            self._task.cancel()

    def _cancel_from_scope(self, task: asyncio.Task[None]) -> None:
        """Cancel the child through its anyio scope (respects its shielded sections), or
        the task itself if its coroutine has not begun."""
        if self._scope is not None:
            self._scope.cancel()
        else:
            task.cancel()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._start is not None:  # the body never suspended: the child has not begun
            self._start.cancel()
            self._start = None
            if exc_type is not None:
                return  # it would be cancelled before it began
            self._context.run(self._create_task)
        task = self._task
        if task is None:  # cancelled before it started
            return
        if exc_type is not None:
            self._cancel_from_scope(task)
        interrupted: BaseException | None = None
        while not task.done():
            try:
                await _done(task)
            except asyncio.CancelledError as cancelled:  # held until the child is done
                self._cancel_from_scope(task)
                interrupted = cancelled
        self._task = None  # a cancelled task holds its exception, whose frames hold us
        if not task.cancelled() and (error := task.exception()) is not None:
            raise error
        if interrupted is not None:
            raise interrupted


async def join(task: asyncio.Task[None]) -> None:
    """Wait for `task` to finish, holding a cancellation of the caller until it has (then
    raising it); the task's own outcome is left in it."""
    interrupted: BaseException | None = None
    while not task.done():
        try:
            await _done(task)
        except asyncio.CancelledError as cancelled:
            interrupted = cancelled
    if interrupted is not None:
        raise interrupted


def _done(task: asyncio.Task[None]) -> asyncio.Future[None]:
    """A future that completes when `task` does; cancelling it leaves `task` alone (unlike
    awaiting `task` itself). Cheaper than `asyncio.wait`."""
    done: asyncio.Future[None] = task.get_loop().create_future()

    def release(_: object) -> None:
        if not done.done():
            done.set_result(None)

    task.add_done_callback(release)
    return done


class GroupBeside:
    """On any other event loop: the child runs in its own cancel scope in a task group."""

    def __init__(self, fn: Child, *args: Any) -> None:
        self._fn = fn
        self._args = args
        self._scope = anyio.CancelScope()
        self._group = anyio.create_task_group()

    async def __aenter__(self) -> GroupBeside:
        await self._group.__aenter__()
        self._group.start_soon(self._child)
        return self

    async def _child(self) -> None:
        with self._scope:
            await self._fn(*self._args)

    def cancel(self) -> None:
        self._scope.cancel()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        return await self._group.__aexit__(exc_type, exc, tb)
