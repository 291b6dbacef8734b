"""RequestScope options the legacy era relies on, driven by scripted receive/send."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import pytest

from mcp_asgi._asgi import Message
from mcp_asgi._reply import ReplyWriter
from mcp_asgi._validate import McpRequest
from mcp_asgi.cancel import CancelReason
from mcp_asgi.jsonrpc import JsonObject
from mcp_asgi.scope import RequestScope, ScopeObserver
from mcp_asgi.settings import ResponseMode


class Wire:
    """A scripted client: `disconnect()` makes `receive` report `http.disconnect`."""

    def __init__(self) -> None:
        self.sent: list[Message] = []
        self._gone = anyio.Event()

    async def receive(self) -> Message:
        await self._gone.wait()
        return {"type": "http.disconnect"}

    async def send(self, message: Message) -> None:
        if self._gone.is_set():
            raise OSError("client gone")
        self.sent.append(message)

    def disconnect(self) -> None:
        self._gone.set()

    @property
    def body(self) -> bytes:
        return b"".join(m.get("body", b"") for m in self.sent if m["type"] == "http.response.body")

    @property
    def ended(self) -> bool:
        """Whether the response was completed (a body message without `more_body`)."""
        bodies = [m for m in self.sent if m["type"] == "http.response.body"]
        return bool(bodies) and not bodies[-1].get("more_body", False)


def make_scope(
    wire: Wire, mode: ResponseMode, *, cancel_on_disconnect: bool = True
) -> RequestScope:
    request = McpRequest(
        id=7,
        method="tools/call",
        params={"name": "slow"},
        protocol_version="2025-11-25",
        client_capabilities={},
        client_info=None,
        log_level=None,
        progress_token=None,
        meta={},
    )
    return RequestScope(
        request,
        ReplyWriter(wire.send, mode),
        timeout=None,
        cancel_grace=1.0,
        keepalive_interval=0.0,
        observer=ScopeObserver(),
        cancel_on_disconnect=cancel_on_disconnect,
    )


def handler(
    started: anyio.Event, release: anyio.Event, seen: list[str]
) -> Callable[[], Awaitable[JsonObject]]:
    async def call() -> JsonObject:
        started.set()
        try:
            await release.wait()
        except anyio.get_cancelled_exc_class():
            seen.append("cancelled")
            raise
        seen.append("finished")
        return {"content": []}

    return call


async def test_disconnect_without_cancel_lets_the_handler_finish() -> None:
    """cancel_on_disconnect=False: the handler runs on after a disconnect; its result is dropped."""
    wire, started, release, seen = Wire(), anyio.Event(), anyio.Event(), list[str]()
    scope = make_scope(wire, "sse", cancel_on_disconnect=False)
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(scope.run, wire.receive, handler(started, release, seen))
            await started.wait()
            wire.disconnect()
            await anyio.wait_all_tasks_blocked()
            assert seen == []
            release.set()
    assert seen == ["finished"]
    assert scope.reason is None
    assert scope.result == {"content": []}
    assert wire.sent == []


@pytest.mark.parametrize("mode", ["sse", "auto", "json"])
async def test_disconnect_cancels_by_default(mode: ResponseMode) -> None:
    """The default still turns a disconnect into client_disconnect."""
    wire, started, release, seen = Wire(), anyio.Event(), anyio.Event(), list[str]()
    scope = make_scope(wire, mode)
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(scope.run, wire.receive, handler(started, release, seen))
            await started.wait()
            wire.disconnect()
    assert seen == ["cancelled"]
    assert scope.reason is CancelReason.CLIENT_DISCONNECT


@pytest.mark.parametrize(
    ("mode", "status", "content_type"),
    [("sse", 200, b"text/event-stream"), ("auto", 200, b"text/event-stream"), ("json", 202, None)],
)
async def test_notification_cancel_ends_the_reply_without_a_message(
    mode: ResponseMode, status: int, content_type: bytes | None
) -> None:
    """A client_notification cancel ends the still-open reply with no JSON-RPC message."""
    wire, started, release, seen = Wire(), anyio.Event(), anyio.Event(), list[str]()
    scope = make_scope(wire, mode)
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(scope.run, wire.receive, handler(started, release, seen))
            await started.wait()
            scope.cancel(CancelReason.CLIENT_NOTIFICATION)
    assert seen == ["cancelled"]
    start = wire.sent[0]
    assert start["status"] == status
    headers: dict[bytes, Any] = dict(start["headers"])
    assert headers.get(b"content-type") == content_type
    assert wire.body == b""
    assert wire.ended


async def test_notification_cancel_ends_an_open_stream() -> None:
    """Progress already sent stays; the stream then ends with nothing more for the request."""
    wire, started, seen = Wire(), anyio.Event(), list[str]()
    scope = make_scope(wire, "sse")

    async def call() -> JsonObject:
        await scope.write({"jsonrpc": "2.0", "method": "notifications/progress", "params": {}})
        started.set()
        try:
            await anyio.sleep_forever()
            return {}
        finally:
            seen.append("cancelled")
            assert not await scope.write({"jsonrpc": "2.0", "method": "late", "params": {}})

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(scope.run, wire.receive, call)
            await started.wait()
            scope.cancel(CancelReason.SESSION_CLOSED)
    assert seen == ["cancelled"]
    assert wire.body.count(b"data:") == 1
    assert b"late" not in wire.body
    assert wire.ended


async def test_cancel_before_the_watcher_starts_does_not_hang() -> None:
    """A cancel that lands before the scope's watcher runs still ends the request."""
    wire, seen = Wire(), list[str]()
    scope = make_scope(wire, "auto")
    scope.cancel(CancelReason.SESSION_CLOSED)

    async def call() -> JsonObject:
        seen.append("called")
        return {}

    with anyio.fail_after(5):
        await scope.run(wire.receive, call)
    assert scope.reason is CancelReason.SESSION_CLOSED
    assert wire.ended
    assert wire.body == b""
