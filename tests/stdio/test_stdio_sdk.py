"""The official MCP Python SDK client (`mcp` 2.x) drives `python -m mcp_asgi.stdio`, in
2026-07-28 mode (it probes with `server/discover`) and in 2025 mode (`initialize`)."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from mcp import Client, types
from mcp.client.stdio import StdioServerParameters

from ..helpers import eventually
from ..servers import ROOT
from .pipe import probe_lines, server_command, server_env

MODES = ["auto", "legacy"]


def params(probe: Path) -> StdioServerParameters:
    command = server_command()
    return StdioServerParameters(
        command=command[0], args=command[1:], env=server_env(probe), cwd=str(ROOT)
    )


@pytest.mark.parametrize("mode", MODES)
async def test_call_progress_and_cancel(mode: str, tmp_path: Path) -> None:
    """Tools list and answer; progress reaches the callback; cancelling the call sends
    `notifications/cancelled`, which cancels the handler (client_notification) with no
    reply; a cancel naming an unknown id is silence; the pipe serves on."""
    probe = tmp_path / "probe"
    async with Client(params(probe), mode=mode, cache=None) as client:
        tools = await client.list_tools()
        assert [tool.name for tool in tools.tools] == [
            "echo",
            "count",
            "wait",
            "shout",
            "hold",
            "busy",
        ]
        echoed = await client.call_tool("echo", {"text": "hi"})
        assert echoed.content == [types.TextContent(type="text", text="hi")]
        steps: list[float] = []

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            steps.append(progress)

        counted = await client.call_tool("count", {"n": 3}, progress_callback=on_progress)
        assert counted.content == [types.TextContent(type="text", text="counted 3")]
        assert steps == [1, 2, 3]

        async with anyio.create_task_group() as tg:
            tg.start_soon(client.call_tool, "wait", {"label": mode})
            await eventually(lambda: f"started {mode}" in probe_lines(probe), what="the tool")
            tg.cancel_scope.cancel()
        await eventually(lambda: f"cancelled {mode} client_notification" in probe_lines(probe))

        await client.session.send_notification(
            types.CancelledNotification(params=types.CancelledNotificationParams(request_id=987))
        )
        again = await client.call_tool("echo", {"text": "still here"})
        assert again.content == [types.TextContent(type="text", text="still here")]


@pytest.mark.parametrize("mode", MODES)
async def test_leaving_cancels_everything_in_flight(mode: str, tmp_path: Path) -> None:
    """When the client goes (its stdin to the server closes), every request in flight is
    cancelled and the server exits by itself."""
    probe = tmp_path / "probe"
    async with (
        Client(params(probe), mode=mode, cache=None) as client,
        anyio.create_task_group() as tg,
    ):
        for label in ("x", "y"):
            tg.start_soon(client.call_tool, "wait", {"label": label})
        await eventually(lambda: len(probe_lines(probe)) == 2, what="two tools to start")
        tg.cancel_scope.cancel()
    lines = probe_lines(probe)
    assert sorted(line.split()[1] for line in lines if line.startswith("cancelled")) == ["x", "y"]
