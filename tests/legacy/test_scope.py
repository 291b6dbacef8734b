"""RequestScope options the legacy era relies on, driven by scripted receive/send."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest

from mcp_asgi import CancelReason
from mcp_asgi.http.accept import ResponseMode
from mcp_asgi.lifecycle.scope import RequestScope
from mcp_asgi.protocol.jsonrpc import JsonObject

from ..helpers import Wire, request_scope


def scripted(mode: ResponseMode, **options: Any) -> tuple[Wire, RequestScope]:
    """A 2025-era request whose body was read: its client, and its scope replying to it."""
    wire = Wire(())
    return wire, request_scope(wire.send, mode, protocol_version="2025-11-25", **options)


class Handler:
    """Waits until released; records whether it was cancelled or finished."""

    def __init__(self) -> None:
        self.started = anyio.Event()
        self.release = anyio.Event()
        self.seen: list[str] = []

    async def __call__(self) -> JsonObject:
        self.started.set()
        try:
            await self.release.wait()
        except anyio.get_cancelled_exc_class():
            self.seen.append("cancelled")
            raise
        self.seen.append("finished")
        return {"content": []}


@asynccontextmanager
async def running(wire: Wire, scope: RequestScope, handler: Handler) -> AsyncIterator[None]:
    """Run `handler` in `scope` (bounded): the block runs once the handler has started, and
    the request has ended when this returns."""
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(scope.run, wire.receive, handler)
            await handler.started.wait()
            yield


async def test_disconnect_without_cancel_lets_the_handler_finish() -> None:
    """cancel_on_disconnect=False: the handler runs on after a disconnect; its result is dropped."""
    wire, scope = scripted("sse", cancel_on_disconnect=False)
    handler = Handler()
    async with running(wire, scope, handler):
        wire.disconnect(broken_pipe=True)
        await anyio.wait_all_tasks_blocked()
        assert handler.seen == []
        handler.release.set()
    assert handler.seen == ["finished"]
    assert scope.reason is None
    assert scope.result == {"content": []}
    assert wire.sent == []


@pytest.mark.parametrize("mode", ["sse", "auto", "json"])
async def test_disconnect_cancels_by_default(mode: ResponseMode) -> None:
    """The default still turns a disconnect into client_disconnect."""
    wire, scope = scripted(mode)
    handler = Handler()
    async with running(wire, scope, handler):
        wire.disconnect(broken_pipe=True)
    assert handler.seen == ["cancelled"]
    assert scope.reason is CancelReason.CLIENT_DISCONNECT


@pytest.mark.parametrize(
    ("mode", "status", "content_type"),
    [("sse", 200, b"text/event-stream"), ("auto", 200, b"text/event-stream"), ("json", 202, None)],
)
async def test_notification_cancel_ends_the_reply_without_a_message(
    mode: ResponseMode, status: int, content_type: bytes | None
) -> None:
    """A client_notification cancel ends the still-open reply with no JSON-RPC message."""
    wire, scope = scripted(mode)
    handler = Handler()
    async with running(wire, scope, handler):
        scope.cancel(CancelReason.CLIENT_NOTIFICATION)
    assert handler.seen == ["cancelled"]
    start = wire.sent[0]
    assert start["status"] == status
    headers: dict[bytes, Any] = dict(start["headers"])
    assert headers.get(b"content-type") == content_type
    assert wire.body == b""
    assert wire.ended


async def test_notification_cancel_ends_an_open_stream() -> None:
    """Progress already sent stays; the stream then ends with nothing more for the request."""
    wire, scope = scripted("sse")

    class Streaming(Handler):
        async def __call__(self) -> JsonObject:
            await scope.write({"jsonrpc": "2.0", "method": "notifications/progress", "params": {}})
            self.started.set()
            try:
                await anyio.sleep_forever()
                return {}
            finally:
                self.seen.append("cancelled")
                assert not await scope.write({"jsonrpc": "2.0", "method": "late", "params": {}})

    handler = Streaming()
    async with running(wire, scope, handler):
        scope.cancel(CancelReason.SESSION_CLOSED)
    assert handler.seen == ["cancelled"]
    assert wire.body.count(b"data:") == 1
    assert b"late" not in wire.body
    assert wire.ended


async def test_cancel_before_the_watcher_starts_does_not_hang() -> None:
    """A cancel that lands before the scope's watcher runs still ends the request."""
    wire, scope = scripted("auto")
    scope.cancel(CancelReason.SESSION_CLOSED)
    seen: list[str] = []

    async def call() -> JsonObject:
        seen.append("called")
        return {}

    with anyio.fail_after(5):
        await scope.run(wire.receive, call)
    assert scope.reason is CancelReason.SESSION_CLOSED
    assert wire.ended
    assert wire.body == b""
