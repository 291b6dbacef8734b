"""The app tests/bus/test_faults.py runs in two worker processes sharing Redis
(MCP_BUS_URL): quick tools (two tasks: one done at once, one after a while), POST /notify
(a change of the tools, on every replica through the bus), GET /health
(`McpMiddleware.health()`, 503 when degraded), and mcp_asgi's records from INFO up on
stderr, one per line: `LEVEL logger message`."""

from __future__ import annotations

import logging

import anyio
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from mcp_asgi import Context, McpServer

from .helpers import log_to_stderr, mcp_app

log_to_stderr(logging.INFO)

server = McpServer("faults")


@server.tool()
async def echo(text: str) -> str:
    """Answers with its text."""
    return text


@server.tool()
async def progress(ctx: Context) -> str:
    """Reports progress (an SSE reply, its events logged in the store), answers."""
    await ctx.report_progress(1, 2)
    await ctx.report_progress(2, 2)
    return "done"


@server.tool(task="required")
async def quick(ctx: Context) -> str:
    """A task that is done at once (its record stays in the store)."""
    await ctx.start_task()
    return "quick"


@server.tool(task="required")
async def slow(seconds: float, ctx: Context) -> str:
    """A task that is done after `seconds` (its outcome is stored then)."""
    await ctx.start_task()
    await anyio.sleep(seconds)
    return f"slept {seconds:g}s"


async def notify(request: Request) -> JSONResponse:
    await server.notify_tools_changed()
    return JSONResponse({})


async def health(request: Request) -> JSONResponse:
    report = await app.health()
    return JSONResponse(report, status_code=200 if report["status"] == "ok" else 503)


app = mcp_app(
    server,
    routes=[Route("/notify", notify, methods=["POST"]), Route("/health", health)],
)
