"""A mounted downstream's life with the app's: its name collisions refused at start, its
child restarted with backoff after it dies (calls in flight get a clear error), its
`list_changed` relayed, no child left behind (server-everything over stdio)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from starlette.types import Message

from mcp_asgi import McpServer
from mcp_asgi.downstream import Downstream, DownstreamTools
from mcp_asgi.testing import McpStream, McpTestClient, serve

from ..helpers import eventually, mcp_app
from ..servers import ROOT
from . import everything
from .everything import LONG, needs_everything
from .test_propagation import stdio_downstream

pytestmark = needs_everything


def colliding(tap: Path) -> McpServer:
    server = McpServer("gateway")

    @server.tool(name="ev_echo")
    async def echo(message: str) -> str:
        """Taken before the downstream's echo."""
        return message

    server.add_source(DownstreamTools(everything.stdio(tap), prefix="ev_"))
    return server


async def test_collision_refused_at_start(tmp_path: Path) -> None:
    """A name the downstream would take twice stops the server's start with a ValueError
    naming it, and the lifespan reports startup.failed with that message; the child it
    started for the check is gone."""
    tap = tmp_path / "tap.jsonl"
    with pytest.raises(ValueError, match=r"'ev_echo' \('echo'\).*prefix="):
        async with colliding(tap).running():
            pass

    app = mcp_app(colliding(tap))
    sent: list[Message] = []
    startup: list[Message] = [{"type": "lifespan.startup"}]

    async def receive() -> Message:
        if not startup:
            await anyio.sleep_forever()
        return startup.pop()

    async def send(message: Message) -> None:
        sent.append(message)

    with anyio.fail_after(20):
        await app({"type": "lifespan", "asgi": {"version": "3.0"}, "state": {}}, receive, send)
    assert [m["type"] for m in sent] == ["lifespan.startup.failed"]
    assert "'ev_echo' ('echo')" in sent[0]["message"]
    await eventually(lambda: everything.processes_of(tap) == [], what="the children to exit")


async def test_skip_keeps_the_first(tmp_path: Path) -> None:
    """on_collision='skip': the decorated tool keeps the name, the others are served. A
    second source on the same downstream selects by annotation (`annotation:<hint>`)."""
    tap = tmp_path / "tap.jsonl"
    server = McpServer("gateway")

    @server.tool(name="ev_echo")
    async def echo(message: str) -> str:
        """Taken before the downstream's echo."""
        return "ours: " + message

    downstream = everything.stdio(tap)
    server.add_source(
        DownstreamTools(downstream, prefix="ev_", include=["echo", "get-sum"], on_collision="skip")
    )
    writers = DownstreamTools(
        downstream, prefix="rw_", include=["echo", "toggle-*"], exclude=["annotation:readOnlyHint"]
    )
    server.add_source(writers)
    with serve(mcp_app(server)) as live:
        client = McpTestClient(live.url + "/mcp")
        answer = await client.call_tool("ev_echo", {"message": "hi"})
        assert answer["content"][0]["text"] == "ours: hi"
        answer = await client.call_tool("ev_get-sum", {"a": 1, "b": 1})
        assert "2" in answer["content"][0]["text"]
        listed = await client.request("tools/list", {})
    names = {tool["name"] for tool in listed.final["result"]["tools"]}
    assert names == {
        "ev_echo",
        "ev_get-sum",
        "rw_toggle-simulated-logging",
        "rw_toggle-subscriber-updates",
    }
    assert len(everything.records(tap, "started")) == 1  # one child for both sources


async def test_child_restarted_with_backoff(tmp_path: Path) -> None:
    """The child killed mid-call: that call answers -32603 naming the downstream; the
    child is reaped and started again (after the backoff), listening clients are told the
    tools may have changed, and the next call works."""
    tap = tmp_path / "tap.jsonl"
    downstream = everything.stdio(tap, backoff=0.2, ping_interval=0.5)
    server = McpServer("gateway")
    server.add_source(DownstreamTools(downstream, include=["echo", LONG]))
    with serve(mcp_app(server)) as live:
        client = McpTestClient(live.url + "/mcp")
        [first] = everything.processes_of(tap)
        params = {"name": f"everything_{LONG}", "arguments": {"duration": 60, "steps": 60}}
        listen = {"notifications": {"toolsListChanged": True}}
        async with (
            client.stream("subscriptions/listen", listen, id="L") as changes,
            client.stream("tools/call", params) as stream,
        ):
            ack = await changes.next_message()
            assert ack is not None
            assert ack["method"] == "notifications/subscriptions/acknowledged"
            await eventually(lambda: len(everything.requests(tap, "tools/call")) == 1)
            os.kill(first, signal.SIGKILL)
            final = await last(stream)
            assert final["error"]["code"] == -32603, final
            assert final["error"]["data"]["downstream"] == "everything"
            assert "unavailable" in final["error"]["message"]
            await eventually(lambda: not everything.exists(first), what="the dead child reaped")
            await eventually(lambda: len(everything.records(tap, "started")) == 2, 15)
            changed = await changes.next_message()
            assert changed is not None
            assert changed["method"] == "notifications/tools/list_changed"
        answer = await client.call_tool("everything_echo", {"message": "again"})
        assert answer["content"][0]["text"] == "Echo: again"
    await eventually(lambda: everything.processes_of(tap) == [], what="the child to exit")


