"""A downstream whose lists change: `grow` registers a tool, a prompt and a resource
(`grown://<name>`) named after its argument (the server announces each change), `touch`
announces an update of a resource; the
resource `slow://wait` and the prompt `slow` wait until cancelled, writing `started <what>`
and `cancelled <what> <reason>` to the file `MCP_STDIO_PROBE` names. `python -m
mcp_asgi.stdio tests.downstream.changing_server:server`, for the list-change relays and
the cancellation of a mounted read or get."""

from __future__ import annotations

import os
from pathlib import Path

import anyio

from mcp_asgi import Context, McpServer

server = McpServer("changing")


@server.tool()
async def grow(name: str) -> str:
    """Register a tool, a prompt and a resource called `name`."""

    async def added() -> str:
        return name

    server.tool(name=name, description="Added by grow.")(added)
    server.prompt(name=name, description="Added by grow.")(added)
    server.resource(f"grown://{name}", name=name, description="Added by grow.")(added)
    return f"added {name}"


@server.tool()
async def touch(uri: str) -> str:
    """Announce that the resource at `uri` changed."""
    await server.notify_resource_updated(uri)
    return f"touched {uri}"


@server.resource("slow://wait")
async def slow_resource(ctx: Context) -> str:
    """Wait until cancelled."""
    return await _wait("resource", ctx)


@server.prompt()
async def slow(ctx: Context) -> str:
    """Wait until cancelled."""
    return await _wait("prompt", ctx)


async def _wait(what: str, ctx: Context) -> str:
    _probe(f"started {what}")
    try:
        await anyio.sleep_forever()
    finally:
        _probe(f"cancelled {what} {ctx.cancel_reason.value if ctx.cancel_reason else None}")
    return "never"


def _probe(line: str) -> None:
    probe = os.environ.get("MCP_STDIO_PROBE")
    if probe:
        with Path(probe).open("a") as out:
            out.write(line + "\n")
