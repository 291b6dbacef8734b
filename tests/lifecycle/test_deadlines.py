"""Deadlines: `max_request_duration` and per-tool `timeout=` cancel with reason `timeout`,
answer with a clear JSON-RPC error, and are never extended by progress.

Nothing here is about real time, so every test runs in-process on trio with a fake clock
(marked `fake_clock`: a `trio.testing.MockClock` that jumps to the next deadline the moment
every task waits): a deadline is an absolute time on the event loop's clock, so it fires at once
and exactly on time. A handler "holds" time with `fake_clock.jump()`.
"""

from __future__ import annotations

import logging
import math
import time
from typing import Any

import anyio
import pytest
from opentelemetry.trace import StatusCode
from trio.testing import MockClock

from mcp_asgi import CancelReason, CancelToken, Context, McpServer

from ..helpers import (
    CANCEL_LOGGER,
    Otel,
    Probe,
    Wire,
    attrs,
    call,
    cancel_records,
    mcp_app,
    records_for,
    wait_for,
    wire_for,
)

ACCEPT = {"json": "application/json", "sse": "text/event-stream"}
HOUR = 3600.0


pytestmark = pytest.mark.fake_clock


def build_server(probe: Probe, clock: MockClock) -> McpServer:
    server = McpServer("deadlines")

    @server.tool()
    async def forever(ctx: Context) -> str:
        """Sleeps past any deadline."""
        with probe.running(ctx):
            await anyio.sleep_forever()
        return "never"

    @server.tool(timeout=0.3)
    async def capped(ctx: Context) -> str:
        """Has its own 0.3 s timeout."""
        with probe.running(ctx):
            await anyio.sleep_forever()
        return "never"

    @server.tool(timeout=HOUR)
    async def hour(ctx: Context) -> str:
        """Has a timeout of an hour."""
        with probe.running(ctx):
            await anyio.sleep_forever()
        return "never"

    @server.tool(timeout=0.4)
    async def chatty(ctx: Context) -> str:
        """Reports progress every 20 ms: progress does not extend the deadline."""
        count = 0
        with probe.running(ctx):
            while True:
                count += 1
                await ctx.report_progress(count)
                await anyio.sleep(0.02)

    @server.tool(timeout=0.3)
    def grinding(token: CancelToken) -> str:
        """A thread that polls its token until the timeout tells it to stop."""
        with probe.running(token):
            while not token.wait(0.01):
                pass
        return "never"

    @server.tool(timeout=0.5)
    async def late_to_await(ctx: Context) -> str:
        """Holds the event loop for 1 s before its first await (the clock moves on, nothing
        else runs), then sleeps 0.3 s."""
        with probe.running(ctx):
            clock.jump(1.0)
            await anyio.sleep(0.3)
        return "finished"

    @server.tool()
    async def remaining(ctx: Context, after: float = 0.0) -> float | None:
        """How long the request has left, `after` seconds into it."""
        clock.jump(after)
        return ctx.deadline

    @server.tool(timeout=30)
    async def fast() -> str:
        """Returns well within its timeout."""
        return "fast"

    return server


def tool(name: str, **arguments: Any) -> dict[str, Any]:
    return {"name": name, "arguments": arguments}


@pytest.mark.parametrize("mode", ["json", "sse"])
async def test_max_request_duration_times_out(
    mode: str, otel: Otel, caplog: pytest.LogCaptureFixture, fake_clock: MockClock
) -> None:
    """The server's own maximum duration cancels the handler with reason `timeout` and
    answers a JSON-RPC error saying so; the span is an error; one INFO record."""
    caplog.set_level(logging.DEBUG, logger=CANCEL_LOGGER)
    probe = Probe()
    app = mcp_app(build_server(probe, fake_clock), otel, max_request_duration=0.3)
    start = fake_clock.current_time()
    response = await call(
        app, "tools/call", tool("forever"), id="slow-1", headers={"accept": ACCEPT[mode]}
    )
    assert fake_clock.current_time() - start == pytest.approx(0.3)  # on time, to the tick
    assert probe.exited.is_set()
    assert response.status == 200
    assert response.content_type.startswith(ACCEPT[mode])
    assert response.final == {
        "jsonrpc": "2.0",
        "id": "slow-1",
        "error": {
            "code": -32603,
            "message": "Request timed out after 0.3 seconds",
            "data": {"reason": "timeout"},
        },
    }
    assert probe.reason is CancelReason.TIMEOUT
    span = otel.span("tools/call forever")
    assert span.status.status_code is StatusCode.ERROR
    attributes = attrs(span)
    assert attributes["mcp_asgi.cancellation.reason"] == "timeout"
    assert attributes["error.type"] == "timeout"
    [record] = records_for(caplog, "slow-1")
    assert record.levelno == logging.INFO
    assert getattr(record, "reason", None) == "timeout"