async def last(stream: McpStream) -> dict[str, Any]:
    """The stream's last message (its response)."""
    final: dict[str, Any] | None = None
    while (message := await stream.next_message()) is not None:
        final = message
    assert final is not None
    return final


@pytest.mark.parametrize("era", ["2025", "2026-07-28"])
async def test_checks_keep_a_healthy_connection(
    era: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The connection check every ping_interval (ping on a 2025-era connection:
    server-everything; server/discover at 2026-07-28: mcp_asgi over stdio) passes on a
    healthy child: no reconnection, calls work."""
    if era == "2025":
        downstream = everything.stdio(tmp_path / "tap.jsonl", ping_interval=0.05)
        tool, arguments = "echo", {"message": "hi"}
    else:
        downstream = stdio_downstream(tmp_path / "probe", "auto")
        downstream._ping_interval = 0.05
        tool, arguments = "echo", {"text": "hi"}
    async with downstream:
        await downstream.call_tool(tool, arguments)
        await anyio.sleep(0.5)  # about ten checks
        answer = await downstream.call_tool(tool, arguments)
    assert not answer.get("isError"), answer
    assert [r for r in caplog.records if r.name == "mcp_asgi.downstream"] == []
    if era == "2025":
        pings = everything.requests(tmp_path / "tap.jsonl", "ping")
        assert len(pings) >= 3, pings


async def test_per_downstream_timeout(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A downstream's `timeout`: the call past it is cancelled downstream (the request was
    running, its AbortSignal fired) and the tool answers isError (TimeoutError), logged."""
    tap = tmp_path / "tap.jsonl"
    server = McpServer("gateway")
    server.add_source(DownstreamTools(everything.stdio(tap, timeout=0.5), include=[LONG]))
    with serve(mcp_app(server)) as live:
        client = McpTestClient(live.url + "/mcp")
        arguments = {"duration": 60, "steps": 60}
        answer = await client.call_tool(f"everything_{LONG}", arguments)
        assert answer["isError"] is True
        assert "TimeoutError" in answer["content"][0]["text"]
        [call] = everything.requests(tap, "tools/call")
        await eventually(lambda: everything.records(tap, "cancelled") != [], what="the cancel")
    [cancelled] = everything.records(tap, "cancelled")
    assert cancelled["id"] == call["id"]
    assert cancelled["running"], cancelled
    assert cancelled["aborted"], cancelled


async def test_list_changes_followed_at_2026() -> None:
    """A 2026-07-28 downstream (mcp_asgi over stdio) announces tool changes only on a
    `subscriptions/listen` stream: the gateway listens, and its own listening client is
    told when a downstream tool adds another; the next tools/list shows it."""
    command = ["-m", "mcp_asgi.stdio", "tests.downstream.changing_server:server"]
    env = {"PYTHONPATH": str(ROOT), "PATH": os.environ["PATH"]}
    downstream = Downstream.stdio("inner", sys.executable, command, env=env, cwd=str(ROOT))
    server = McpServer("gateway")
    server.add_source(DownstreamTools(downstream))
    with serve(mcp_app(server)) as live:
        client = McpTestClient(live.url + "/mcp")
        listen = {"notifications": {"toolsListChanged": True}}
        async with client.stream("subscriptions/listen", listen, id="L") as changes:
            ack = await changes.next_message()
            assert ack is not None
            assert ack["method"] == "notifications/subscriptions/acknowledged"
            assert await client.call_tool("inner_grow", {"name": "fresh"})
            changed = await changes.next_message()
            assert changed is not None
            assert changed["method"] == "notifications/tools/list_changed"
        listed = await client.request("tools/list", {})
        names = {tool["name"] for tool in listed.final["result"]["tools"]}
        assert names == {"inner_grow", "inner_touch", "inner_fresh"}
        assert (await client.call_tool("inner_fresh", {}))["content"][0]["text"] == "fresh"


def test_collision_refused_at_start_over_stdio(tmp_path: Path) -> None:
    """`python -m mcp_asgi.stdio` of a server whose source refuses a name: exit status 1,
    the reason on stderr, no traceback, no child left."""
    tap = tmp_path / "tap.jsonl"
    command = [sys.executable, "-m", "mcp_asgi.stdio", "tests.downstream.colliding_server:server"]
    env = {**os.environ, "EVERYTHING_TAP": str(tap)}
    done = subprocess.run(
        command,
        cwd=ROOT,
        env=env,
        stdin=subprocess.PIPE,
        capture_output=True,
        text=True,
        timeout=25,
    )
    assert done.returncode == 1, done.stderr
    assert "cannot start: DownstreamTools: tool names already taken: 'everything_echo'" in (
        done.stderr
    )
    assert "Traceback" not in done.stderr
    assert everything.processes_of(tap) == []
