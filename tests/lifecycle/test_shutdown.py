"""Shutdown: every request in flight is cancelled with reason `server_shutdown`, its reply
ends with an error, its span ends, within a bounded time, and no request task is left.

Two paths reach it. At lifespan shutdown the middleware cancels what is in flight. But
uvicorn only sends `lifespan.shutdown` once connections have drained: with its default
(`timeout_graceful_shutdown=None`) it waits for every open request forever; with a timeout
it cancels the request tasks when it runs out, which the scope records as `server_shutdown`.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import AsyncIterator, Iterator
from typing import Any

import anyio
import uvicorn

from mcp_asgi import CancelReason, CancelToken, Context, McpMiddleware, McpServer
from mcp_asgi.testing import McpTestClient

from ..helpers import (
    Lifespan,
    Otel,
    Probes,
    Wire,
    mcp_app,
    request_tasks,
    wait_for,
    watchdog,
    wire_for,
)

SSE = "text/event-stream"
JSON = "application/json"


def build_server(probes: Probes) -> McpServer:
    server = McpServer("shutdown")

    @server.tool()
    async def forever(ctx: Context) -> str:
        """Reports progress, then waits forever."""
        await ctx.report_progress(1)
        with probes["forever"].running(ctx):
            await anyio.sleep_forever()
        return "never"

    @server.tool()
    def polite(token: CancelToken) -> str:
        """A thread polling its token."""
        probes["polite"].token = token
        with probes["polite"].running(token):
            while not token.wait(0.01):
                pass
        return "never"

    @server.tool()
    def deaf() -> str:
        """A thread that ignores its token until released."""
        probe = probes["deaf"]
        probe.started.set()
        probe.release.wait(30)
        probe.exit(None)
        return "late"

    @server.tool()
    async def held(ctx: Context) -> str:
        """Waits until released, then answers."""
        probe = probes["held"]
        with probe.running(ctx):
            await anyio.to_thread.run_sync(probe.release.wait, 30, abandon_on_cancel=True)
        return "answered"

    return server


class Leftovers:
    """What the app's own lifespan shutdown found still running (after the middleware's)."""

    def __init__(self) -> None:
        self.tasks: list[str] | None = None
        self.inflight: int | None = None


def build(probes: Probes, otel: Otel, **settings: Any) -> tuple[McpMiddleware, Leftovers]:
    """The app, whose own lifespan records, at shutdown (after the middleware has cancelled
    what was in flight), which request tasks and scopes are left."""
    holder: list[McpMiddleware] = []
    left = Leftovers()

    @contextlib.asynccontextmanager
    async def lifespan(app: object) -> AsyncIterator[None]:
        yield
        left.inflight = len(holder[0]._inflight)
        with anyio.move_on_after(2):  # the request tasks return right after their scopes
            while request_tasks():  # noqa: ASYNC110 - tasks have no event to wait on
                await anyio.sleep(0.01)
        left.tasks = request_tasks()

    middleware = mcp_app(build_server(probes), otel, lifespan=lifespan, **settings)
    holder.append(middleware)
    return middleware, left


# -- the lifespan path, driven directly ----------------------------------------------------


async def test_lifespan_shutdown_cancels_everything_in_flight(otel: Otel) -> None:
    """At `lifespan.shutdown` the middleware cancels every request in flight: an SSE stream
    and a JSON reply both end with the shutdown error, a token-polling thread is told, a
    thread that ignores its token is given up after the grace period, every span ends, and
    no request is left when the app's own shutdown runs."""
    probes = Probes()
    middleware, left = build(probes, otel, cancel_grace=0.3, process_kill_grace=0.3)
    lifespan = Lifespan()
    sse = wire_for("tools/call", {"name": "forever"}, accept=SSE, progress=True)
    json_reply = wire_for("tools/call", {"name": "polite"}, accept=JSON, request_id=2)
    orphan = wire_for("tools/call", {"name": "deaf"}, accept=JSON, request_id=3)
    done: list[str] = []

    async def request(wire: Wire, name: str) -> None:
        await wire.run(middleware)
        done.append(name)

    try:
        async with watchdog(10, "shutdown"), anyio.create_task_group() as tg:
            tg.start_soon(middleware, {"type": "lifespan"}, lifespan.receive, lifespan.send)
            await lifespan.started.wait()
            tg.start_soon(request, sse, "sse")
            tg.start_soon(request, json_reply, "json")
            tg.start_soon(request, orphan, "orphan")
            for name in ("forever", "polite", "deaf"):
                await wait_for(probes[name].started)
            lifespan.stop.set()
    finally:
        probes["deaf"].release.set()
    assert lifespan.sent == ["lifespan.startup.complete", "lifespan.shutdown.complete"]
    assert sorted(done) == ["json", "orphan", "sse"]
    assert left.inflight == 0
    assert probes["forever"].reason is CancelReason.SERVER_SHUTDOWN
    assert probes["polite"].reason is CancelReason.SERVER_SHUTDOWN
    for wire in (sse, json_reply, orphan):
        assert wire.messages[-1]["error"]["data"] == {"reason": "server_shutdown"}
        assert wire.ended
    assert otel.attribute_by_span("mcp_asgi.cancellation.outcome") == {
        "tools/call forever": "exited",
        "tools/call polite": "exited",
        "tools/call deaf": "orphaned",
    }


