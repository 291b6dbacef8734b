"""The app each replica of the fleet runs (`uvicorn tests.fleet.app:app`): settings from
MCP_* (the Redis bus and store), its spans written as JSON lines to a file of its own in
FLEET_SPANS (one file per process, read by the test once the run is over); mcp_asgi's
records from WARNING up on stderr, one per line: `LEVEL logger message`."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import anyio
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse
from starlette.routing import Route

from mcp_asgi import Context, McpMiddleware, McpServer

from ..helpers import log_to_stderr

log_to_stderr(logging.WARNING)

server = McpServer("fleet")


@server.tool()
async def echo(text: str) -> str:
    """Returns its input."""
    return text


@server.tool()
async def paced(steps: int, delay: float, ctx: Context) -> str:
    """Reports progress once per step, `delay` seconds apart, then answers."""
    for step in range(1, steps + 1):
        await ctx.report_progress(step, steps)
        await anyio.sleep(delay)
    return f"paced {steps}"


@server.tool(task="optional")
async def sleepy(seconds: float, label: str) -> str:
    """Sleeps (run as a task when the client asks for one)."""
    await anyio.sleep(seconds)
    return f"{label} slept {seconds:g}s"


async def health(request: Request) -> PlainTextResponse:
    """What the load balancer checks: 200 while the process accepts connections."""
    return PlainTextResponse("ok")


async def notify(request: Request) -> JSONResponse:
    """Announce a change of the tools (to every replica's listen streams, through Redis)."""
    await server.notify_tools_changed()
    return JSONResponse({})


def _spans() -> TracerProvider | None:
    """A provider exporting every span, as it ends, to FLEET_SPANS/<pid>.jsonl."""
    folder = os.environ.get("FLEET_SPANS")
    if not folder:
        return None
    out = (Path(folder) / f"{os.getpid()}.jsonl").open("a", buffering=1)

    def line(span: ReadableSpan) -> str:
        return str(span.to_json(indent=None)) + "\n"

    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter(out=out, formatter=line)))
    return provider


app = McpMiddleware(
    Starlette(
        routes=[
            Route("/", health),
            Route("/health", health),
            Route("/notify", notify, methods=["POST"]),
        ]
    ),
    server=server,
    tracer_provider=_spans(),
)
