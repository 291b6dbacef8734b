"""The app a bus test runs in worker processes: the bus comes from MCP_BUS_URL (settings)."""

from __future__ import annotations

from .servers import changing_app, listen_server

app = changing_app(listen_server())
