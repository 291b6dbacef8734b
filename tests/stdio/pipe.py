"""A stdio MCP server in a child process, driven line by line: what the tests of the
transport read and write, and the probe file its `wait` tool writes to."""

from __future__ import annotations

import json
import os
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
from anyio.abc import Process
from anyio.streams.buffered import BufferedByteReceiveStream

from ..servers import ROOT

SERVER = "tests.stdio.stdio_server:server"
META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}


def server_command(spec: str = SERVER) -> list[str]:
    """argv serving `spec` over stdio."""
    return [sys.executable, "-m", "mcp_asgi.stdio", spec, "--log-level", "INFO"]


def server_env(probe: Path, **settings: str) -> dict[str, str]:
    """The child's environment: ours, plus the probe file its `wait` tool writes to, and
    `settings` as `MCP_*` variables."""
    env = {f"MCP_{name.upper()}": value for name, value in settings.items()}
    return {**os.environ, "MCP_STDIO_PROBE": str(probe), "PYTHONPATH": str(ROOT), **env}


def probe_lines(probe: Path) -> list[str]:
    """What the `wait` tool wrote: `started <label>`, `cancelled <label> <reason>`."""
    return probe.read_text().splitlines() if probe.exists() else []


def call(
    request_id: int | str, tool: str, meta: dict[str, Any] | None = None, **args: Any
) -> dict[str, Any]:
    """A 2026-07-28 `tools/call` request."""
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {"name": tool, "arguments": args, "_meta": {**META, **(meta or {})}},
    }


def cancelled(request_id: Any) -> dict[str, Any]:
    """The `notifications/cancelled` naming `request_id`."""
    return {
        "jsonrpc": "2.0",
        "method": "notifications/cancelled",
        "params": {"requestId": request_id},
    }


class Pipe:
    """The child's stdin and stdout, one JSON message a line."""

    def __init__(self, process: Process) -> None:
        self.process = process
        assert process.stdout is not None
        assert process.stdin is not None
        self._out = BufferedByteReceiveStream(process.stdout)
        self.seen: list[dict[str, Any]] = []

    async def send(self, *messages: dict[str, Any] | bytes) -> None:
        """Write the messages, one a line, in one write."""
        lines = [m if isinstance(m, bytes) else json.dumps(m).encode() for m in messages]
        assert self.process.stdin is not None
        await self.process.stdin.send(b"".join(line + b"\n" for line in lines))

    async def receive(self, limit: float = 10.0) -> dict[str, Any]:
        """The next message the server writes."""
        with anyio.fail_after(limit):
            line = await self._out.receive_until(b"\n", 1 << 20)
        message: dict[str, Any] = json.loads(line)
        self.seen.append(message)
        return message

    async def until_reply(self, request_id: Any, limit: float = 10.0) -> dict[str, Any]:
        """Read until the response to `request_id`; everything read is in `seen`."""
        while True:
            message = await self.receive(limit)
            if message.get("id") == request_id and "method" not in message:
                return message

    async def close_stdin(self) -> None:
        assert self.process.stdin is not None
        await self.process.stdin.aclose()

    def terminate(self) -> None:
        self.process.send_signal(signal.SIGTERM)


@asynccontextmanager
async def stdio_server(probe: Path, spec: str = SERVER, **settings: str) -> AsyncIterator[Pipe]:
    """The server running in a child process (with `settings` as `MCP_*` variables);
    killed at the end if it is still there."""
    process = await anyio.open_process(
        server_command(spec), env=server_env(probe, **settings), cwd=ROOT, stderr=None
    )
    try:
        yield Pipe(process)
    finally:
        if process.returncode is None:
            process.kill()
        with anyio.move_on_after(5):
            await process.wait()
        await process.aclose()
