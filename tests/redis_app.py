"""The app a bus test runs in worker processes: the bus comes from MCP_BUS_URL (settings)."""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse
from starlette.routing import Route

from mcp_asgi import McpMiddleware, McpServer, McpSettings

server = McpServer("replica")


@server.tool()
async def echo(text: str) -> str:
    """Echo."""
    return text


@server.prompt()
def greet(name: str) -> str:
    """Greet."""
    return f"hi {name}"


async def health(request: Request) -> PlainTextResponse:
    return PlainTextResponse("ok")


async def notify(request: Request) -> JSONResponse:
    if request.path_params["kind"] == "tools":
        await server.notify_tools_changed()
    else:
        await server.notify_prompts_changed()
    return JSONResponse({})


async def add_tool(request: Request) -> JSONResponse:
    async def added() -> str:
        """Added at runtime on one replica."""
        return "new"

    server.tool(name=request.path_params["name"])(added)
    return JSONResponse({})


app = Starlette(
    routes=[
        Route("/health", health),
        Route("/notify/{kind}", notify, methods=["POST"]),
        Route("/tools/{name}", add_tool, methods=["POST"]),
    ]
)
app.add_middleware(McpMiddleware, server=server, settings=McpSettings())
