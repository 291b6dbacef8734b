"""Races around a cancel, each on a real server: the moment of the signal must never matter."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio
import pytest

from mcp_asgi import CancelReason, CancelToken, Context, McpServer

from ..helpers import (
    CANCEL_LOGGER,
    Otel,
    Probes,
    attrs,
    drop_mid_call,
    eventually,
    group_gone,
    mcp_app,
    read_pgid,
    records_for,
    serving,
    shell,
    wait_for,
)


def build_server(probes: Probes, pgid_file: Path) -> McpServer:
    server = McpServer("races")

    @server.tool()
    async def waiting(ctx: Context) -> str:
        """Awaits an event that never comes."""
        with probes["waiting"].running(ctx):
            await anyio.Event().wait()
        return "never"

    @server.tool()
    async def echo(text: str) -> str:
        """Returns at once."""
        return text

    @server.tool()
    def blocking(token: CancelToken) -> str:
        """A sync tool polling its token."""
        with probes["blocking"].running(token):
            while not token.wait(0.01):
                pass
        return "never"

    @server.tool()
    async def command(ctx: Context) -> str:
        """Runs a shell whose child and grandchild sleep."""
        with probes["command"].running(ctx):
            await ctx.run_process(shell(f"echo $$ > {pgid_file}; sleep 60 & sleep 60"))
        return "never"

    @server.tool()
    async def hold(key: str, ctx: Context) -> str:
        """Waits until the test releases `key`'s probe."""
        probe = probes[key]
        with probe.running(ctx):
            await anyio.to_thread.run_sync(probe.release.wait, 30, abandon_on_cancel=True)
        return f"released {key}"

    def failing_cleanup(key: str) -> Callable[[Context], Awaitable[str]]:
        async def handler(ctx: Context) -> str:
            """Its `finally` raises while it is being cancelled."""
            with probes[key].running(ctx):
                try:
                    await anyio.sleep_forever()
                finally:
                    raise RuntimeError("cleanup failed")
            return "never"

        return handler

    server.tool(name="bad_cleanup")(failing_cleanup("bad_cleanup"))
    server.prompt(name="bad_prompt")(failing_cleanup("bad_prompt"))

    @server.tool()
    async def stubborn(ctx: Context) -> str:
        """Swallows the cancellation and keeps working until released."""
        probe = probes["stubborn"]
        probe.started.set()
        try:
            await anyio.sleep_forever()
        except anyio.get_cancelled_exc_class():
            probe.notes.append("swallowed")
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(probe.release.wait, 30)
        probe.exit(ctx.cancel_reason)
        return "finished anyway"

    return server


@pytest.fixture
def probes() -> Probes:
    return Probes()


async def test_cancel_mid_await(
    probes: Probes, pgid_file: Path, otel: Otel, caplog: pytest.LogCaptureFixture
) -> None:
    """A disconnect interrupts an await: the handler's `finally` sees the reason, the span
    and the single INFO record say `exited`."""
    caplog.set_level(logging.DEBUG, logger=CANCEL_LOGGER)
    with serving(mcp_app(build_server(probes, pgid_file), otel)) as client:
        await drop_mid_call(client, "waiting", probes["waiting"], id="mid-await")
        await wait_for(probes["waiting"].exited)
        await otel.wait_span("tools/call waiting")
    assert probes["waiting"].reason is CancelReason.CLIENT_DISCONNECT
    assert attrs(otel.span("tools/call waiting"))["mcp_asgi.cancellation.outcome"] == "exited"
    [record] = records_for(caplog, "mid-await")
    assert record.levelno == logging.INFO


@pytest.mark.parametrize("accept", ["application/json", "text/event-stream"])
async def test_disconnect_right_after_the_final_response(
    probes: Probes, pgid_file: Path, otel: Otel, caplog: pytest.LogCaptureFixture, accept: str
) -> None:
    """Closing the connection as soon as the result arrives is no cancel: no error, nothing
    logged above DEBUG, no cancellation on the spans (repeated to hit the window)."""
    caplog.set_level(logging.DEBUG, logger="mcp_asgi")
    app = mcp_app(build_server(probes, pgid_file), otel)
    with serving(app, headers={"accept": accept}) as client:
        for index in range(30):
            async with client.stream(
                "tools/call", {"name": "echo", "arguments": {"text": "x"}}
            ) as s:
                message = await s.next_message()
                assert message is not None
                assert message["result"]["content"][0]["text"] == "x", index
                await s.drop()
        await eventually(lambda: len(otel.spans.get_finished_spans()) == 30, what="30 spans")
    assert [r for r in caplog.records if r.levelno > logging.DEBUG] == []
    for span in otel.spans.get_finished_spans():
        assert "mcp_asgi.cancellation.reason" not in attrs(span)


