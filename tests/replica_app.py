"""The app the replica tests run in two worker processes sharing Redis (MCP_BUS_URL): a
2025-era session opened on one is served by the other. POST /notify announces a change of
the tools (on every replica, through the Redis bus)."""

from __future__ import annotations

from typing import Any

import anyio
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

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
async def paced(ctx: Context) -> str:
    """Reports progress, works a little, reports again, answers."""
    await ctx.report_progress(1, 2)
    await anyio.sleep(1.0)
    await ctx.report_progress(2, 2)
    return "paced"


async def notify(request: Request) -> JSONResponse:
    await server.notify_tools_changed()
    return JSONResponse({})


@server.tool()
async def polled(ctx: Context) -> str:
    """Closes its stream at once, answers a little later."""
    await ctx.close_stream()
    await anyio.sleep(0.3)
    return "polled"


app = mcp_app(server, routes=[Route("/notify", notify, methods=["POST"])])
