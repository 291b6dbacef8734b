"""Running one request: its handler and, once the handler waits, a watcher beside it.

::

    on asyncio     RequestScope.handle, in the request's own task: the handler's first step
                   at once; an answer there needs no watcher (most requests). Once the
                   handler waits, the client is watched from this task (`lifecycle.armed`)
                   until something happens, then by RequestScope.watch in a task of its
                   own (`watch_beside`); what the request's task is sent or thrown is heard
                   by the scope first:
                   cancelled from outside (a server's shutdown) ──► recorded as
                   `server_shutdown` before the handler hears of it (one with no message,
                   as asyncio's own tools send, is only told to the handler while it is
                   pending); the cancellation goes on; RequestScope.stopped_from_outside,
                   shielded
    elsewhere      (trio, the plain-anyio path) the handler in a child task (`beside`), the
                   watcher in the request's own
    at the end     (cancelled: one turn of the loop first, so that every handler a burst of
                   cancels reached stops before any of those requests is settled) the
                   watcher's task waited for (if any, and busy); RequestScope.finish,
                   however it ended

The scope decides everything; this module only carries it out.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Protocol

import anyio
from starlette.types import Receive

from mcp_asgi._loop import Task, asyncio_task, beside, one_turn
from mcp_asgi.lifecycle.watcher import Received
from mcp_asgi.protocol.jsonrpc import JsonObject

Call = Callable[..., Awaitable[JsonObject]]
"""The handler, called with its arguments (`Args`)."""
Args = tuple[Any, ...]


class Steps(Protocol):
    """What the runner calls: a `RequestScope`'s steps."""

    @property
    def watcher_task(self) -> Task | None: ...

    @property
    def watcher_busy(self) -> bool: ...

    async def handle(self, call: Call, args: Args, receive: Receive | None) -> bool: ...

    async def watch(
        self,
        receive: Receive,
        first: Received | None = None,
        since: float | None = None,
    ) -> None: ...

    async def stopped_from_outside(self) -> None: ...

    def finish(self) -> None: ...


def run(
    steps: Steps,
    receive: Receive,
    call: Call,
    args: Args = (),
    in_task: bool = False,
) -> Coroutine[Any, Any, None]:
    """`await run(...)`: run the handler (`call(*args)`) and watch the request until the
    handler exits (or is orphaned); a failure of the watcher stops the handler and is
    raised; `steps.finish()` however it ended. Hands back the coroutine of the loop's way
    (no frame of its own held while the request waits). `in_task`: the caller knows it
    runs in its own asyncio task (it had one from `native_task()`); else asked here."""
    if in_task or asyncio_task() is not None:  # (`on_asyncio()`, written out)
        return _run_in_request_task(steps, receive, call, args)
    return _run_beside(steps, receive, call, args)


def watch_beside(
    steps: Steps,
    receive: Receive,
    first: Received | None,
    since: float,
    context: contextvars.Context | None,
) -> Task:
    """The watcher in a task of its own (in `context`), beside a handler waiting in the
    request's task (asyncio), going on with `first`, a `receive()` begun there. (A failure
    of `watch` stops the handler: `watch` sees to it.)"""
    return Task(steps.watch, receive, first, since, context=context)


async def _run_in_request_task(steps: Steps, receive: Receive, call: Call, args: Args) -> None:
    """The handler runs here (`handle` starts the watcher's task once it waits); leaving
    waits for the watcher's task, holding a cancellation until then, and raises its
    failure."""
    try:
        try:
            if await steps.handle(call, args, receive):  # (cancelled)
                # the handler has stopped: every other handler a burst of cancels reached
                # on this turn stops before any of their requests' accounts are settled
                await one_turn()  # (this is the asyncio path: `checkpoint()`'s, no question)
                if steps.watcher_task is None:
                    await steps.watch(receive)  # no watcher's task: the rest of it here
        except asyncio.CancelledError:
            # the scope's own cancellations are swallowed: this one came from outside
            with anyio.CancelScope(shield=True):
                await steps.stopped_from_outside()
            raise
        finally:
            # a watcher stopped with the request not cancelled ends on its next step, with
            # nothing left to do; after a signal it tells the client and waits out the
            # grace period: that is waited for
            watcher = steps.watcher_task
            if watcher is not None and not watcher.done() and steps.watcher_busy:
                await watcher.join()
        if watcher is not None and watcher.done() and (error := watcher.error()) is not None:
            raise error
    finally:
        steps.finish()


async def _run_beside(steps: Steps, receive: Receive, call: Call, args: Args) -> None:
    try:
        async with beside(steps.handle, call, args, None):
            await _watch_from_outside(steps, receive)
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
