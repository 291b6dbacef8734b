"""Shared pieces of the 2025-era tests: a server whose tools record what they saw, an app
with routes that announce changes, and a raw 2025-era client over real sockets."""

from __future__ import annotations

import itertools
import json
import threading
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx
from opentelemetry import trace
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from mcp_asgi import CancelReason, Context, McpMiddleware, McpServer, McpSettings
from mcp_asgi._asgi import ASGIApp, Message, Receive, Scope, Send
from mcp_asgi.testing import McpResponse, McpStream, McpTestClient

LATEST = "2025-11-25"


class Recorder:
    """What the `slow` tool saw; set from the server's thread, read from the test's."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.release = threading.Event()
        self.ended = threading.Event()
        self.reason: CancelReason | None = None
        self.finished = False


async def wait_for(event: threading.Event) -> None:
    """Wait (off the event loop) for an event set by the server's thread."""
    assert await anyio.to_thread.run_sync(event.wait, 10), "timed out"


def build_server(recorder: Recorder) -> McpServer:
    server = McpServer("legacy", version="1.2.3", title="Legacy test server")

    @server.tool()
    async def add(a: int, b: int) -> int:
        """Adds two numbers."""
        return a + b

    @server.tool()
    async def slow(ctx: Context) -> str:
        """Reports progress, then waits until released or cancelled."""
        recorder.started.set()
        await ctx.report_progress(1, 2, "started")
        try:
            while not recorder.release.is_set():  # noqa: ASYNC110 (set by the test's thread)
                await anyio.sleep(0.01)
            recorder.finished = True
            return "released"
        finally:
            recorder.reason = ctx.cancel_reason
            recorder.ended.set()

    @server.tool()
    async def chatty(ctx: Context) -> str:
        """Logs at info and at debug."""
        await ctx.log("info", "shown at info")
        await ctx.log("debug", "shown at debug")
        return "said"

    @server.resource("docs://readme", mime_type="text/plain")
    async def readme() -> str:
        """The read-me."""
        return "read me"

    @server.prompt()
    async def greet(name: str) -> str:
        """Greets someone."""
        return f"Hello {name}!"

    return server


def build_app(
    recorder: Recorder,
    *,
    tracer_provider: trace.TracerProvider | None = None,
    **settings: Any,
) -> Starlette:
    """The test server behind McpMiddleware, plus routes that announce changes."""
    server = build_server(recorder)

    async def notify(request: Request) -> JSONResponse:
        kind = request.path_params["kind"]
        if kind == "tools":
            await server.notify_tools_changed()
        else:
            await server.notify_resource_updated(request.query_params["uri"])
        return JSONResponse({})

    app = Starlette(routes=[Route("/notify/{kind}", notify, methods=["POST"])])
    app.add_middleware(
        McpMiddleware,
        server=server,
        settings=McpSettings(**settings),
        tracer_provider=tracer_provider,
    )
    return app