async def test_disconnect_during_a_thread_tool(probes: Probes, pgid_file: Path) -> None:
    """The thread is told through its token and the server serves the next call."""
    with serving(mcp_app(build_server(probes, pgid_file))) as client:
        await drop_mid_call(client, "blocking", probes["blocking"])
        await wait_for(probes["blocking"].exited)
        assert (await client.call_tool("echo", {"text": "next"}))["content"][0]["text"] == "next"
    assert probes["blocking"].reason is CancelReason.CLIENT_DISCONNECT


@pytest.mark.usefixtures("subreaper")
async def test_disconnect_during_a_subprocess(probes: Probes, pgid_file: Path) -> None:
    """The process group is gone by the time the handler has exited."""
    with serving(mcp_app(build_server(probes, pgid_file))) as client:
        async with client.stream("tools/call", {"name": "command"}) as s:
            await wait_for(probes["command"].started)
            await eventually(lambda: read_pgid(pgid_file) is not None, what="the pid")
            await s.drop()
        await wait_for(probes["command"].exited)
    pgid = read_pgid(pgid_file)
    assert pgid is not None
    assert group_gone(pgid)
    assert probes["command"].reason is CancelReason.CLIENT_DISCONNECT


async def test_same_request_id_on_two_connections(probes: Probes, pgid_file: Path) -> None:
    """Two in-flight requests with the same JSON-RPC id are separate: dropping one leaves the
    other running to its own result."""
    with serving(mcp_app(build_server(probes, pgid_file))) as client:
        async with (
            client.stream("tools/call", {"name": "hold", "arguments": {"key": "a"}}, id=7) as a,
            client.stream("tools/call", {"name": "hold", "arguments": {"key": "b"}}, id=7) as b,
        ):
            await wait_for(probes["a"].started)
            await wait_for(probes["b"].started)
            await a.drop()
            await wait_for(probes["a"].exited)
            assert not probes["b"].exited.is_set()
            probes["b"].release.set()
            message = await b.next_message()
    assert probes["a"].reason is CancelReason.CLIENT_DISCONNECT
    assert probes["b"].reason is None
    assert message is not None
    assert message["id"] == 7
    assert message["result"]["content"][0]["text"] == "released b"


@pytest.mark.parametrize(
    ("method", "params", "key"),
    [
        ("tools/call", {"name": "bad_cleanup"}, "bad_cleanup"),
        ("prompts/get", {"name": "bad_prompt"}, "bad_prompt"),
    ],
)
async def test_a_failing_finally_does_not_break_the_server(
    probes: Probes,
    pgid_file: Path,
    otel: Otel,
    caplog: pytest.LogCaptureFixture,
    method: str,
    params: dict[str, str],
    key: str,
) -> None:
    """A handler whose cleanup raises during the cancel: the request still ends as a
    clean cancel and the server goes on serving."""
    caplog.set_level(logging.DEBUG, logger="mcp_asgi")
    middleware = mcp_app(build_server(probes, pgid_file), otel)
    with serving(middleware) as client:
        async with client.stream(method, params, id="bad") as s:
            await wait_for(probes[key].started)
            await s.drop()
        await wait_for(probes[key].exited)
        assert (await client.call_tool("echo", {"text": "ok"}))["content"][0]["text"] == "ok"
        await eventually(lambda: not middleware._inflight, what="no request in flight")
    [record] = records_for(caplog, "bad")
    assert getattr(record, "outcome", None) == "exited"
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []


async def test_a_handler_that_swallows_the_cancel_becomes_an_orphan(
    probes: Probes, pgid_file: Path, otel: Otel
) -> None:
    """Catching the cancellation and carrying on: after the grace period it is an orphan,
    counted until it returns; its late result is never written; the server keeps serving."""
    middleware = mcp_app(
        build_server(probes, pgid_file), otel, cancel_grace=0.2, process_kill_grace=0.2
    )
    with serving(middleware) as client:
        await drop_mid_call(client, "stubborn", probes["stubborn"], id="stubborn")
        await otel.wait_span("tools/call stubborn")
        assert (
            attrs(otel.span("tools/call stubborn"))["mcp_asgi.cancellation.outcome"] == "orphaned"
        )
        assert otel.orphans_active() == 1
        assert (await client.call_tool("echo", {"text": "alive"}))["content"][0]["text"] == "alive"

        probes["stubborn"].release.set()
        await wait_for(probes["stubborn"].exited)
        await eventually(lambda: otel.orphans_active() == 0, what="the orphan to return")
        await eventually(lambda: not middleware._inflight, what="no request in flight")
    assert probes["stubborn"].notes == ["swallowed"]
    assert probes["stubborn"].reason is CancelReason.CLIENT_DISCONNECT
