"""A gateway whose own `everything_echo` collides with server-everything's `echo` under
the default prefix: `python -m mcp_asgi.stdio tests.downstream.colliding_server:server`
(the tap file in $EVERYTHING_TAP) must refuse to start."""

from __future__ import annotations

import os
from pathlib import Path

from mcp_asgi import McpServer
from mcp_asgi.downstream import DownstreamTools

from .everything import stdio

server = McpServer("colliding")


@server.tool(name="everything_echo")
async def echo(message: str) -> str:
    """Taken before server-everything's echo."""
    return message


server.add_source(DownstreamTools(stdio(Path(os.environ["EVERYTHING_TAP"]))))
