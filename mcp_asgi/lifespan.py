"""`mounted_lifespan`: run a mounted ASGI app's lifespan inside the app that mounts it.

Starlette's `Mount` (and FastAPI's `app.mount`) never pass lifespan events to the app they
mount, so a `McpMiddleware` inside it cannot see the server shut down: requests in flight
then are cut off without their `server_shutdown` error, span or log record. Give the outer
app the inner one's lifespan::

    root = Starlette(routes=[Mount("/api", app=api)], lifespan=mounted_lifespan(api))

::

    outer startup ──► lifespan.startup ──► the mounted app ──► startup.complete (or .failed:
                                                              RuntimeError)
    outer shutdown ─► lifespan.shutdown ─► the mounted app ──► shutdown.complete

A mounted app that does not take part in the lifespan protocol (it returns, or raises, at
once) is left alone.

The middleware's side of a lifespan is here too: `pass_lifespan` hands the lifespan to the
app the middleware wraps, telling the middleware of its startup and shutdown, and stands
in for an app that ignores lifespan scopes; `fail_startup` answers a startup the
middleware refuses. Outside the layers: it imports nothing of the package.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

import anyio
from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["mounted_lifespan"]


def mounted_lifespan(app: ASGIApp) -> Callable[[Any], AbstractAsyncContextManager[None]]:
    """A `lifespan=` for the app that mounts `app`: it runs `app`'s lifespan (its startup
    before the outer app serves, its shutdown when the outer app shuts down).

    Pass it as `Starlette(..., lifespan=...)` or `FastAPI(lifespan=...)`; inside a lifespan
    of your own, enter `mounted_lifespan(api)(app)` with `async with`. A startup that fails
    raises `RuntimeError`, which fails the outer app's startup as well.
    """

    def lifespan(_outer: Any) -> AbstractAsyncContextManager[None]:
        return _run_lifespan(app)

    return lifespan


@contextlib.asynccontextmanager
async def _run_lifespan(app: ASGIApp) -> AsyncIterator[None]:
    to_app, app_inbox = anyio.create_memory_object_stream[Message](2)
    replies, from_app = anyio.create_memory_object_stream[Message](2)
    scope = {"type": "lifespan", "asgi": {"version": "3.0", "spec_version": "2.0"}, "state": {}}

    async def run_app() -> None:
        async with replies, app_inbox:
            with contextlib.suppress(Exception):  # an app without lifespan support
                await app(scope, app_inbox.receive, replies.send)

    failed: str | None = None
    async with anyio.create_task_group() as tg, to_app, from_app:
        to_app.send_nowait({"type": "lifespan.startup"})  # waiting for the app to ask
        tg.start_soon(run_app)
        reply = await _reply(from_app)
        if reply is not None and reply["type"] == "lifespan.startup.failed":
            failed = str(reply.get("message", ""))
            tg.cancel_scope.cancel()
        else:
            try:
                yield
            finally:
                if reply is not None:  # the app takes part: tell it, wait for it to finish
                    with anyio.CancelScope(shield=True):
                        await to_app.send({"type": "lifespan.shutdown"})
                        await _reply(from_app)
                tg.cancel_scope.cancel()
    if failed is not None:
        raise RuntimeError(f"the mounted app failed to start: {failed}")


async def _reply(messages: anyio.abc.ObjectReceiveStream[Message]) -> Message | None:
    """The app's next lifespan message, or None once it has returned."""
    try:
        return await messages.receive()
    except anyio.EndOfStream:
        return None


async def pass_lifespan(
    app: ASGIApp,
    scope: Scope,
    receive: Receive,
    send: Send,
    *,
    started: Callable[[], None],
    shutting_down: Callable[[], Awaitable[None]],
) -> None:
    """Pass a lifespan to `app`: `started` is called when it completes its startup, and
    `shutting_down` is awaited when `lifespan.shutdown` arrives, before the app hears of it.
    An app that returns without taking part in the protocol (it ignores lifespan scopes) is
    stood in for: startup completes, and shutdown is still seen."""
    messages: list[str] = []

    async def receive_with_shutdown() -> Message:
        message = await receive()
        messages.append(message["type"])
        if message["type"] == "lifespan.shutdown":
            await shutting_down()
        return message

    async def send_seeing_startup(message: Message) -> None:
        messages.append(message["type"])
        if message["type"] == "lifespan.startup.complete":
            started()
        await send(message)

    await app(scope, receive_with_shutdown, send_seeing_startup)
    if messages in ([], ["lifespan.startup"]):  # the app does not take part: stand in
        if not messages:
            await receive()  # lifespan.startup
        await send_seeing_startup({"type": "lifespan.startup.complete"})
        while (await receive_with_shutdown())["type"] != "lifespan.shutdown":
            pass
        await send({"type": "lifespan.shutdown.complete"})


async def fail_startup(reason: str, receive: Receive, send: Send) -> None:
    """Answer the lifespan startup with `lifespan.startup.failed` and `reason` (the ASGI
    server exits saying so)."""
    await receive()  # lifespan.startup
    await send({"type": "lifespan.startup.failed", "message": reason})
