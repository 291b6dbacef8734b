"""The app every server of the matrix serves, in its own process (`tests.e2e.servers.app:app`).

The test cannot see into the server's process, so everything it checks is appended, one
JSON object a line, to the file named by `MCP_MATRIX_EVENTS` (`O_APPEND`: whole lines,
from any thread or worker process):

- `started` / `exited` (with the cancel `reason` the handler saw), from the tools `async`,
  `thread` and `process` (whose shell adds `spawned`, with its process group id);
- `cancel_log`: each record of the `mcp_asgi.cancellation` logger (reason, outcome);
- `request`, `disconnect`, `late_write`, `done`: what a tap around the middleware saw of
  each keyed call (its HTTP version, whether the server told the app the client had gone,
  and any message the app sent after that: there must be none);
- `lifespan`: the host app's own startup and shutdown, where the server runs a lifespan.

A keyed call is a `tools/call` whose arguments carry a `key` the test chose.
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from mcp_asgi import CancelReason, CancelToken, Context, McpMiddleware, McpServer, McpSettings

from .stacks import EVENTS_ENV

_lock = threading.Lock()


def record(event: str, **fields: Any) -> None:
    """Append one event (a whole line, so concurrent writers never interleave)."""
    path = os.environ.get(EVENTS_ENV)
    if not path:
        return
    line = json.dumps({"event": event, "pid": os.getpid(), **fields}) + "\n"
    with _lock:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line.encode())
        finally:
            os.close(fd)


def _reason(reason: CancelReason | None) -> str | None:
    return reason.value if reason else None


# -- the cancellation log --------------------------------------------------------------------


class CancelLog(logging.Handler):
    """Records the cancellation logger's records as events."""

    def emit(self, log: logging.LogRecord) -> None:
        fields = {k: getattr(log, k, None) for k in ("request_id", "tool", "reason", "outcome")}
        record("cancel_log", level=log.levelname, **fields)


_cancel_logger = logging.getLogger("mcp_asgi.cancellation")
_handler = CancelLog(logging.INFO)


def _watch_cancel_log() -> None:
    """(Again) attach the handler: a server's logging setup may have disabled the logger."""
    _cancel_logger.disabled = False
    _cancel_logger.setLevel(logging.INFO)
    if _handler not in _cancel_logger.handlers:
        _cancel_logger.addHandler(_handler)


# -- the tools -------------------------------------------------------------------------------


def build_server() -> McpServer:
    server = McpServer("matrix", version="1.0.0")

    @server.tool()
    async def echo(text: str, key: str = "") -> str:
        """Returns its input (`key`: the tap records the call)."""
        return text

    @server.tool()
    async def slow_echo(text: str, seconds: float) -> str:
        """Returns its input after a while."""
        await anyio.sleep(seconds)
        return text

    @server.tool(name="async")
    async def async_tool(key: str, ctx: Context) -> str:
        """Reports progress every 20 ms until cancelled."""
        record("started", key=key)
        try:
            for step in itertools.count(1):
                await ctx.report_progress(step)
                await anyio.sleep(0.02)
        finally:
            record("exited", key=key, reason=_reason(ctx.cancel_reason))
        return "never"

    @server.tool(name="thread")
    def thread_tool(key: str, token: CancelToken) -> str:
        """Polls its cancel token in a worker thread until cancelled."""
        record("started", key=key)
        try:
            while not token.wait(0.01):
                pass
        finally:
            record("exited", key=key, reason=_reason(token.reason))
        return "cancelled"

    @server.tool(name="process")
    async def process_tool(key: str, ctx: Context) -> str:
        """Runs a shell (with a grandchild) that sleeps until its group is stopped."""
        record("started", key=key)
        script = (
            'printf \'{"event": "spawned", "key": "%s", "pgid": %d}\\n\' "$1" $$ >> "$2"; '
            "sleep 30 & wait"
        )
        try:
            await ctx.run_process(["/bin/sh", "-c", script, "sh", key, os.environ[EVENTS_ENV]])
        finally:
            record("exited", key=key, reason=_reason(ctx.cancel_reason))
        return "finished"

    return server


# -- the tap ---------------------------------------------------------------------------------


class Tap:
    """Around the middleware: for each keyed call, what the app received and sent."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        _watch_cancel_log()
        if scope["type"] != "http" or scope["path"] != "/mcp":
            await self.app(scope, receive, send)
            return
        body = bytearray()
        state: dict[str, Any] = {"key": None, "gone": False, "late": 0}

        def key() -> str | None:
            if state["key"] is None and body:
                try:
                    arguments = json.loads(body)["params"].get("arguments") or {}
                    state["key"] = arguments.get("key") or ""
                except (ValueError, KeyError, TypeError, AttributeError):
                    state["key"] = ""
            return state["key"] or None

        async def tapped_receive() -> Message:
            message = await receive()
            if message["type"] == "http.request":
                body.extend(message.get("body", b""))
                if not message.get("more_body") and key():
                    record("request", key=key(), http_version=scope.get("http_version"))
            elif message["type"] == "http.disconnect" and not state["gone"]:
                state["gone"] = True
                if key():
                    record("disconnect", key=key())
            return message

        async def tapped_send(message: Message) -> None:
            if state["gone"]:
                state["late"] += 1
                if key():
                    record(
                        "late_write",
                        key=key(),
                        type=message["type"],
                        status=message.get("status"),
                        body=message.get("body", b"").decode(errors="replace"),
                        more_body=message.get("more_body", False),
                    )
            await send(message)

        try:
            await self.app(scope, tapped_receive, tapped_send)
        finally:
            if key():
                record("done", key=key(), disconnect_seen=state["gone"], late=state["late"])


# -- the host app ----------------------------------------------------------------------------


async def home(request: Request) -> PlainTextResponse:
    return PlainTextResponse("home")


async def echo_route(request: Request) -> JSONResponse:
    return JSONResponse({"echo": (await request.body()).decode(), "pid": os.getpid()})


async def not_found(request: Request, exc: Exception) -> PlainTextResponse:
    return PlainTextResponse("host app", status_code=404)


@asynccontextmanager
async def lifespan(app: Starlette) -> AsyncIterator[None]:
    record("lifespan", phase="startup")
    yield
    record("lifespan", phase="shutdown")


def build_app() -> ASGIApp:
    host = Starlette(
        routes=[Route("/", home), Route("/echo", echo_route, methods=["POST"])],
        lifespan=lifespan,
        exception_handlers={404: not_found},
    )
    settings = McpSettings(keepalive_interval=0.05, process_kill_grace=0.5, cancel_grace=2.0)
    return Tap(McpMiddleware(host, server=build_server(), settings=settings))


_watch_cancel_log()
app = build_app()
