"""The app a replica test runs in uvicorn worker processes (settings from MCP_*)."""

from __future__ import annotations

from .apps import from_env

app = from_env()
