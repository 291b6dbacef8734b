"""`beside` (the request's watcher beside its handler off asyncio: a task group with one
child) and whole requests under trio, with scripted receive/send (no sockets).

Every test runs on asyncio and on trio.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Callable, Coroutine
from typing import Any

import anyio
import pytest

from mcp_asgi import CancelReason
from mcp_asgi._loop import Beside, beside

from ..helpers import Otel, Wire, wire_for
from ..servers import Seen, scripted_app

Make = Callable[..., Beside]
_var: contextvars.ContextVar[str] = contextvars.ContextVar("_var", default="unset")

pytestmark = pytest.mark.both_loops  # the scope runs its handler differently on each loop


@pytest.fixture
def make() -> Make:
    """`beside` (the request scope's on trio; checked on asyncio too)."""
    return beside


def leaves(exc: BaseException | None) -> list[type[BaseException]]:
    """The types of the exceptions in `exc`, exception groups flattened."""
    if exc is None:
        return []
    inner: tuple[BaseException, ...] = getattr(exc, "exceptions", ())
    return [t for sub in inner for t in leaves(sub)] if inner else [type(exc)]


def slow_to_unwind(
    started: anyio.Event, events: list[str]
) -> Callable[[], Coroutine[Any, Any, None]]:
    """A child that runs until cancelled, then takes a (shielded) moment to unwind."""

    async def child() -> None:
        started.set()
        try:
            await anyio.sleep_forever()
        finally:
            with anyio.CancelScope(shield=True):
                await anyio.sleep(0.02)
            events.append("child unwound")

    return child


async def test_leaving_the_block_waits_for_the_child(make: Make) -> None:
    """The body does not wait for the child; leaving the block does."""
    events: list[str] = []

    async def child() -> None:
        await anyio.sleep(0.02)
        events.append("child")

    with anyio.fail_after(5):
        async with make(child):
            events.append("body")
    assert events == ["body", "child"]


async def test_cancel_stops_the_child(make: Make) -> None:
    """`cancel()` cancels the child; it is not an error; the block still waits for it."""
    events: list[str] = []
    started = anyio.Event()

    async def child() -> None:
        started.set()
        try:
            await anyio.sleep_forever()
        finally:
            events.append("child cancelled")

    with anyio.fail_after(5):
        async with make(child) as running:
            await started.wait()
            running.cancel()
    assert events == ["child cancelled"]


async def test_the_child_runs_in_a_copy_of_the_callers_context(make: Make) -> None:
    """The child sees the caller's context variables; what it sets stays its own."""
    seen: list[str] = []

    async def child(tag: str) -> None:
        seen.append(f"{tag}:{_var.get()}")
        _var.set("child")

    token = _var.set("request")
    try:
        with anyio.fail_after(5):
            async with make(child, "seen"):
                pass
        assert seen == ["seen:request"]
        assert _var.get() == "request"
    finally:
        _var.reset(token)


async def test_the_child_sees_the_context_of_the_blocks_entry(make: Make) -> None:
    """What the body sets after entering the block is not the child's, even when the child
    only starts as the block is left (a body that never suspended)."""
    seen: list[str] = []

    async def child() -> None:
        seen.append(_var.get())

    token = _var.set("entry")
    try:
        with anyio.fail_after(5):
            async with make(child):
                _var.set("body")
        assert seen == ["entry"]
    finally:
        _var.reset(token)


async def test_a_child_failure_is_raised_when_the_block_is_left(make: Make) -> None:
    """The child's exception is not lost: leaving the block raises it."""
    failed = anyio.Event()

    async def child() -> None:
        failed.set()
        raise ValueError("boom")

    caught: BaseException | None = None
    with anyio.fail_after(5):
        try:
            async with make(child):
                await failed.wait()
                await anyio.sleep(0.01)
        except Exception as exc:
            caught = exc
    assert leaves(caught) == [ValueError]


async def test_an_outside_cancel_cancels_and_awaits_the_child(make: Make) -> None:
    """A cancel of the caller's task from outside cancels the child and propagates only
    once the child has finished unwinding."""
    events: list[str] = []
    started = anyio.Event()
    child = slow_to_unwind(started, events)

    with anyio.fail_after(5), anyio.CancelScope() as outer:
        async with make(child):
            await started.wait()
            outer.cancel()
            await anyio.sleep_forever()
    events.append("caller went on")
    assert outer.cancelled_caught
    assert events == ["child unwound", "caller went on"]


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_repeated_native_cancels_still_wait_for_the_child() -> None:
    """On asyncio, `task.cancel()` (what uvicorn does), even twice while the child unwinds:
    the task ends cancelled, and only after its child."""
    events: list[str] = []
    started = anyio.Event()
    child = slow_to_unwind(started, events)

    async def request() -> None:
        async with beside(child):
            await anyio.sleep_forever()

    task = asyncio.get_running_loop().create_task(request())
    with anyio.fail_after(5):
        await started.wait()
        task.cancel()
        await anyio.sleep(0.005)
        task.cancel()
        await asyncio.wait([task])
    assert task.cancelled()
    assert events == ["child unwound"]


# -- whole requests (on trio: the task-group path) ----------------------------------------


def tool_wire(tool: str, accept: str, **arguments: Any) -> Wire:
    """A scripted `tools/call` of `tool` whose client stays until told to leave."""
    return wire_for("tools/call", {"name": tool, "arguments": arguments}, accept=accept)


def outcome(otel: Otel) -> Any:
    [span] = otel.spans.get_finished_spans()
    return dict(span.attributes or {}).get("mcp_asgi.cancellation.outcome")


async def test_a_reply(otel: Otel) -> None:
    """A call that returns: its result is written, nothing is cancelled."""
    app, wire = scripted_app(Seen(), otel), tool_wire("echo", "application/json", text="hi")
    with anyio.fail_after(5):
        await wire.run(app)
    assert wire.status == 200
    assert wire.messages[-1]["result"]["content"][0]["text"] == "hi"
    assert outcome(otel) is None
    assert not app._inflight


@pytest.mark.parametrize("accept", ["application/json", "text/event-stream"])
async def test_a_disconnect_cancels_an_awaiting_handler(otel: Otel, accept: str) -> None:
    """The client leaves mid-await: the handler is cancelled (client_disconnect) and
    nothing more is written."""
    seen = Seen()
    app, wire = scripted_app(seen, otel), tool_wire("forever", accept)
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(wire.run, app)
            await seen.started.wait()
            wire.disconnect()
            await seen.exited.wait()
    assert seen.reason is CancelReason.CLIENT_DISCONNECT
    assert wire.written_after_disconnect == []
    assert outcome(otel) == "exited"
    assert not app._inflight


async def test_a_disconnect_tells_a_thread(otel: Otel) -> None:
    """The client leaves while a sync tool runs in a thread: its token is cancelled."""
    seen = Seen()
    app, wire = scripted_app(seen, otel), tool_wire("blocking", "text/event-stream")
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(wire.run, app)
            await seen.started.wait()
            wire.disconnect()
    assert seen.reason is CancelReason.CLIENT_DISCONNECT
    assert wire.written_after_disconnect == []
    assert outcome(otel) == "exited"


async def test_an_outside_cancel_is_a_server_shutdown(otel: Otel) -> None:
    """The request's task is cancelled from outside: the handler is cancelled, the reply
    ends with the shutdown error and the span says why."""
    seen = Seen()
    app, wire = scripted_app(seen, otel), tool_wire("forever", "text/event-stream")
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(wire.run, app)
            await seen.started.wait()
            tg.cancel_scope.cancel()
    assert seen.exited.is_set()
    assert wire.messages[-1]["error"]["data"] == {"reason": "server_shutdown"}
    [span] = otel.spans.get_finished_spans()
    assert dict(span.attributes or {})["mcp_asgi.cancellation.reason"] == "server_shutdown"
    assert not app._inflight


async def test_a_watcher_failure_stops_the_handler_and_is_reported(otel: Otel) -> None:
    """`receive()` fails while the handler runs: the handler is stopped and the failure
    becomes the middleware's internal error (HTTP 500), not a hang."""
    seen = Seen()
    app = scripted_app(seen, otel, response_mode="json")
    wire = tool_wire("forever", "application/json")
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(wire.run, app)
            await seen.started.wait()
            wire.fail_receive()
    assert seen.exited.is_set()
    assert wire.status == 500
    assert wire.messages[-1]["error"]["code"] == -32603
    assert not app._inflight
