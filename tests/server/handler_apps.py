"""The servers of the handler-API tests (tests/server/test_depends.py, test_request.py,
test_error_status.py, and tests/e2e/test_live_depends.py): handlers that take FastAPI
dependencies, the HTTP `Request`, and raise errors with a status; and the FastAPI host
apps that serve them. The fixtures that build them are in tests/server/conftest.py."""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator
from typing import Annotated, Any

import anyio
from fastapi import Depends, FastAPI, Header, Request

from mcp_asgi import Context, McpError, McpMiddleware, McpServer, McpSettings

from ..helpers import Probe


class DependencyLog:
    """What the dependencies did, in order (written on the server's loop and threads)."""

    def __init__(self) -> None:
        self.events: list[str] = []
        self.closed = threading.Event()  # the `connection` dependency has closed
        self._lock = threading.Lock()

    def add(self, event: str) -> None:
        with self._lock:
            self.events.append(event)

    def count(self, event: str) -> int:
        with self._lock:
            return self.events.count(event)


class Connection:
    """What the `connection` dependency yields."""

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
        self.open = True


def fastapi_host(server: McpServer, log: DependencyLog | None = None, **settings: Any) -> FastAPI:
    """A FastAPI app serving `server` at /mcp through `app.add_middleware`, with `log` in
    its state for the dependencies."""
    app = FastAPI()
    app.state.dependency_log = log or DependencyLog()
    app.add_middleware(McpMiddleware, server=server, settings=McpSettings(**settings))
    return app


def dependency_log_of(request: Request) -> DependencyLog:
    """The host app's dependency log (a dependency taking the `Request`)."""
    log: DependencyLog = request.app.state.dependency_log
    return log


def settings(log: Annotated[DependencyLog, Depends(dependency_log_of)]) -> dict[str, str]:
    """A plain function, used twice per call (by `connection` and by `lookup`)."""
    log.add("settings")
    return {"dsn": "memory://"}


async def connection(
    config: Annotated[dict[str, str], Depends(settings)],
    log: Annotated[DependencyLog, Depends(dependency_log_of)],
) -> AsyncIterator[Connection]:
    """An async `yield` dependency recording how it is closed."""
    log.add("open")
    conn = Connection(config["dsn"])
    try:
        yield conn
    except BaseException as exc:
        log.add(f"closed by {type(exc).__name__}")
        raise
    finally:
        conn.open = False
        log.add("close")
        log.closed.set()


def caller(x_caller: Annotated[str, Header()]) -> str:
    """The `X-Caller` header of the HTTP request."""
    return x_caller


def depends_server(probe: Probe) -> McpServer:
    """Handlers whose dependencies record what happens to them in the host app's
    `state.dependency_log`: `settings` (cached once per request) <- `connection` (async
    `yield`) <- the tools; `whoami` depends on `caller`, which reads a header."""
    server = McpServer("depends")

    @server.tool()
    async def lookup(
        key: str,
        conn: Annotated[Connection, Depends(connection)],
        config: dict[str, str] = Depends(settings),  # noqa: B008 - the default-value form
    ) -> str:
        """Looks a key up."""
        assert conn.open
        return f"{key}@{conn.dsn} ({config['dsn']})"

    @server.tool()
    async def broken(conn: Annotated[Connection, Depends(connection)]) -> str:
        """Fails."""
        raise ValueError("no such key")

    @server.tool()
    async def slow(ctx: Context, conn: Annotated[Connection, Depends(connection)]) -> str:
        """Runs until cancelled."""
        with probe.running(ctx):
            await anyio.sleep_forever()
        return "never"

    @server.tool()
    def blocking(
        conn: Annotated[Connection, Depends(connection)],
        log: Annotated[DependencyLog, Depends(dependency_log_of)],
    ) -> str:
        """A plain function: waits in its worker thread until the test releases it."""
        probe.started.set()
        probe.release.wait(10)
        log.add(f"thread returned, connection open: {conn.open}")
        return "released"

    @server.tool()
    def sync_lookup(key: str, conn: Annotated[Connection, Depends(connection)]) -> str:
        """A plain function with a dependency."""
        return f"{key}@{conn.dsn} in a thread"

    @server.tool()
    async def whoami(name: Annotated[str, Depends(caller)]) -> str:
        """Says who the HTTP request says is calling."""
        return name

    @server.resource("kv://{key}")
    async def entry(key: str, conn: Annotated[Connection, Depends(connection)]) -> str:
        """One entry."""
        return f"{key}@{conn.dsn}"

    @server.prompt()
    async def ask(topic: str, conn: Annotated[Connection, Depends(connection)]) -> str:
        """Asks about a topic."""
        return f"Tell me about {topic} ({conn.dsn})"

    return server


def request_server(probe: Probe) -> McpServer:
    """Handlers that read the HTTP request: `inspect` reports what it sees; `poll_disconnect`
    checks `request.is_disconnected()` until it is cancelled."""
    server = McpServer("request")

    @server.tool()
    async def inspect(ctx: Context, request: Request) -> dict[str, Any]:
        """Reports what the HTTP request looks like."""
        disconnected = await request.is_disconnected()  # before the body: takes nothing
        body = await request.body()
        user = request.scope.get("user")
        return {
            "same": request is ctx.request,
            "disconnected": disconnected,
            "body_method": (await request.json())["method"],
            "body_length": len(body),
            "tenant": request.headers.get("x-tenant"),
            "client": request.client.host if request.client else None,
            "path": request.url.path,
            "app_name": getattr(request.app.state, "name", None),
            "user": getattr(user, "display_name", None),
            "scopes": list(request.scope["auth"].scopes) if "auth" in request.scope else None,
            "progress_token": ctx.progress_token,
            "input_responses": ctx.input_responses,
        }

    @server.tool()
    async def poll_disconnect(ctx: Context, request: Request) -> str:
        """Reads the body, then asks `is_disconnected()` until the request is cancelled."""
        with probe.running(ctx):
            await request.body()
            while True:
                if await request.is_disconnected():
                    probe.notes.append("is_disconnected said True")
                await anyio.sleep(0.005)

    @server.tool()
    def sync_inspect(request: Request) -> str:
        """A plain function taking the request."""
        return str(request.headers.get("x-tenant"))

    return server


def erring_server() -> McpServer:
    """Tools that raise `McpError`s, before or after writing a progress notification."""
    server = McpServer("errors")

    @server.tool()
    async def fail(code: int, ctx: Context, notify_first: bool = False, status: int = 0) -> str:
        """Raises `McpError(code)` (with `http_status=status` unless 0)."""
        if notify_first:
            await ctx.report_progress(1, 2)
        raise McpError(code, f"failed with {code}", {"code": code}, http_status=status or None)

    return server
