"""Subprocesses die with their request: the whole process group, grandchildren included."""

from __future__ import annotations

import subprocess
from pathlib import Path

import anyio
import pytest

from mcp_asgi import CancelReason, Context, McpServer

from ..helpers import (
    Probe,
    drop_mid_call,
    eventually,
    group_gone,
    mcp_app,
    read_pgid,
    serving,
    shell,
    wait_for,
)

pytestmark = pytest.mark.usefixtures("subreaper")


def build_server(probe: Probe, pgid_file: Path) -> McpServer:
    server = McpServer("process")
    background = f"echo $$ > {pgid_file}; sleep 60 & sleep 60"

    @server.tool()
    async def run(argv: list[str], ctx: Context) -> dict[str, object]:
        """Runs a command to completion."""
        done = await ctx.run_process(argv, check=False, input=b"typed")
        return {"code": done.returncode, "out": done.stdout.decode(), "err": done.stderr.decode()}

    @server.tool()
    async def run_checked(ctx: Context) -> str:
        """Runs a failing command with check=True."""
        await ctx.run_process(["/bin/sh", "-c", "exit 3"])
        return "unreachable"

    @server.tool()
    async def sleepers(ctx: Context) -> str:
        """A shell whose child and grandchild sleep for a minute."""
        with probe.running(ctx):
            await ctx.run_process(shell(background))
        return "never"

    @server.tool()
    async def stubborn(ctx: Context) -> str:
        """A process group that ignores SIGTERM: only SIGKILL stops it."""
        with probe.running(ctx):
            await ctx.run_process(shell(f"trap '' TERM; {background}"))
        return "never"

    @server.tool()
    async def lines(ctx: Context) -> list[str]:
        """Streams the lines of a short command."""
        async with ctx.stream_process(shell("printf 'a\\nb\\r\\nc'; echo oops >&2")) as out:
            return [line async for line in out]

    @server.tool()
    async def follow(ctx: Context) -> str:
        """Streams an endless command, reporting each line as progress."""
        try:
            script = "echo $$; sleep 60 & while true; do echo tick; sleep 0.05; done"
            stream = ctx.stream_process(shell(script))
            count = 0
            async for line in stream:
                if probe.pgid is None:
                    probe.pgid = int(line)
                    probe.started.set()
                count += 1
                await ctx.report_progress(count)
        finally:
            probe.exit(ctx.cancel_reason)
        return "never"

    @server.tool()
    async def first_line(ctx: Context) -> str:
        """Reads one line of an endless command and walks away without closing it."""
        script = "echo $$; sleep 60 & while true; do echo tick; sleep 0.05; done"
        async for line in ctx.stream_process(shell(script)):
            probe.pgid = int(line)
            break
        return "first"

    @server.tool()
    async def leaves_behind(ctx: Context) -> str:
        """A command that exits at once, leaving a background process in its group."""
        done = await ctx.run_process(shell("echo $$; sleep 60 >/dev/null 2>&1 &"))
        probe.pgid = int(done.stdout)
        return "done"

    @server.tool()
    async def leaves_a_job(script: str, ctx: Context) -> str:
        """Runs a shell script that prints its pid and leaves a job running."""
        done = await ctx.run_process(shell(script))
        probe.pgid = int(done.stdout)
        return "done"

    @server.tool(timeout=0.5)
    async def slow_command(ctx: Context) -> str:
        """Runs past the tool's timeout."""
        with probe.running(ctx):
            await ctx.run_process(shell(background))
        return "never"

    return server


@pytest.fixture
def probe() -> Probe:
    return Probe()


async def test_run_process_returns_output(probe: Probe, pgid_file: Path) -> None:
    """A command that finishes gives its exit status, stdout and stderr; input is sent."""
    with serving(mcp_app(build_server(probe, pgid_file))) as client:
        result = await client.call_tool("run", {"argv": shell("cat; echo err >&2; exit 2")})
    assert result["structuredContent"] == {"code": 2, "out": "typed", "err": "err\n"}


async def test_run_process_check_raises(probe: Probe, pgid_file: Path) -> None:
    """check=True turns a non-zero exit into an error the tool reports."""
    with serving(mcp_app(build_server(probe, pgid_file))) as client:
        result = await client.call_tool("run_checked")
    assert result["isError"] is True
    assert "CalledProcessError" in result["content"][0]["text"]


async def test_stream_process_yields_lines(probe: Probe, pgid_file: Path) -> None:
    """The streaming form yields stdout lines without line endings; stderr is discarded."""
    with serving(mcp_app(build_server(probe, pgid_file))) as client:
        result = await client.call_tool("lines")
    assert result["structuredContent"] == {"result": ["a", "b", "c"]}


