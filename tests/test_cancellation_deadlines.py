"""Deadlines: `max_request_duration` and per-tool `timeout=` cancel with reason `timeout`,
answer with a clear JSON-RPC error, and are never extended by progress."""

from __future__ import annotations

import logging

import anyio
import pytest
from opentelemetry.trace import StatusCode

from mcp_asgi import CancelReason, CancelToken, Context, McpServer
from mcp_asgi.testing import McpTestClient, serve

from .cancellation_helpers import (
    CANCEL_LOGGER,
    Probe,
    build_app,
    eventually,
    has_span,
    records_for,
    span_of,
    wait_for,
)
from .conftest import Otel

ACCEPT = {"json": "application/json", "sse": "text/event-stream"}


def build_server(probe: Probe) -> McpServer:
    server = McpServer("deadlines")

    @server.tool()
    async def forever(ctx: Context) -> str:
        """Sleeps past any deadline."""
        probe.started.set()
        try:
            await anyio.sleep_forever()
        finally:
            probe.exit(ctx.cancel_reason)
        return "never"

    @server.tool(timeout=0.3)
    async def capped(ctx: Context) -> str:
        """Has its own 0.3 s timeout."""
        try:
            await anyio.sleep_forever()
        finally:
            probe.exit(ctx.cancel_reason)
        return "never"

    @server.tool(timeout=0.4)
    async def chatty(ctx: Context) -> str:
        """Reports progress every 20 ms: progress does not extend the deadline."""
        count = 0
        try:
            while True:
                count += 1
                await ctx.report_progress(count)
                await anyio.sleep(0.02)
        finally:
            probe.exit(ctx.cancel_reason)

    @server.tool(timeout=0.3)
    def grinding(token: CancelToken) -> str:
        """A thread that polls its token until the timeout tells it to stop."""
        try:
            while not token.wait(0.01):
                pass
        finally:
            probe.exit(token.reason)
        return "never"

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
    app, _ = build_app(build_server(probe), otel, max_request_duration=0.3)
    with serve(app) as server:
        client = McpTestClient(server.url + "/mcp", headers={"accept": ACCEPT[mode]})
        response = await client.request("tools/call", {"name": "forever"}, id="slow-1")
        await wait_for(probe.exited)
        await eventually(lambda: has_span(otel, "forever"), what="the span")
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
    span = span_of(otel, "forever")
    assert span.status.status_code is StatusCode.ERROR
    attributes = dict(span.attributes or {})
    assert attributes["mcp_asgi.cancellation.reason"] == "timeout"
    assert attributes["error.type"] == "timeout"
    [record] = records_for(caplog, "slow-1")
    assert record.levelno == logging.INFO
    assert getattr(record, "reason", None) == "timeout"


async def test_tool_timeout_applies_below_the_maximum() -> None:
    """A tool's `timeout=` caps it below `max_request_duration`."""
    probe = Probe()
    app, _ = build_app(build_server(probe), max_request_duration=60)
    with serve(app) as server:
        client = McpTestClient(server.url + "/mcp")
        response = await client.request("tools/call", {"name": "capped"})
        await wait_for(probe.exited)
    assert response.final["error"]["message"] == "Request timed out after 0.3 seconds"
    assert probe.reason is CancelReason.TIMEOUT


async def test_the_maximum_applies_below_a_longer_tool_timeout() -> None:
    """The smaller of the two deadlines wins."""
    probe = Probe()
    app, _ = build_app(build_server(probe), max_request_duration=0.2)
    with serve(app) as server:
        client = McpTestClient(server.url + "/mcp")
        response = await client.request("tools/call", {"name": "capped"})
        await wait_for(probe.exited)
    assert response.final["error"]["message"] == "Request timed out after 0.2 seconds"


async def test_progress_does_not_extend_the_deadline() -> None:
    """A handler that keeps reporting progress still times out: the stream carries the
    progress notifications, then ends with the timeout error."""
    probe = Probe()
    app, _ = build_app(build_server(probe), response_mode="sse")
    with serve(app) as server:
        client = McpTestClient(server.url + "/mcp")
        response = await client.request("tools/call", {"name": "chatty"}, progress=True)
        await wait_for(probe.exited)
    *progress, final = response.messages
    assert progress
    assert {m["method"] for m in progress} == {"notifications/progress"}
    assert final["error"]["data"] == {"reason": "timeout"}
    assert probe.reason is CancelReason.TIMEOUT


async def test_a_thread_learns_of_the_timeout_through_its_token() -> None:
    """A sync tool's token carries the `timeout` reason; the client gets the error."""
    probe = Probe()
    app, _ = build_app(build_server(probe))
    with serve(app) as server:
        client = McpTestClient(server.url + "/mcp")
        response = await client.request("tools/call", {"name": "grinding"})
        await wait_for(probe.exited)
    assert response.final["error"]["data"] == {"reason": "timeout"}
    assert probe.reason is CancelReason.TIMEOUT


async def test_deadline_is_visible_to_the_handler() -> None:
    """`ctx.deadline` is the time left, or None without a limit."""
    probe = Probe()
    limited, _ = build_app(build_server(probe), max_request_duration=100)
    unlimited, _ = build_app(build_server(probe), max_request_duration=None)
    with serve(limited) as server:
        client = McpTestClient(server.url + "/mcp")
        left = (await client.call_tool("remaining"))["structuredContent"]["result"]
        assert 0 < left <= 100
    with serve(unlimited) as server:
        client = McpTestClient(server.url + "/mcp")
        assert (await client.call_tool("remaining"))["structuredContent"]["result"] is None


async def test_a_fast_call_is_not_affected(caplog: pytest.LogCaptureFixture) -> None:
    """A call that returns before its deadline is answered normally; nothing is logged."""
    caplog.set_level(logging.DEBUG, logger=CANCEL_LOGGER)
    probe = Probe()
    app, _ = build_app(build_server(probe))
    with serve(app) as server:
        client = McpTestClient(server.url + "/mcp")
        assert (await client.call_tool("fast"))["content"][0]["text"] == "fast"
    assert [r for r in caplog.records if r.name == CANCEL_LOGGER] == []
