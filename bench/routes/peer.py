"""Serve one peer's MCP endpoint for the bench app at http://127.0.0.1:PORT/mcp.

    python -m bench.routes.peer mcp_asgi|fastapi_mcp|fastmcp PORT

Each runs in its own venv; only the peer's own library is imported.
"""

import sys
from typing import Any

import uvicorn

from bench.routes.app import build


def mcp_asgi_app() -> Any:
    from mcp_asgi import McpMiddleware, McpServer
    from mcp_asgi.routes import AppRoutes

    app = build()
    server = McpServer("shop")
    # the defaults (GET and HEAD routes), but the app's API and the endpoint are one
    # resource here: the Authorization header is forwarded
    server.add_source(AppRoutes(forward_authorization=True))
    app.add_middleware(McpMiddleware, server=server)
    return app


def fastapi_mcp_app() -> Any:
    from fastapi_mcp import FastApiMCP

    app = build()
    FastApiMCP(app).mount_http(mount_path="/mcp")
    return app


def fastmcp_app() -> Any:
    from fastmcp import FastMCP

    return FastMCP.from_fastapi(app=build()).http_app(path="/mcp")


if __name__ == "__main__":
    peer, port = sys.argv[1], int(sys.argv[2])
    app = {"mcp_asgi": mcp_asgi_app, "fastapi_mcp": fastapi_mcp_app, "fastmcp": fastmcp_app}[peer]()
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")
