"""`read_body`'s time limit on both loops (asyncio: one timer; trio: a cancel scope): a body
that does not arrive in time is 408, one that does is read whole, and a cancellation that
is not the timer's passes through untouched, also when it comes together with the timer."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from starlette.types import Message, Receive

from mcp_asgi._loop import native_task
from mcp_asgi.http.body import ClientGone, read_body
from mcp_asgi.protocol.headers import RequestHeaders
from mcp_asgi.protocol.jsonrpc import ProtocolError

pytestmark = [pytest.mark.anyio, pytest.mark.both_loops, pytest.mark.both_paths]

HEADERS = RequestHeaders([(b"content-length", b"4")])


async def read(headers: RequestHeaders, receive: Receive, limit: int, **how: Any) -> bytes:
    """`read_body`'s body: as it comes back at once, or awaited."""
    body = read_body(headers, receive, limit, **how)
    return body if isinstance(body, bytes) else await body


def chunks(*parts: bytes, then_wait: bool = False) -> tuple[anyio.Event, Receive]:
    """A `receive` giving `parts` (the last one ends the body unless `then_wait`), then
    blocking until the returned event is set."""
    gate = anyio.Event()
    queue = list(parts)

    async def receive() -> Message:
        if queue:
            part = queue.pop(0)
            return {"type": "http.request", "body": part, "more_body": bool(queue) or then_wait}
        await gate.wait()
        return {"type": "http.disconnect"}

    return gate, receive


async def test_a_body_in_time_is_read_whole() -> None:
    _, receive = chunks(b"ab", b"cd")
    assert await read(HEADERS, receive, 100, within=5.0, task=native_task()) == b"abcd"


async def test_a_body_not_in_time_is_408_saying_how_long() -> None:
    _, receive = chunks(b"ab", then_wait=True)
    with pytest.raises(ProtocolError) as caught:
        await read(HEADERS, receive, 100, within=0.05, task=native_task())
    assert caught.value.http_status == 408
    assert "0.05 seconds" in str(caught.value)
    assert (b"connection", b"close") in caught.value.headers
    await anyio.sleep(0.01)  # the task is not left cancelled: it goes on


async def test_the_timer_is_gone_once_the_body_is_read() -> None:
    _, receive = chunks(b"abcd")
    assert await read(HEADERS, receive, 100, within=0.02, task=native_task()) == b"abcd"
    await anyio.sleep(0.05)  # a timer left armed would cancel this


async def test_a_cancellation_from_outside_passes_through() -> None:
    _, receive = chunks(b"ab", then_wait=True)
    with anyio.move_on_after(0.05) as outer:
        await read(HEADERS, receive, 100, within=5.0, task=native_task())
    assert outer.cancelled_caught


async def test_after_the_timers_408_outer_scopes_still_cancel() -> None:
    _, receive = chunks(b"ab", then_wait=True)
    with anyio.CancelScope() as outer:
        outer.deadline = anyio.current_time() + 0.1
        with pytest.raises(ProtocolError):  # the timer's 408 …
            await read(HEADERS, receive, 100, within=0.05, task=native_task())
        await anyio.sleep(5)  # … and the outer scope's cancellation still arrives
    assert outer.cancelled_caught


async def test_a_disconnect_before_the_end_is_client_gone() -> None:
    gate, receive = chunks(b"ab", then_wait=True)
    gate.set()
    with pytest.raises(ClientGone):
        await read(HEADERS, receive, 100, within=5.0, task=native_task())


def late(body: bytes, after: float) -> Receive:
    """A `receive` whose first (and only) message comes `after` seconds late."""

    async def receive() -> Message:
        await anyio.sleep(after)
        return {"type": "http.request", "body": body, "more_body": False}

    return receive


async def test_a_body_that_arrives_late_but_in_time_is_read_whole() -> None:
    assert await read(HEADERS, late(b"abcd", 0.02), 100, within=5.0, task=native_task()) == b"abcd"


async def test_a_first_message_that_never_comes_is_408() -> None:
    # the read's first step waits: the rest of it is under the time limit
    with pytest.raises(ProtocolError) as caught:
        await read(HEADERS, late(b"abcd", 5.0), 100, within=0.05, task=native_task())
    assert caught.value.http_status == 408


async def test_a_body_there_at_once_over_the_limit_is_413() -> None:
    _, receive = chunks(b"abcdef")
    with pytest.raises(ProtocolError) as caught:
        await read(RequestHeaders([]), receive, 4, within=5.0, task=native_task())
    assert caught.value.http_status == 413


@pytest.mark.parametrize(
    ("declared", "limit", "status"),
    [(b"5", 4, 413), (b"\xb2", 100, None), (b"4x", 100, None)],  # b"\xb2": latin-1's "²"
)
async def test_only_a_content_length_in_ascii_digits_is_taken_at_its_word(
    declared: bytes, limit: int, status: int | None
) -> None:
    """A declared length over the limit is 413 before anything is read; one that is not
    ASCII digits declares nothing (no error of its own): the body is counted as it comes."""
    _, receive = chunks(b"abcd")
    headers = RequestHeaders([(b"content-length", declared)])
    if status is None:
        assert await read(headers, receive, limit, within=5.0, task=native_task()) == b"abcd"
        return
    with pytest.raises(ProtocolError) as caught:
        await read(headers, receive, limit, within=5.0, task=native_task())
    assert caught.value.http_status == status


async def test_a_cancellation_while_waiting_for_the_first_message_reaches_receive() -> None:
    cleaned = []

    async def receive() -> Message:
        try:
            await anyio.sleep(5)
        finally:
            cleaned.append(True)
        raise AssertionError("not reached")

    with anyio.move_on_after(0.05) as outer:
        await read(HEADERS, receive, 100, within=5.0, task=native_task())
    assert outer.cancelled_caught
    assert cleaned == [True]
