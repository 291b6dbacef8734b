"""Deadlines: `max_request_duration` and per-tool `timeout=` cancel with reason `timeout`,
answer with a clear JSON-RPC error, and are never extended by progress."""

from __future__ import annotations

import logging
import time

import anyio
import pytest
from opentelemetry.trace import StatusCode

from mcp_asgi import CancelReason, CancelToken, Context, McpServer

from ..helpers import (
    CANCEL_LOGGER,
    Otel,
    Probe,
    attrs,
    cancel_records,
    mcp_app,
    records_for,
    serving,
    wait_for,
)

ACCEPT = {"json": "application/json", "sse": "text/event-stream"}


def build_server(probe: Probe) -> McpServer:
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
        """Holds the event loop for 1 s before its first await, then sleeps 0.3 s."""
        with probe.running(ctx):
            time.sleep(1.0)  # noqa: ASYNC251 - on purpose: no await, so nothing else runs
            await anyio.sleep(0.3)
        return "finished"

    @server.tool()
    async def remaining(ctx: Context) -> float | None:
        """How long the request has left."""
        return ctx.deadline

    @server.tool(timeout=30)
    async def fast() -> str:
        """Returns well within its timeout."""
        return "fast"

    return server


@pytest.mark.parametrize("mode", ["json", "sse"])
async def test_max_request_duration_times_out(
    mode: str, otel: Otel, caplog: pytest.LogCaptureFixture
) -> None:
    """The server's own maximum duration cancels the handler with reason `timeout` and
    answers a JSON-RPC error saying so; the span is an error; one INFO record."""
    caplog.set_level(logging.DEBUG, logger=CANCEL_LOGGER)
    probe = Probe()
    app = mcp_app(build_server(probe), otel, max_request_duration=0.3)
    with serving(app, headers={"accept": ACCEPT[mode]}) as client:
        response = await client.request("tools/call", {"name": "forever"}, id="slow-1")
        await wait_for(probe.exited)
        await otel.wait_span("tools/call forever")
    assert response.status == 200
    assert response.headers["content-type"].startswith(ACCEPT[mode])
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
async def test_the_smaller_deadline_wins(max_request_duration: float, seconds: float) -> None:
    """A tool's `timeout=` and `max_request_duration`: the smaller of the two applies."""
    probe = Probe()
    with serving(mcp_app(build_server(probe), max_request_duration=max_request_duration)) as client:
        response = await client.request("tools/call", {"name": "capped"})
        await wait_for(probe.exited)
    assert response.final["error"]["message"] == f"Request timed out after {seconds} seconds"
    assert probe.reason is CancelReason.TIMEOUT


async def test_progress_does_not_extend_the_deadline() -> None:
    """A handler that keeps reporting progress still times out: the stream carries the
    progress notifications, then ends with the timeout error."""
    probe = Probe()
    with serving(mcp_app(build_server(probe), response_mode="sse")) as client:
        response = await client.request("tools/call", {"name": "chatty"}, progress=True)
        await wait_for(probe.exited)
    *progress, final = response.messages
    assert progress
    assert {m["method"] for m in progress} == {"notifications/progress"}
    assert final["error"]["data"] == {"reason": "timeout"}
    assert probe.reason is CancelReason.TIMEOUT


async def test_the_deadline_counts_from_the_start_not_from_the_first_await() -> None:
    """The request's watcher starts only once the handler first awaits; a handler that
    holds the loop past its timeout before that is still timed out at its first await
    (not a full timeout later, which would let its 0.3 s sleep finish)."""
    probe = Probe()
    with serving(mcp_app(build_server(probe))) as client:
        response = await client.request("tools/call", {"name": "late_to_await"})
        await wait_for(probe.exited)
    assert response.final["error"]["data"] == {"reason": "timeout"}
    assert probe.reason is CancelReason.TIMEOUT


async def test_a_thread_learns_of_the_timeout_through_its_token() -> None:
    """A sync tool's token carries the `timeout` reason; the client gets the error."""
    probe = Probe()
    with serving(mcp_app(build_server(probe))) as client:
        response = await client.request("tools/call", {"name": "grinding"})
        await wait_for(probe.exited)
    assert response.final["error"]["data"] == {"reason": "timeout"}
    assert probe.reason is CancelReason.TIMEOUT


async def test_deadline_is_visible_to_the_handler() -> None:
    """`ctx.deadline` is the time left, or None without a limit."""
    probe = Probe()
    with serving(mcp_app(build_server(probe), max_request_duration=100)) as client:
        left = (await client.call_tool("remaining"))["structuredContent"]["result"]
        assert 0 < left <= 100
    with serving(mcp_app(build_server(probe), max_request_duration=None)) as client:
        assert (await client.call_tool("remaining"))["structuredContent"]["result"] is None


async def test_a_fast_call_is_not_affected(caplog: pytest.LogCaptureFixture) -> None:
    """A call that returns before its deadline is answered normally; nothing is logged."""
    caplog.set_level(logging.DEBUG, logger=CANCEL_LOGGER)
    with serving(mcp_app(build_server(Probe()))) as client:
        assert (await client.call_tool("fast"))["content"][0]["text"] == "fast"
    assert cancel_records(caplog, above=logging.NOTSET) == []
