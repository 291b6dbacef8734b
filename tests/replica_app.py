"""The app the replica tests run in two worker processes sharing Redis (MCP_BUS_URL): a
2025-era session opened on one is served by the other."""

from __future__ import annotations

from typing import Any

import anyio

from mcp_asgi import Context, McpServer

from .helpers import mcp_app

server = McpServer("replicas")


@server.tool()
async def wait(ctx: Context) -> str:
    """Reports progress, then waits until cancelled."""
    await ctx.report_progress(1, 2)
    await anyio.sleep_forever()
    return "never"


@server.tool()
async def ask(ctx: Context) -> dict[str, Any]:
    """Elicits a name, answers with it."""
    answer = await ctx.elicit("Who are you?", {"type": "object", "properties": {}})
    return {"action": answer.action, "content": answer.content}


@server.tool()
async def polled(ctx: Context) -> str:
    """Closes its stream at once, answers a little later."""
    await ctx.close_stream()
    await anyio.sleep(0.3)
    return "polled"


app = mcp_app(server)