@pytest.mark.parametrize("mode", ["json", "sse"])
@pytest.mark.parametrize("tool", ["sleepers", "stubborn"])
async def test_disconnect_kills_the_whole_group(
    probe: Probe, pgid_file: Path, tool: str, mode: str
) -> None:
    """A disconnect stops the child and its grandchild, in JSON and SSE mode: SIGTERM to the
    group, and SIGKILL for a group that ignores SIGTERM; the handler returns only once the
    group is gone."""
    app = mcp_app(
        build_server(probe, pgid_file),
        process_kill_grace=0.3,
        response_mode=mode,
        keepalive_interval=0.05,  # SSE: a keep-alive opens the stream before the drop
    )
    with serving(app) as client:
        async with client.stream("tools/call", {"name": tool, "arguments": {}}) as s:
            await wait_for(probe.started)
            if mode == "sse":
                await s.read_head()
                assert s.headers["content-type"] == "text/event-stream"
            await eventually(lambda: read_pgid(pgid_file) is not None, what="the shell's pid")
            pgid = read_pgid(pgid_file)
            assert pgid is not None
            assert not group_gone(pgid)
            await s.drop()
        await wait_for(probe.exited)
        assert probe.reason is CancelReason.CLIENT_DISCONNECT
        assert group_gone(pgid)


async def test_disconnect_stops_a_streamed_process(probe: Probe, pgid_file: Path) -> None:
    """Cancelling while iterating over a process's lines stops its group."""
    with serving(mcp_app(build_server(probe, pgid_file), response_mode="sse")) as client:
        await drop_mid_call(client, "follow", probe, {}, read_progress=True, progress=True)
        await wait_for(probe.exited)
        assert probe.pgid is not None
        assert probe.reason is CancelReason.CLIENT_DISCONNECT
        assert group_gone(probe.pgid)


@pytest.mark.parametrize(
    ("tool", "text"),
    [("first_line", "first"), ("leaves_behind", "done")],
    ids=["a-forgotten-stream", "leftovers-of-an-exited-command"],
)
async def test_what_a_handler_leaves_running_is_stopped(
    probe: Probe, pgid_file: Path, tool: str, text: str
) -> None:
    """What a handler leaves running (an unclosed stream, a leftover process) is stopped."""
    with serving(mcp_app(build_server(probe, pgid_file))) as client:
        result = await client.call_tool(tool)
    assert result["content"][0]["text"] == text
    assert probe.pgid is not None
    assert group_gone(probe.pgid)


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
@pytest.mark.parametrize("output", [">/dev/null 2>&1", ""], ids=["redirected", "inherited"])
async def test_a_command_returns_when_it_exits_though_a_leftover_holds_its_pipes(
    probe: Probe, pgid_file: Path, loop: str, output: str
) -> None:
    """A command that exits leaving a job behind returns at once and the job is stopped,
    also when the job holds the command's stdout (inherited, or on uvloop always: libuv
    leaks the pipes' spare descriptors into every child, so the pipe would stay open until
    the job ends)."""
    with serving(mcp_app(build_server(probe, pgid_file)), loop=loop) as client:
        with anyio.fail_after(10):
            script = f"echo $$; sleep 60 {output} &"
            result = await client.call_tool("leaves_a_job", {"script": script})
    assert result["content"][0]["text"] == "done"
    assert probe.pgid is not None
    assert group_gone(probe.pgid)


async def test_timeout_kills_the_group(probe: Probe, pgid_file: Path) -> None:
    """A tool timeout cancels a running command like a disconnect does, and says so."""
    with serving(mcp_app(build_server(probe, pgid_file), process_kill_grace=0.3)) as client:
        response = await client.request("tools/call", {"name": "slow_command", "arguments": {}})
        await wait_for(probe.exited)
    assert response.final["error"]["data"] == {"reason": "timeout"}
    assert probe.reason is CancelReason.TIMEOUT
    pgid = read_pgid(pgid_file)
    assert pgid is not None
    assert group_gone(pgid)


def test_argv_must_not_be_a_string() -> None:
    """A command line as one string is refused (no shell is involved)."""
    from mcp_asgi.lifecycle.process import ProcessLines

    class Owner:
        def own(self, resource: object) -> None: ...
        def disown(self, resource: object) -> None: ...

    with pytest.raises(TypeError, match="sequence"):
        ProcessLines(
            "echo hi",
            cwd=None,
            env=None,
            stderr=subprocess.DEVNULL,
            check=True,
            encoding="utf-8",
            kill_grace=1,
            owner=Owner(),
        )