class LegacyClient(McpTestClient):
    """A 2025-era client: `initialize`, then requests carrying `Mcp-Session-Id` and
    `MCP-Protocol-Version`, with no `_meta` envelope."""

    def __init__(self, url: str, *, version: str = LATEST) -> None:
        super().__init__(url)
        self.version = version
        self.session_id: str | None = None
        self._legacy_ids = itertools.count(1)

    def body(
        self,
        method: str,
        params: Mapping[str, Any] | None = None,
        *,
        id: int | str | None = None,
        progress: bool = False,
    ) -> dict[str, Any]:
        request_id = next(self._legacy_ids) if id is None else id
        body_params = dict(params or {})
        if progress:
            body_params["_meta"] = {"progressToken": f"p-{request_id}"}
        return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": body_params}

    def session_headers(self) -> dict[str, str]:
        headers = {
            "content-type": "application/json",
            "accept": "application/json, text/event-stream",
            "mcp-protocol-version": self.version,
        }
        if self.session_id is not None:
            headers["mcp-session-id"] = self.session_id
        return headers

    async def initialize(self, version: str | None = None) -> McpResponse:
        """Open a session; keep its id; send `notifications/initialized`."""
        body = self.body(
            "initialize",
            {
                "protocolVersion": version or self.version,
                "capabilities": {},
                "clientInfo": {"name": "legacy-test", "version": "1"},
            },
        )
        headers = {"content-type": "application/json", "accept": "application/json"}
        response = await self.post(body, headers)
        assert response.status == 200, response.raw
        self.session_id = response.headers["mcp-session-id"]
        self.version = response.final["result"]["protocolVersion"]
        notified = await self.notify("notifications/initialized")
        assert notified.status == 202
        return response

    async def call(self, method: str, params: Mapping[str, Any] | None = None) -> McpResponse:
        return await self.post(self.body(method, params), self.session_headers())

    async def notify(self, method: str, params: Mapping[str, Any] | None = None) -> McpResponse:
        body = {"jsonrpc": "2.0", "method": method, "params": dict(params or {})}
        return await self.post(body, self.session_headers())

    async def delete(self) -> McpResponse:
        return await self.post(b"", self.session_headers(), http_method="DELETE")

    @asynccontextmanager
    async def open(
        self, method: str, params: Mapping[str, Any] | None = None, **options: Any
    ) -> AsyncIterator[McpStream]:
        """A request whose response is read message by message."""
        body = self.body(method, params, **options)
        async with self._open(body, self.session_headers(), "POST") as stream:
            yield stream

    @asynccontextmanager
    async def get_stream(self) -> AsyncIterator[McpStream]:
        """The session's GET stream, once its head has arrived (it is then subscribed)."""
        headers = {**self.session_headers(), "accept": "text/event-stream"}
        del headers["content-type"]
        async with self._open(b"", headers, "GET") as stream:
            await stream.read_head()
            yield stream


class Exchange:
    """One HTTP exchange as the wiretap saw it."""

    def __init__(self, method: str) -> None:
        self.method = method
        self.body = b""
        self.sent = b""

    @property
    def message(self) -> dict[str, Any] | None:
        """The JSON-RPC message the client sent, if any."""
        return json.loads(self.body) if self.body else None


class Wiretap:
    """ASGI wrapper recording every exchange on the MCP path: what the client sent, and
    every byte of the response."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.exchanges: list[Exchange] = []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] != "/mcp":
            await self.app(scope, receive, send)
            return
        exchange = Exchange(scope["method"])
        self.exchanges.append(exchange)

        async def receive_recorded() -> Message:
            message = await receive()
            exchange.body += message.get("body", b"")
            return message

        async def send_recorded(message: Message) -> None:
            exchange.sent += message.get("body", b"")
            await send(message)

        await self.app(scope, receive_recorded, send_recorded)

    def calls(self, method: str) -> list[Exchange]:
        """The POSTs of requests for `method`, in order."""
        return [
            e for e in self.exchanges if e.message is not None and e.message.get("method") == method
        ]

    def methods(self) -> list[str]:
        """What each exchange was: the JSON-RPC method, or the HTTP method."""
        return [e.message["method"] if e.message else e.method for e in self.exchanges]


def only_progress_sent(exchange: Exchange) -> bool:
    """Whether a cancelled call's response carried progress and nothing else (no result,
    no error): every SSE `data:` event is a `notifications/progress`."""
    events = [
        json.loads(line[5:])
        for line in exchange.sent.decode().splitlines()
        if line.startswith("data:")
    ]
    return bool(events) and all(e.get("method") == "notifications/progress" for e in events)


async def announce(base_url: str, kind: str, uri: str | None = None) -> None:
    """Make the server announce a change (`tools`, or `resource` with its URI)."""
    async with httpx.AsyncClient() as http:
        params = {"uri": uri} if uri else {}
        response = await http.post(f"{base_url}/notify/{kind}", params=params)
    assert response.status_code == 200


async def next_message(stream: McpStream) -> dict[str, Any]:
    """The next JSON-RPC message of a stream that must not have ended."""
    with anyio.fail_after(10):
        message = await stream.next_message()
    assert message is not None, "the stream ended"
    return message
