"""The server the limits tests attack, raw-socket helpers, and what the server saw."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import anyio
from anyio.abc import SocketStream

from mcp_asgi import Context, McpMiddleware, McpServer
from mcp_asgi.testing import McpTestClient

from ..helpers import Otel, mcp_app


class Seen:
    """What the tools saw, counted across threads."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.sync_started = 0
        self.slow_started = 0
        self.slow_finished = 0
        self.slow_cancelled = 0

    def bump(self, name: str) -> None:
        with self.lock:
            setattr(self, name, getattr(self, name) + 1)


def limits_app(seen: Seen, otel: Otel | None = None, **settings: Any) -> McpMiddleware:
    """`echo`; `slow` (async, sleeps); `sleepy` (a `def` tool that sleeps, ignoring its
    cancellation as blocking code does)."""
    server = McpServer("limits")

    @server.tool()
    async def echo(text: str) -> str:
        return text

    @server.tool()
    async def slow(seconds: float, ctx: Context) -> str:
        seen.bump("slow_started")
        try:
            await anyio.sleep(seconds)
        except anyio.get_cancelled_exc_class():
            seen.bump("slow_cancelled")
            raise
        seen.bump("slow_finished")
        return "done"

    @server.tool()
    def sleepy(seconds: float) -> str:
        seen.bump("sync_started")
        time.sleep(seconds)
        return "slept"

    @server.resource("note://{name}")
    def note(name: str) -> str:
        return name

    return mcp_app(server, otel, **settings)


def raw_post(client: McpTestClient, body: dict[str, Any], *, keep_alive: bool = False) -> bytes:
    """One POST as bytes, with the standard MCP headers."""
    payload = json.dumps(body).encode()
    head = [f"POST {client.path} HTTP/1.1", f"host: {client.host}:{client.port}"]
    head += [f"{k}: {v}" for k, v in client.headers_for(body).items()]
    head += [f"content-length: {len(payload)}"]
    if not keep_alive:
        head.append("connection: close")
    return ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + payload


async def read_all(sock: SocketStream, limit: float = 10.0) -> bytes:
    """Everything the server sends until it closes the connection."""
    data = b""
    with anyio.fail_after(limit):
        while True:
            try:
                data += await sock.receive()
            except (anyio.EndOfStream, anyio.BrokenResourceError):
                return data


def status_of(raw: bytes) -> int:
    return int(raw.split(b" ", 2)[1])


def json_body(raw: bytes) -> dict[str, Any]:
    """The JSON body of a complete (non-chunked) response."""
    result: dict[str, Any] = json.loads(raw.split(b"\r\n\r\n", 1)[1])
    return result
