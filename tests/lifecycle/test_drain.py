"""The drain: once `lifespan.shutdown` has reached the middleware, new requests get `503`
with `Retry-After` and a JSON-RPC error while the requests in flight are being cancelled;
`mounted_lifespan` gives a mounted app its lifespan (and its failure)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest
from starlette.applications import Starlette

from mcp_asgi import McpServer
from mcp_asgi.lifespan import mounted_lifespan

from ..helpers import Lifespan, Probes, mcp_app, wait_for, watchdog, wire_for


async def test_new_requests_during_the_drain_get_503() -> None:
    """While the shutdown waits for a thread that ignores its token, a new request is
    refused with 503, `Retry-After` and a JSON-RPC error saying why."""
    probes = Probes()
    server = McpServer("drain")

    @server.tool()
    def deaf() -> str:
        """A thread that ignores its token until released."""
        probes["deaf"].started.set()
        probes["deaf"].release.wait(10)
        return "late"

    middleware = mcp_app(server, cancel_grace=5)
    lifespan = Lifespan()
    orphan = wire_for("tools/call", {"name": "deaf"}, accept="application/json")
    late = wire_for("tools/list", {}, request_id=2)
    try:
        async with watchdog(10, "drain"), anyio.create_task_group() as tg:
            tg.start_soon(middleware, {"type": "lifespan"}, lifespan.receive, lifespan.send)
            await lifespan.started.wait()
            tg.start_soon(orphan.run, middleware)
            await wait_for(probes["deaf"].started)
            lifespan.stop.set()
            while not orphan.ended:  # noqa: ASYNC110 - the shutdown error ends it
                await anyio.sleep(0.01)
            await late.run(middleware)  # the drain is still waiting for the thread
            assert "lifespan.shutdown.complete" not in lifespan.sent
            probes["deaf"].release.set()
    finally:
        probes["deaf"].release.set()
    assert late.status == 503
    assert late.headers["retry-after"] == "1"
    assert late.final["error"]["code"] == -32603
    assert late.final["error"]["data"] == {"reason": "server_shutdown"}
    assert orphan.final["error"]["data"] == {"reason": "server_shutdown"}


async def test_mounted_lifespan_runs_the_inner_apps_startup_and_shutdown() -> None:
    """The inner app's own lifespan runs inside the outer one's."""
    phases: list[str] = []

    @contextlib.asynccontextmanager
    async def inner_lifespan(app: Any) -> AsyncIterator[None]:
        phases.append("inner startup")
        yield
        phases.append("inner shutdown")

    inner = Starlette(lifespan=inner_lifespan)
    async with mounted_lifespan(inner)(None):
        phases.append("serving")
    assert phases == ["inner startup", "serving", "inner shutdown"]


async def test_mounted_lifespan_fails_with_the_inner_app() -> None:
    """A mounted app whose startup fails fails the outer startup with its message."""

    @contextlib.asynccontextmanager
    async def broken(app: Any) -> AsyncIterator[None]:
        raise ValueError("no database")
        yield

    with pytest.raises(RuntimeError, match="no database"):
        async with mounted_lifespan(Starlette(lifespan=broken))(None):
            pass


async def test_mounted_lifespan_leaves_an_app_without_lifespan_alone() -> None:
    """An app that does not take part in the lifespan protocol is neither waited for nor
    told to shut down."""
    called: list[str] = []

    async def plain(scope: Any, receive: Any, send: Any) -> None:
        called.append(scope["type"])

    async with mounted_lifespan(plain)(None):
        pass
    assert called == ["lifespan"]
