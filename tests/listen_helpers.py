"""Shared pieces of the subscriptions/listen tests: a watched bus and an app with triggers."""

from __future__ import annotations

import threading
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from mcp_asgi import McpMiddleware, McpServer, McpSettings
from mcp_asgi.bus import ChangeEvent, InProcessBus
from mcp_asgi.testing import McpStream

SUB_ID = "io.modelcontextprotocol/subscriptionId"
ALL = {
    "toolsListChanged": True,
    "promptsListChanged": True,
    "resourcesListChanged": True,
    "resourceSubscriptions": ["res://a"],
}


class WatchedBus(InProcessBus):
    """An in-process bus that tells other threads when subscribers come and go."""

    def __init__(self) -> None:
        super().__init__()
        self.joined = threading.Event()
        self.empty = threading.Event()

    @asynccontextmanager
    async def subscribe(self) -> AsyncIterator[AsyncIterator[ChangeEvent]]:
        try:
            async with super().subscribe() as events:
                self.empty.clear()
                self.joined.set()
                yield events
        finally:
            if self.subscriber_count == 0:
                self.empty.set()


async def wait_for(event: threading.Event) -> None:
    """Wait (off the event loop) for an event set by the server's thread."""
    assert await anyio.to_thread.run_sync(event.wait, 10), "timed out"


async def wait_until(predicate: Callable[[], bool]) -> None:
    """Poll until `predicate()` holds (never asserts on how long it took)."""
    deadline = time.monotonic() + 10
    while not predicate():
        assert time.monotonic() < deadline, "condition never held"
        await anyio.sleep(0.01)


def build_server(bus: InProcessBus | None = None) -> McpServer:
    """A server with one tool, one prompt, one resource and one template."""
    server = McpServer("listen", bus=bus)

    @server.tool()
    async def echo(text: str) -> str:
        """Echo."""
        return text

    @server.prompt()
    def greet(name: str) -> str:
        """Greet."""
        return f"hi {name}"

    @server.resource("res://a")
    def res_a() -> str:
        """A."""
        return "a"

    @server.resource("res://notes/{note}")
    def note(note: str) -> str:
        """A note."""
        return note

    return server


def build_app(server: McpServer, tracer_provider: Any = None, **settings: Any) -> Starlette:
    """The server mounted at /mcp, plus routes that make changes happen."""

    async def notify(request: Request) -> JSONResponse:
        kind = request.path_params["kind"]
        if kind == "tools":
            await server.notify_tools_changed()
        elif kind == "prompts":
            await server.notify_prompts_changed()
        elif kind == "resources":
            await server.notify_resources_changed()
        else:
            await server.notify_resource_updated(request.query_params["uri"])
        return JSONResponse({})

    async def add_tool(request: Request) -> JSONResponse:
        async def added() -> str:
            """Added at runtime."""
            return "new"

        server.tool(name=request.path_params["name"])(added)
        return JSONResponse({})

    def remove_tool(request: Request) -> JSONResponse:  # a sync route: a worker thread
        server.remove_tool(request.path_params["name"])
        return JSONResponse({})

    async def close(request: Request) -> JSONResponse:
        return JSONResponse({"closed": await server.close_subscriptions()})

    app = Starlette(
        routes=[
            Route("/notify/{kind}", notify, methods=["POST"]),
            Route("/tools/{name}", add_tool, methods=["PUT"]),
            Route("/tools/{name}", remove_tool, methods=["DELETE"]),
            Route("/close", close, methods=["POST"]),
        ]
    )
    app.add_middleware(
        McpMiddleware,
        server=server,
        settings=McpSettings(**settings),
        tracer_provider=tracer_provider,
    )
    return app


async def next_message(stream: McpStream) -> dict[str, Any]:
    """The next JSON-RPC message of a stream that must not have ended."""
    message = await stream.next_message()
    assert message is not None, "the stream ended"
    return message
