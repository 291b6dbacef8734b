"""Thread work: told through the CancelToken, abandoned at once, an orphan if it lingers."""

from __future__ import annotations

import logging
import math
import threading

import anyio
import pytest
from trio.testing import MockClock

from mcp_asgi import CancelReason, CancelToken, Context, McpServer, RequestCancelled
from mcp_asgi.lifecycle.cancel import signal_token

from ..helpers import (
    CANCEL_LOGGER,
    Otel,
    Probe,
    attrs,
    call,
    eventually,
    mcp_app,
    records_for,
    serving,
    wait_for,
    wire_for,
)


def build_server(probe: Probe) -> McpServer:
    server = McpServer("threads")

    @server.tool()
    def polite(token: CancelToken) -> str:
        """A sync tool that polls its token between 10 ms steps."""
        probe.token = token
        with probe.running(token):
            while not token.wait(0.01):
                pass
            token.raise_if_cancelled()
        return "never"

    @server.tool()
    async def offload(ctx: Context) -> str:
        """An async tool handing blocking work to a thread with `ctx.run_sync`."""

        def work(token: CancelToken, steps: int) -> int:
            done = 0
            with probe.running(token):
                while done < steps and not token.cancelled:
                    token.wait(0.01)
                    done += 1
            return done

        count = await ctx.run_sync(work, ctx.cancel_token, 100_000)
        probe.notes.append("async code after the thread ran")
        return str(count)

    @server.tool()
    def deaf() -> str:
        """A sync tool that ignores cancellation until the test releases it."""
        probe.started.set()
        probe.release.wait(30)
        probe.exit(None)
        return "finally"

    @server.tool()
    def quick(text: str) -> str:
        """A sync tool that returns at once."""
        return text.upper()

    @server.tool()
    async def raises_in_thread(ctx: Context) -> str:
        """A thread that raises: the error reaches the handler."""

        def fail() -> None:
            raise KeyError("missing")

        try:
            await ctx.run_sync(fail)
        except KeyError:
            return "caught"
        return "no error"

    return server


@pytest.mark.parametrize("mode", ["json", "sse"])
@pytest.mark.parametrize("tool", ["polite", "offload"])
async def test_a_thread_stops_with_its_token_and_the_request_exits(
    otel: Otel, tool: str, mode: str
) -> None:
    """A disconnect tells a sync tool's thread, or one run with `ctx.run_sync`, via its token,
    in JSON and SSE mode."""
    probe = Probe()
    app = mcp_app(
        build_server(probe), otel, cancel_grace=5, response_mode=mode, keepalive_interval=0.05
    )
    with serving(app) as client:
        async with client.stream("tools/call", {"name": tool, "arguments": {}}) as s:
            await wait_for(probe.started)
            if mode == "sse":  # a keep-alive has opened the stream: drop it mid-stream
                await s.read_head()
                assert s.headers["content-type"] == "text/event-stream"
            await s.drop()
        await wait_for(probe.exited)
        await otel.wait_span(f"tools/call {tool}")
    assert probe.reason is CancelReason.CLIENT_DISCONNECT
    assert probe.notes == []  # after the thread's run_sync, the handler ran no code
    assert attrs(otel.span(f"tools/call {tool}"))["mcp_asgi.cancellation.outcome"] == "exited"
    assert otel.orphans_active() == 0


@pytest.mark.fake_clock
async def test_a_thread_past_the_grace_period_is_an_orphan(
    otel: Otel, caplog: pytest.LogCaptureFixture, fake_clock: MockClock
) -> None:
    """A thread that ignores its token is an orphan after `cancel_grace`: the span ends with
    outcome `orphaned`, the gauge counts it until it really returns, one log record says so,
    and the server keeps serving meanwhile.

    On the fake clock: the request ends a minute of loop time after the disconnect (its
    grace period), at once; then the clock follows real time while threads work."""
    caplog.set_level(logging.DEBUG, logger=CANCEL_LOGGER)
    probe = Probe()
    middleware = mcp_app(build_server(probe), otel, cancel_grace=60, max_request_duration=None)
    wire = wire_for("tools/call", {"name": "deaf", "arguments": {}}, request_id="orphan-1")
    async with anyio.create_task_group() as tg:
        tg.start_soon(wire.run, middleware)
        await wait_for(probe.started)
        left = fake_clock.current_time()
        wire.disconnect()
    assert fake_clock.current_time() - left == pytest.approx(60)
    assert attrs(otel.span("tools/call deaf"))["mcp_asgi.cancellation.outcome"] == "orphaned"
    assert otel.orphans_active() == 1

    fake_clock.autojump_threshold, fake_clock.rate = math.inf, 1.0  # real time from here on
    result = await call(middleware, "tools/call", {"name": "quick", "arguments": {"text": "x"}})
    assert result.result["content"][0]["text"] == "X"
    assert not probe.exited.is_set()

    probe.release.set()
    await wait_for(probe.exited)
    await eventually(lambda: otel.orphans_active() == 0, what="the orphan to be uncounted")
    await eventually(lambda: not middleware._inflight, what="no request in flight")
    records = records_for(caplog, "orphan-1")
    assert len(records) == 1
    assert records[0].levelno == logging.INFO
    assert getattr(records[0], "outcome", None) == "orphaned"
    assert getattr(records[0], "tool", None) == "deaf"


async def test_thread_errors_and_results_pass_through() -> None:
    """Without a cancel, run_sync returns the result or raises the thread's exception."""
    with serving(mcp_app(build_server(Probe()))) as client:
        assert (await client.call_tool("quick", {"text": "a"}))["content"][0]["text"] == "A"
        result = await client.call_tool("raises_in_thread")
        assert result["content"][0]["text"] == "caught"


def test_token_basics() -> None:
    """The token starts clear; once set it reports its reason and raises RequestCancelled."""
    token = CancelToken()
    assert not token.cancelled
    assert token.reason is None
    token.raise_if_cancelled()
    assert not token.wait(0)
    signal_token(token, CancelReason.TIMEOUT)
    assert token.cancelled
    assert token.wait(0)
    with pytest.raises(RequestCancelled) as caught:
        token.raise_if_cancelled()
    assert caught.value.reason is CancelReason.TIMEOUT


def test_token_wakes_a_waiting_thread() -> None:
    """`token.wait()` returns as soon as the token is set from another thread."""
    token = CancelToken()
    woke = threading.Event()

    def waiter() -> None:
        if token.wait(30):
            woke.set()

    thread = threading.Thread(target=waiter)
    thread.start()
    signal_token(token, CancelReason.CLIENT_DISCONNECT)
    thread.join(10)
    assert woke.is_set()
