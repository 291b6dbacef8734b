"""The app the soak's replica runs (`uvicorn tests.soak.app:app`): the fleet's app
(tests/fleet/app.py: its tools, bus and store from MCP_*), plus one test-only route,
GET /soak/tasks, answering how many asyncio tasks the replica's loop holds, and with
SOAK_DIAG=1 the memory diagnostics of tests/soak/diag.py under /soak/diag."""

from __future__ import annotations

import asyncio
import json

from starlette.types import Receive, Scope, Send

from ..fleet.app import app as fleet_app
from . import diag

TASKS_PATH = "/soak/tasks"


async def app(scope: Scope, receive: Receive, send: Send) -> None:
    """GET /soak/tasks: `{"tasks": len(asyncio.all_tasks())}`; /soak/diag...: diag.route;
    anything else: the fleet app."""
    if scope["type"] == "http" and scope["path"].startswith(diag.PREFIX):
        await diag.route(scope, receive, send)
        return
    if scope["type"] != "http" or scope["path"] != TASKS_PATH:
        await fleet_app(scope, receive, send)
        return
    body = json.dumps({"tasks": len(asyncio.all_tasks())}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body})