# -- the uvicorn path ----------------------------------------------------------------------


@contextlib.contextmanager
def running(app: Any, **config: Any) -> Iterator[tuple[uvicorn.Server, str, threading.Thread]]:
    """uvicorn on 127.0.0.1 in a thread, with the server object exposed (to stop it)."""
    options: dict[str, Any] = {"host": "127.0.0.1", "port": 0, "log_level": "error"}
    options.update(http="h11", loop="asyncio")  # as `serve`: other servers are in e2e/servers
    options.update(config)
    server = uvicorn.Server(uvicorn.Config(app, **options))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        while not server.started:
            assert thread.is_alive(), "uvicorn failed to start"
            threading.Event().wait(0.005)
        port = server.servers[0].sockets[0].getsockname()[1]
        yield server, f"http://127.0.0.1:{port}", thread
    finally:
        server.should_exit = True
        thread.join(10)


def listening(url: str) -> bool:
    host, port = url.removeprefix("http://").split(":")
    with contextlib.suppress(OSError), socket.create_connection((host, int(port)), timeout=1):
        return True
    return False


async def test_uvicorn_graceful_timeout_cancels_as_server_shutdown(otel: Otel) -> None:
    """With `timeout_graceful_shutdown`, stopping uvicorn cancels the open requests when the
    timeout runs out: the SSE stream and the JSON call get the shutdown error, the thread
    is told, spans end, and no request task is left at lifespan shutdown."""
    probes = Probes()
    middleware, left = build(probes, otel)
    with running(middleware, timeout_graceful_shutdown=0.3) as (server, url, thread):
        client = McpTestClient(url + "/mcp")
        async with (
            client.stream("tools/call", {"name": "forever"}, progress=True) as stream,
            anyio.create_task_group() as tg,
        ):
            replies: list[Any] = []

            async def json_call() -> None:
                replies.append(await client.request("tools/call", {"name": "polite"}))

            tg.start_soon(json_call)
            first = await stream.next_message()
            assert first is not None
            assert first["method"] == "notifications/progress"
            await wait_for(probes["polite"].started)
            server.should_exit = True
            last = await stream.next_message()
        await anyio.to_thread.run_sync(thread.join, 10)
        assert not thread.is_alive()
    assert last is not None
    assert last["error"]["data"] == {"reason": "server_shutdown"}
    [reply] = replies
    assert reply.final["error"]["data"] == {"reason": "server_shutdown"}
    assert probes["polite"].reason is CancelReason.SERVER_SHUTDOWN
    assert left.tasks == []
    assert left.inflight == 0
    assert otel.attribute_by_span("mcp_asgi.cancellation.reason") == {
        "tools/call forever": "server_shutdown",
        "tools/call polite": "server_shutdown",
    }


async def test_uvicorn_default_waits_for_requests_in_flight() -> None:
    """uvicorn's default graceful shutdown does not cancel anything: it stops listening and
    waits for the open request, which completes normally (so configure a timeout)."""
    probes = Probes()
    middleware = mcp_app(build_server(probes))
    with running(middleware) as (server, url, thread):
        client = McpTestClient(url + "/mcp")
        async with client.stream("tools/call", {"name": "held"}) as stream:
            await wait_for(probes["held"].started)
            server.should_exit = True
            with anyio.fail_after(10):
                while listening(url):  # noqa: ASYNC110 - shutdown has no event to wait on
                    await anyio.sleep(0.02)
            assert thread.is_alive()
            probes["held"].release.set()
            message = await stream.next_message()
        await anyio.to_thread.run_sync(thread.join, 10)
    assert message is not None
    assert message["result"]["content"][0]["text"] == "answered"
    assert probes["held"].reason is None
