"""A gateway: one MCP endpoint serving another MCP server's tools beside its own, with the
caller's cancellation, progress and questions passed through (docs/downstream.md).

The downstream here is the reference server, @modelcontextprotocol/server-everything,
started as a child process over stdio with the app's lifespan. Its tools are served as
`ev_<name>` (any destructive ones left out); `shout` is the gateway's own tool, calling it.
Run it from the repository root (needs Node.js for npx):

    uvicorn --factory --lifespan on examples.gateway.main:create_app --host 127.0.0.1 --port 8000

Settings come from the environment: `GATEWAY_COMMAND` and `GATEWAY_ARGS` (a JSON list)
start another stdio server; `MCP_*` the endpoint's own (docs/configuration.md). For a
downstream served over HTTP, `Downstream.http("search", "https://search.internal/mcp",
headers={"Authorization": "Bearer <its own token>"})` instead: the gateway never passes its
clients' tokens on.
"""

from __future__ import annotations

from fastapi import FastAPI
from pydantic_settings import BaseSettings, SettingsConfigDict

from mcp_asgi import Context, McpError, McpMiddleware, McpServer
from mcp_asgi.downstream import Downstream, DownstreamTools


class GatewaySettings(BaseSettings):
    """How to start the downstream server."""

    model_config = SettingsConfigDict(env_prefix="GATEWAY_")
    command: str = "npx"
    args: list[str] = ["-y", "@modelcontextprotocol/server-everything"]


def create_app(settings: GatewaySettings | None = None) -> FastAPI:
    """The gateway app; its downstream starts and stops with the app's lifespan."""
    settings = settings or GatewaySettings()
    everything = Downstream.stdio("everything", settings.command, settings.args, timeout=120)
    mcp = McpServer("gateway", version="1.0.0", instructions="The reference server, and more.")
    mcp.add_source(
        DownstreamTools(everything, prefix="ev_", exclude=["annotation:destructiveHint"])
    )

    @mcp.tool()
    async def shout(message: str, ctx: Context) -> str:
        """Echo a message through the downstream, louder."""
        result = await everything.call_tool("echo", {"message": message}, ctx)
        if result.get("isError"):
            raise McpError(-32603, "the downstream could not echo the message")
        return " ".join(block["text"] for block in result["content"]).upper()

    app = FastAPI(title="Gateway")
    app.add_middleware(McpMiddleware, server=mcp)  # MCP_* settings from the environment
    return app
