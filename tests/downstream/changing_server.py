"""A downstream whose tool list changes: `grow` registers a tool named after its argument
(the server announces the change). `python -m mcp_asgi.stdio
tests.downstream.changing_server:server`, for the 2026-07-28 list-change relay."""

from __future__ import annotations

from mcp_asgi import McpServer

server = McpServer("changing")


@server.tool()
async def grow(name: str) -> str:
    """Register a tool called `name`."""

    async def added() -> str:
        return name

    server.tool(name=name, description="Added by grow.")(added)
    return f"added {name}"
