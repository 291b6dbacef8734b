"""Run one coroutine beside the current task: `beside` (a task group with one child, on
any event loop) or, on asyncio, `Task` (a plain task of its own, which is cheaper).

::

    async with beside(watch, receive) as child:
        ...                 # the body, in the current task
        child.cancel()      # or not: leaving the block waits for the child

    task = Task(watch, receive)         # scheduled, in a copy of the current context
    ...
    if not task.done():
        await task.join()               # holds a cancellation of the caller until it ends
    task.error()                        # what it raised, if anything

`lifecycle.runner` uses `beside` for the handler off asyncio (trio, or the plain-anyio
path), and on asyncio a `Task` for the watcher of a handler that waits. With `beside`:

- the child runs in a copy of the current context (contextvars), as in a task group;
- the child's own cancel scope is shielded: a cancellation from outside the block reaches
  the body only, which decides what the child hears (a request's watcher records the
  reason first, then cancels the handler's scope);
- leaving the block waits for the child; if the body raised (a cancellation from outside
  included), the child is cancelled first, through its own cancel scope, so its shielded
  clean-up is respected;
- the child's exception is raised when the block is left, in an exception group.
"""

from __future__ import annotations

import asyncio
import contextvars
import sys
import types
from collections.abc import Awaitable, Callable, Coroutine, Generator
from types import TracebackType
from typing import Any

import anyio
import anyio.lowlevel

from mcp_asgi._loop.current import on_asyncio

Child = Callable[..., Coroutine[Any, Any, object]]


def beside(fn: Child, *args: Any) -> Beside:
    """Run `fn(*args)` beside the body of the `async with` block this is used in."""
    return Beside(fn, *args)


class Task:
    """`fn(*args)` as an asyncio task of its own, in a copy of the current context, or in
    `context` (asyncio only: `current.on_asyncio()`)."""

    __slots__ = ("_task",)

    def __init__(self, fn: Child, *args: Any, context: contextvars.Context | None = None) -> None:
        """`context` (Python 3.11+) is the one the task runs in, else a copy of the
        current one."""
        loop = asyncio.get_running_loop()
        # create_task runs the task in a copy of the current context (contextvars), as
        # before it copy_context().run(create_task) did with a copy of that copy
        if sys.version_info >= (3, 11) and context is not None:
            self._task = loop.create_task(fn(*args), context=context)
        else:
            self._task = loop.create_task(fn(*args))

    def done(self) -> bool:
        return self._task.done()

    def join(self) -> Awaitable[None]:
        """`await task.join()`: wait for the task to end, holding a cancellation of the
        caller until it has (then raising it); the task's own outcome is left in it."""
        return join(self._task)

    def error(self) -> BaseException | None:
        """The exception the ended task raised (not its cancellation), or None."""
        return None if self._task.cancelled() else self._task.exception()


@types.coroutine
def one_turn() -> Generator[None, None, None]:
    """One turn of an asyncio loop (`checkpoint()` where the caller knows it runs on
    asyncio): `asyncio.sleep(0)`'s own bare yield, without its coroutine and its check of
    the delay around it."""
    yield


def checkpoint() -> Awaitable[None]:
    """`await checkpoint()`: `anyio.lowlevel.checkpoint()` (on asyncio, one turn of the
    loop, which is what anyio does there), without anyio's backend lookup on asyncio."""
    if on_asyncio():
        return one_turn()
    return anyio.lowlevel.checkpoint()


async def join(task: asyncio.Task[object]) -> None:
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


def _done(task: asyncio.Task[object]) -> asyncio.Future[None]:
    """A future that completes when `task` does; cancelling it leaves `task` alone (unlike
    awaiting `task` itself). Cheaper than `asyncio.wait`."""
    done: asyncio.Future[None] = task.get_loop().create_future()

    def release(_: object) -> None:
        if not done.done():
            done.set_result(None)

    task.add_done_callback(release)
    return done


class Beside:
    """A child running beside the body of an `async with` block, in its own cancel scope in
    a task group."""

    def __init__(self, fn: Child, *args: Any) -> None:
        self._fn = fn
        self._args = args
        self._scope = anyio.CancelScope(shield=True)  # cancelled by the body's owner only
        self._group = anyio.create_task_group()

    async def __aenter__(self) -> Beside:
        await self._group.__aenter__()
        self._group.start_soon(self._child)
        return self

    async def _child(self) -> None:
        with self._scope:
            await self._fn(*self._args)

    def cancel(self) -> None:
        """Cancel the child (leaving the block still waits for it to finish)."""
        self._scope.cancel()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        if exc_type is not None:
            self._scope.cancel()
        return await self._group.__aexit__(exc_type, exc, tb)