@pytest.mark.parametrize(
    ("max_request_duration", "seconds"),
    [(60, 0.3), (0.2, 0.2)],
    ids=["tool-timeout-below-the-maximum", "maximum-below-a-longer-tool-timeout"],
)
async def test_the_smaller_deadline_wins(
    max_request_duration: float, seconds: float, fake_clock: MockClock
) -> None:
    """A tool's `timeout=` and `max_request_duration`: the smaller of the two applies."""
    probe = Probe()
    app = mcp_app(build_server(probe, fake_clock), max_request_duration=max_request_duration)
    start = fake_clock.current_time()
    response = await call(app, "tools/call", tool("capped"))
    assert fake_clock.current_time() - start == pytest.approx(seconds)
    assert response.error["message"] == f"Request timed out after {seconds} seconds"
    assert probe.reason is CancelReason.TIMEOUT


async def test_an_hour_long_timeout_fires_on_the_loop_clock(fake_clock: MockClock) -> None:
    """A tool with `timeout=3600` times out after an hour of the event loop's time, which the
    fake clock skips: the deadline is computed on the loop's clock, not read off the wall."""
    probe = Probe()
    app = mcp_app(build_server(probe, fake_clock), max_request_duration=None)
    wire = wire_for("tools/call", tool("hour"), accept=ACCEPT["sse"], leave_when_done=True)
    start, wall = fake_clock.current_time(), time.monotonic()
    with anyio.fail_after(2 * HOUR):  # asgi_request's 10 s limit is on this clock too
        await wire.run(app)
    assert fake_clock.current_time() - start == pytest.approx(HOUR)
    assert time.monotonic() - wall < 10  # an hour of keep-alives and waiting, skipped
    assert wire.error == {
        "code": -32603,
        "message": "Request timed out after 3600 seconds",
        "data": {"reason": "timeout"},
    }
    assert probe.reason is CancelReason.TIMEOUT


async def test_progress_does_not_extend_the_deadline(fake_clock: MockClock) -> None:
    """A handler that keeps reporting progress still times out: the stream carries the
    progress notifications, then ends with the timeout error, 0.4 s after the start."""
    probe = Probe()
    app = mcp_app(build_server(probe, fake_clock), response_mode="sse")
    start = fake_clock.current_time()
    response = await call(app, "tools/call", tool("chatty"), progress=True)
    assert fake_clock.current_time() - start == pytest.approx(0.4)
    *progress, final = response.messages
    assert len(progress) >= 10  # one every 20 ms, for 0.4 s
    assert {m["method"] for m in progress} == {"notifications/progress"}
    assert final["error"]["data"] == {"reason": "timeout"}
    assert probe.reason is CancelReason.TIMEOUT


async def test_the_deadline_counts_from_the_start_not_from_the_first_await(
    fake_clock: MockClock,
) -> None:
    """The request's watcher starts only once the handler first awaits; a handler that
    holds the loop past its timeout before that is still timed out at its first await
    (not a full timeout later, which would let its 0.3 s sleep finish)."""
    probe = Probe()
    start = fake_clock.current_time()
    response = await call(
        mcp_app(build_server(probe, fake_clock)), "tools/call", tool("late_to_await")
    )
    assert response.final["error"]["data"] == {"reason": "timeout"}
    assert probe.reason is CancelReason.TIMEOUT
    assert fake_clock.current_time() - start == pytest.approx(1.0)  # at the first await


async def test_a_thread_learns_of_the_timeout_through_its_token(fake_clock: MockClock) -> None:
    """A sync tool's token carries the `timeout` reason; the client gets the error.

    A worker thread runs in real time, which the fake clock cannot see: so the clock moves
    only by hand here, by the tool's timeout once the thread is grinding."""
    fake_clock.autojump_threshold = math.inf
    probe = Probe()
    app = mcp_app(build_server(probe, fake_clock))
    responses: list[Wire] = []

    async def request() -> None:
        responses.append(await call(app, "tools/call", tool("grinding")))

    async with anyio.create_task_group() as tg:
        tg.start_soon(request)
        await wait_for(probe.started)
        assert not probe.exited.is_set()
        fake_clock.jump(0.3)
        await wait_for(probe.exited)
    assert probe.reason is CancelReason.TIMEOUT
    assert responses[0].error["data"] == {"reason": "timeout"}


@pytest.mark.parametrize(("after", "left"), [(0.0, 100.0), (5.0, 95.0)])
async def test_deadline_is_visible_to_the_handler(
    fake_clock: MockClock, after: float, left: float
) -> None:
    """`ctx.deadline` is the time left on the loop's clock, or None without a limit."""
    probe = Probe()
    app = mcp_app(build_server(probe, fake_clock), max_request_duration=100)
    response = await call(app, "tools/call", tool("remaining", after=after))
    assert response.result["structuredContent"]["result"] == pytest.approx(left)
    app = mcp_app(build_server(probe, fake_clock), max_request_duration=None)
    response = await call(app, "tools/call", tool("remaining", after=after))
    assert response.result["structuredContent"]["result"] is None


async def test_a_fast_call_is_not_affected(
    caplog: pytest.LogCaptureFixture, fake_clock: MockClock
) -> None:
    """A call that returns before its deadline is answered normally; nothing is logged."""
    caplog.set_level(logging.DEBUG, logger=CANCEL_LOGGER)
    start = fake_clock.current_time()
    response = await call(mcp_app(build_server(Probe(), fake_clock)), "tools/call", tool("fast"))
    assert response.result["content"][0]["text"] == "fast"
    assert fake_clock.current_time() == start  # no deadline waited out
    assert cancel_records(caplog, above=logging.NOTSET) == []
