"""Running one request: its handler in a task of its own, the watcher in the request's.

::

    handler task   RequestScope.handle: the handler, its final reply, the watcher stopped
    request task   on asyncio, only once the handler's first step is over without an
                   answer (most requests need no watcher): RequestScope.watch
                   cancelled from outside (a server's shutdown) ──► shielded,
                   RequestScope.stopped_from_outside, before the handler hears of it
    at the end     RequestScope.finish, however it ended

On asyncio the handler is a plain task (`_loop.Task`), waited for holding a cancellation
until it is over; elsewhere (trio, the plain-anyio path) it runs `beside` the watcher, in a
one-child task group. The scope decides everything; this module only carries it out.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Protocol

import anyio
from starlette.types import Receive

from mcp_asgi._loop import Task, beside, on_asyncio
from mcp_asgi.protocol.jsonrpc import JsonObject

Call = Callable[..., Awaitable[JsonObject]]
"""The handler, called with its arguments (`Args`)."""
Args = tuple[Any, ...]


class Steps(Protocol):
    """What the runner calls: a `RequestScope`'s steps."""

    @property
    def cancel_called(self) -> bool: ...

    async def handle(self, call: Call, args: Args) -> None: ...

    async def watch(self, receive: Receive) -> None: ...

    async def stopped_from_outside(self) -> None: ...

    def finish(self) -> None: ...


def run(steps: Steps, receive: Receive, call: Call, args: Args = ()) -> Coroutine[Any, Any, None]:
    """`await run(...)`: run the handler (`call(*args)`) and watch the request until the
    handler exits (or is orphaned); a failure of the watcher stops the handler and is
    raised; `steps.finish()` however it ended. Hands back the coroutine of the loop's way
    (no frame of its own held while the request waits)."""
    if on_asyncio():
        return _run_as_task(steps, receive, call, args)
    return _run_beside(steps, receive, call, args)


async def _run_beside(steps: Steps, receive: Receive, call: Call, args: Args) -> None:
    try:
        async with beside(steps.handle, call, args):
            await _watch_from_outside(steps, receive)
    finally:
        steps.finish()


async def _run_as_task(steps: Steps, receive: Receive, call: Call, args: Args) -> None:
    """The handler's task takes its first step before anything else: a handler that
    answers without waiting for anything is then over, and no watcher is needed (most
    requests). Leaving waits for the handler's task, holding a cancellation until then.
    (`_watch_from_outside`, written out: one frame less while the request waits.)"""
    try:
        handler = Task(steps.handle, call, args)
        try:
            try:
                # the handler's task was scheduled first: it takes its first step now
                await handler.first_step()
                if not handler.done() or steps.cancel_called:
                    await steps.watch(receive)
            except asyncio.CancelledError:
                # the scope's own cancellations are swallowed: this one came from outside
                with anyio.CancelScope(shield=True):
                    await steps.stopped_from_outside()
                raise
        except BaseException:
            if not handler.done() and not steps.cancel_called:
                handler.cancel()  # the watcher failed: nothing would watch the handler
            await handler.join()
            raise
        if not handler.done():  # (most handlers are over by now: no join to await)
            await handler.join()
        if (error := handler.error()) is not None:
            raise error
    finally:
        steps.finish()


async def _watch_from_outside(steps: Steps, receive: Receive) -> None:
    """The request's own task: watch, and record a cancellation that comes from outside as
    `server_shutdown` before the handler, in its own task, hears of it."""
    try:
        await steps.watch(receive)
    except anyio.get_cancelled_exc_class():
        # the scope's own cancel scopes swallow their cancellations: this one came from outside
        with anyio.CancelScope(shield=True):
            await steps.stopped_from_outside()
        raise
