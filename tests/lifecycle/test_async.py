"""Async handlers stop through the request scope: at any await, at `ctx.checkpoint()` in
CPU loops, and inside downstream HTTP calls, which are aborted with them."""

from __future__ import annotations

import threading
from typing import Any

import httpx

from mcp_asgi import CancelReason, Context, McpServer
from mcp_asgi.testing import serve

from ..helpers import Probe, drop_mid_call, mcp_app, serving, wait_for


class Upstream:
    """A slow upstream HTTP service: never answers, and records when its client goes."""

    def __init__(self) -> None:
        self.called = threading.Event()
        self.client_gone = threading.Event()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        self.called.set()
        while (await receive())["type"] != "http.disconnect":
            pass
        self.client_gone.set()


def build_server(probe: Probe) -> McpServer:
    server = McpServer("async")

    @server.tool()
    async def fetch(url: str, ctx: Context) -> str:
        """Calls a downstream service with httpx."""
        with probe.running(ctx):
            async with httpx.AsyncClient(timeout=60) as client:
                response = await client.get(url)
                return response.text

    @server.tool()
    async def crunch(ctx: Context) -> int:
        """A CPU-bound loop that calls `ctx.checkpoint()` between steps."""
        total = 0
        with probe.running(ctx):
            while True:
                total += sum(range(2_000))
                await ctx.checkpoint()

    return server


async def test_a_downstream_http_call_is_aborted_with_the_request() -> None:
    """The client leaves while the handler waits on another service: the handler is
    cancelled and its outgoing connection is closed, which the upstream sees."""
    probe, upstream = Probe(), Upstream()
    app = mcp_app(build_server(probe))
    with serve(upstream, lifespan="off") as slow, serving(app) as client:  # type: ignore[arg-type]
        arguments = {"url": slow.url + "/slow"}
        async with client.stream("tools/call", {"name": "fetch", "arguments": arguments}) as s:
            await wait_for(upstream.called)
            await s.drop()
        await wait_for(probe.exited)
        await wait_for(upstream.client_gone)
    assert probe.reason is CancelReason.CLIENT_DISCONNECT


async def test_checkpoint_stops_a_cpu_loop() -> None:
    """`await ctx.checkpoint()` lets a disconnect reach a CPU-bound loop."""
    probe = Probe()
    with serving(mcp_app(build_server(probe))) as client:
        await drop_mid_call(client, "crunch", probe)
        await wait_for(probe.exited)
        assert (await client.request("tools/list")).status == 200
    assert probe.reason is CancelReason.CLIENT_DISCONNECT
