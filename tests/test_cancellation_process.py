"""Subprocesses die with their request: the whole process group, grandchildren included."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from mcp_asgi import CancelReason, Context, McpServer
from mcp_asgi.testing import McpTestClient, serve

from .cancellation_helpers import (
    Probe,
    build_app,
    eventually,
    group_gone,
    read_pgid,
    shell,
    subreaper,
    wait_for,
)

__all__ = ["subreaper"]
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
        probe.started.set()
        try:
            await ctx.run_process(shell(background))
        finally:
            probe.exit(ctx.cancel_reason)
        return "never"

    @server.tool()
    async def stubborn(ctx: Context) -> str:
        """A process group that ignores SIGTERM: only SIGKILL stops it."""
        probe.started.set()
        try:
            await ctx.run_process(shell(f"trap '' TERM; {background}"))
        finally:
            probe.exit(ctx.cancel_reason)
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

    @server.tool(timeout=0.5)
    async def slow_command(ctx: Context) -> str:
        """Runs past the tool's timeout."""
        probe.started.set()
        try:
            await ctx.run_process(shell(background))
        finally:
            probe.exit(ctx.cancel_reason)
        return "never"

    return server


@pytest.fixture
def probe() -> Probe:
    return Probe()


@pytest.fixture
def pgid_file(tmp_path: Path) -> Path:
    return tmp_path / "pgid"


async def test_run_process_returns_output(probe: Probe, pgid_file: Path) -> None:
    """A command that finishes gives its exit status, stdout and stderr; input is sent."""
    app, _ = build_app(build_server(probe, pgid_file))
    with serve(app) as server:
        client = McpTestClient(server.url + "/mcp")
        result = await client.call_tool("run", {"argv": shell("cat; echo err >&2; exit 2")})
    assert result["structuredContent"] == {"code": 2, "out": "typed", "err": "err\n"}


async def test_run_process_check_raises(probe: Probe, pgid_file: Path) -> None:
    """check=True turns a non-zero exit into an error the tool reports."""
    app, _ = build_app(build_server(probe, pgid_file))
    with serve(app) as server:
        client = McpTestClient(server.url + "/mcp")
        result = await client.call_tool("run_checked")
    assert result["isError"] is True
    assert "CalledProcessError" in result["content"][0]["text"]


async def test_stream_process_yields_lines(probe: Probe, pgid_file: Path) -> None:
    """The streaming form yields stdout lines without line endings; stderr is discarded."""
    app, _ = build_app(build_server(probe, pgid_file))
    with serve(app) as server:
        client = McpTestClient(server.url + "/mcp")
        result = await client.call_tool("lines")
    assert result["structuredContent"] == {"result": ["a", "b", "c"]}


@pytest.mark.parametrize("tool", ["sleepers", "stubborn"])
async def test_disconnect_kills_the_whole_group(probe: Probe, pgid_file: Path, tool: str) -> None:
    """A disconnect stops the child and its grandchild: SIGTERM to the group, and SIGKILL
    for a group that ignores SIGTERM; the handler returns only once the group is gone."""
    app, _ = build_app(build_server(probe, pgid_file), process_kill_grace=0.3)
    with serve(app) as server:
        client = McpTestClient(server.url + "/mcp")
        async with client.stream("tools/call", {"name": tool, "arguments": {}}) as s:
            await wait_for(probe.started)
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
    app, _ = build_app(build_server(probe, pgid_file), response_mode="sse")
    with serve(app) as server:
        client = McpTestClient(server.url + "/mcp")
        async with client.stream(
            "tools/call", {"name": "follow", "arguments": {}}, progress=True
        ) as s:
            await wait_for(probe.started)
            message = await s.next_message()
            assert message is not None
            assert message["method"] == "notifications/progress"
            await s.drop()
        await wait_for(probe.exited)
        assert probe.pgid is not None
        assert probe.reason is CancelReason.CLIENT_DISCONNECT
        assert group_gone(probe.pgid)


async def test_a_forgotten_stream_is_stopped_when_the_handler_exits(
    probe: Probe, pgid_file: Path
) -> None:
    """A handler that stops iterating without closing the stream still leaves nothing."""
    app, _ = build_app(build_server(probe, pgid_file))
    with serve(app) as server:
        client = McpTestClient(server.url + "/mcp")
        result = await client.call_tool("first_line")
    assert result["content"][0]["text"] == "first"
    assert probe.pgid is not None
    assert group_gone(probe.pgid)


async def test_leftovers_are_stopped_when_the_command_exits(probe: Probe, pgid_file: Path) -> None:
    """A process left running in the group after the command exits is stopped too."""
    app, _ = build_app(build_server(probe, pgid_file))
    with serve(app) as server:
        client = McpTestClient(server.url + "/mcp")
        result = await client.call_tool("leaves_behind")
    assert result["content"][0]["text"] == "done"
    assert probe.pgid is not None
    assert group_gone(probe.pgid)


async def test_timeout_kills_the_group(probe: Probe, pgid_file: Path) -> None:
    """A tool timeout cancels a running command like a disconnect does, and says so."""
    app, _ = build_app(build_server(probe, pgid_file), process_kill_grace=0.3)
    with serve(app) as server:
        client = McpTestClient(server.url + "/mcp")
        response = await client.request("tools/call", {"name": "slow_command", "arguments": {}})
        await wait_for(probe.exited)
    assert response.final["error"]["data"] == {"reason": "timeout"}
    assert probe.reason is CancelReason.TIMEOUT
    pgid = read_pgid(pgid_file)
    assert pgid is not None
    assert group_gone(pgid)


def test_argv_must_not_be_a_string() -> None:
    """A command line as one string is refused (no shell is involved)."""
    from mcp_asgi._process import ProcessLines

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
