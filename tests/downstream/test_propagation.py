"""Cancellation reaches a downstream MCP server: an upstream mcp_asgi server (live uvicorn)
whose tool calls a downstream through `Downstream`, the downstream being mcp_asgi over stdio
(a child process) in each era, observed through the probe file its `wait` tool writes."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from mcp_asgi import Context, McpServer
from mcp_asgi.downstream import Downstream
from mcp_asgi.testing import McpTestClient, serve

from ..helpers import eventually, mcp_app
from ..servers import ROOT, free_port, wait_ready
from ..stdio.pipe import SERVER, probe_lines


def child_env(probe: Path) -> dict[str, str]:
    return {"MCP_STDIO_PROBE": str(probe), "PYTHONPATH": str(ROOT), "PATH": os.environ["PATH"]}


def stdio_downstream(probe: Path, mode: str) -> Downstream:
    """The stdio tests' server as a child process."""
    command = ["-m", "mcp_asgi.stdio", SERVER]
    return Downstream.stdio(
        "inner", sys.executable, command, env=child_env(probe), cwd=str(ROOT), mode=mode
    )


@contextmanager
def http_downstream(probe: Path) -> Iterator[str]:
    """The same server over Streamable HTTP, in a uvicorn process of its own; its URL."""
    port = free_port()
    command = [sys.executable, "-m", "uvicorn", "tests.downstream.http_app:app"]
    command += ["--host", "127.0.0.1", "--port", str(port), "--log-level", "warning"]
    process = subprocess.Popen(command, cwd=ROOT, env=child_env(probe))
    try:
        wait_ready(lambda: _accepts(port), "uvicorn")
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(10)


def _accepts(port: int) -> bool:
    with socket.create_connection(("127.0.0.1", port)):
        return True


def gateway(inner: Downstream) -> Any:
    """An upstream app whose `relay` tool calls the downstream's tools."""
    server = McpServer("gateway")

    @server.tool()
    async def relay(tool: str, arguments: dict[str, Any], ctx: Context) -> dict[str, Any]:
        """Call a tool of the downstream."""
        return await inner.call_tool(tool, arguments, ctx)

    @asynccontextmanager
    async def lifespan(app: Any) -> AsyncIterator[None]:
        async with inner:
            yield

    return mcp_app(server, lifespan=lifespan)


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_stdio_downstream(mode: str, tmp_path: Path) -> None:
    """Through a stdio child: a call works, progress is relayed with the upstream's token;
    when the upstream client drops its connection the downstream request is cancelled by
    `notifications/cancelled` with the id minted downstream (its handler sees
    client_notification)."""
    probe = tmp_path / "probe"
    await through_gateway(
        gateway(stdio_downstream(probe, mode)), probe, mode, "client_notification"
    )


@pytest.mark.parametrize(
    ("mode", "reason"), [("2026-07-28", "client_disconnect"), ("legacy", "client_notification")]
)
async def test_http_downstream(mode: str, reason: str, tmp_path: Path) -> None:
    """Through Streamable HTTP (a second uvicorn process): at 2026-07-28 the request's
    stream is closed (the downstream sees client_disconnect); on a 2025-era session
    `notifications/cancelled` is POSTed with the minted id (client_notification)."""
    probe = tmp_path / "probe"
    with http_downstream(probe) as url:
        inner = Downstream.http("inner", url, mode=mode, headers={"x-gateway": "1"})
        await through_gateway(gateway(inner), probe, mode, reason)


async def through_gateway(app: Any, probe: Path, label: str, reason: str) -> None:
    mode = label
    with serve(app) as live:
        client = McpTestClient(live.url + "/mcp")
        answer = await client.call_tool("relay", {"tool": "echo", "arguments": {"text": "hi"}})
        assert answer["structuredContent"]["content"] == [{"type": "text", "text": "hi"}], answer

        params = {"name": "relay", "arguments": {"tool": "count", "arguments": {"n": 2}}}
        async with client.stream("tools/call", params, id="up", progress=True) as stream:
            first = await stream.next_message()
            assert first is not None
            assert first["method"] == "notifications/progress"
            assert first["params"]["progressToken"] == "p-up"

        params = {"name": "relay", "arguments": {"tool": "wait", "arguments": {"label": mode}}}
        async with client.stream("tools/call", params) as stream:
            await eventually(lambda: f"started {mode}" in probe_lines(probe), what="downstream")
            started = anyio.current_time()
            await stream.drop()
        await eventually(lambda: f"cancelled {mode} {reason}" in probe_lines(probe))
        print(f"propagation within {anyio.current_time() - started:.3f}s")
