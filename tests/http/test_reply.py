"""`ReplyWriter`'s serialisation: writes that contend (a keep-alive, a notification and the
final response while the socket is slow) go out whole, in the order they came, and a
writer cancelled while it waits for its turn neither writes nor blocks the others."""

from __future__ import annotations

import anyio
import pytest
from starlette.types import Message

from mcp_asgi.http import reply
from mcp_asgi.http.reply import ReplyState, ReplyWriter

pytestmark = [pytest.mark.anyio, pytest.mark.both_loops, pytest.mark.both_paths]


class SlowSocket:
    """An ASGI `send` whose first body write blocks until `release` is set."""

    def __init__(self) -> None:
        self.messages: list[Message] = []
        self.blocking = anyio.Event()
        self.release = anyio.Event()
        self._blocked_once = False

    async def send(self, message: Message) -> None:
        if message["type"] == "http.response.body" and not self._blocked_once:
            self._blocked_once = True
            self.blocking.set()
            await self.release.wait()
        self.messages.append(message)

    @property
    def bodies(self) -> list[bytes]:
        return [m["body"] for m in self.messages if m["type"] == "http.response.body"]


def notification(n: int) -> dict[str, object]:
    return {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"n": n}}


async def test_contending_writes_go_out_whole_and_in_order() -> None:
    socket = SlowSocket()
    writer = ReplyWriter(socket.send, "sse")
    results: list[bool] = []

    async def write(message: dict[str, object], final: bool = False) -> None:
        if final:
            results.append(await writer.finish(message))
        else:
            results.append(await writer.notify(message))

    with anyio.fail_after(5):
        async with anyio.create_task_group() as group:
            group.start_soon(write, notification(1))
            await socket.blocking.wait()  # the first write holds the lock, stuck in send
            group.start_soon(write, notification(2))
            await anyio.sleep(0.01)
            group.start_soon(write, {"jsonrpc": "2.0", "id": 1, "result": {}}, True)
            await anyio.sleep(0.01)
            socket.release.set()
    assert results == [True, True, True]
    bodies = socket.bodies
    assert b'"n":1' in bodies[0]
    assert b'"n":2' in bodies[1]
    assert b'"result"' in bodies[2]
    assert [m["type"] for m in socket.messages].count("http.response.start") == 1
    assert writer.state is ReplyState.DONE


async def test_a_writer_cancelled_while_waiting_does_not_write_or_block_the_rest() -> None:
    socket = SlowSocket()
    writer = ReplyWriter(socket.send, "sse")

    with anyio.fail_after(5):
        async with anyio.create_task_group() as group:
            group.start_soon(writer.notify, notification(1))
            await socket.blocking.wait()
            with anyio.CancelScope() as waiting:
                waiting.cancel()
                await writer.notify(notification(2))  # cancelled in the queue
            socket.release.set()
        assert await writer.finish({"jsonrpc": "2.0", "id": 1, "result": {}})
    bodies = b"".join(socket.bodies)
    assert b'"n":1' in bodies
    assert b'"n":2' not in bodies
    assert b'"result"' in bodies


async def test_a_writer_handed_the_lock_as_it_is_cancelled_passes_it_on() -> None:
    """Release hands the lock to the first waiter; if that waiter's wait is cancelled in
    the same moment, the lock goes on to the next one instead of staying taken."""
    socket = SlowSocket()
    writer = ReplyWriter(socket.send, "sse")
    order: list[str] = []

    async def cancelled_waiter(scope: anyio.CancelScope) -> None:
        with scope:
            await writer.notify(notification(2))
            order.append("cancelled waiter wrote")

    async def last_writer() -> None:
        assert await writer.finish({"jsonrpc": "2.0", "id": 1, "result": {}})
        order.append("final written")

    with anyio.fail_after(5):
        async with anyio.create_task_group() as group:
            group.start_soon(writer.notify, notification(1))
            await socket.blocking.wait()
            scope = anyio.CancelScope()
            group.start_soon(cancelled_waiter, scope)
            await anyio.sleep(0.01)
            group.start_soon(last_writer)
            await anyio.sleep(0.01)
            socket.release.set()  # the holder finishes and hands over to the waiter...
            scope.cancel()  # ...which is cancelled before it runs again
    assert order[-1] == "final written"
    assert b'"result"' in b"".join(socket.bodies)


async def test_ending_the_reply_of_a_gone_client_never_blocks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A server whose send blocks once the connection has closed (Hypercorn over HTTP/2)
    cannot hold the request: `end()` gives its sends up after a bound."""
    monkeypatch.setattr(reply, "_END_TIMEOUT", 0.05)
    sent: list[str] = []

    async def send(message: Message) -> None:
        sent.append(message["type"])
        await anyio.sleep_forever()

    with anyio.fail_after(5):
        await ReplyWriter(send, "json").end()
    assert sent == ["http.response.start"]


async def test_a_complete_reply_ends_at_once_and_an_unfinished_one_is_left_to_end() -> None:
    """`end_at_once` completes the exchange only where the reply was written whole; a reply
    never written (its client left) is not ended by it: `end()` then sends the 499."""
    sent: list[Message] = []

    async def send(message: Message) -> None:
        sent.append(message)

    unwritten = ReplyWriter(send, "json")
    assert not unwritten.end_at_once()
    assert sent == []
    await unwritten.end()
    assert sent[0] == {"type": "http.response.start", "status": 499, "headers": []}

    sent.clear()
    written = ReplyWriter(send, "json")
    assert await written.finish({"jsonrpc": "2.0", "id": 1, "result": {}})
    assert written.end_at_once()
    assert written.state is ReplyState.DONE
    assert [m["type"] for m in sent] == ["http.response.start", "http.response.body"]
