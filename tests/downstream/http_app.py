"""The stdio tests' server (tests/stdio/stdio_server.py) over Streamable HTTP, for
`uvicorn tests.downstream.http_app:app` in a process of its own: the HTTP downstream."""

from __future__ import annotations

from starlette.applications import Starlette

from mcp_asgi import McpMiddleware

from ..stdio.stdio_server import server

app = McpMiddleware(Starlette(), server=server)
