"""A client that really closes its socket mid-call cancels the handler, in every mode."""

from __future__ import annotations

import threading

import anyio
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from mcp_asgi import CancelReason, Context, McpMiddleware, McpServer, McpSettings
from mcp_asgi.testing import McpTestClient, serve


class Recorder:
    """What the handler saw; set from the server's thread, read from the test's."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.cancelled = threading.Event()
        self.reason: CancelReason | None = None


async def wait_for(event: threading.Event) -> None:
    assert await anyio.to_thread.run_sync(event.wait, 5), "timed out"


def build_app(mode: str, recorder: Recorder) -> Starlette:
    server = McpServer("live")

    @server.tool()
    async def slow(ctx: Context) -> str:
        """Sleeps until cancelled, reporting progress once."""
        recorder.started.set()
        await ctx.report_progress(1)
        try:
            await anyio.sleep(30)
        finally:
            recorder.reason = ctx.cancel_reason
            recorder.cancelled.set()
        return "never"

    async def home(request: Request) -> PlainTextResponse:
        return PlainTextResponse("home")

    app = Starlette(routes=[Route("/", home)])
    app.add_middleware(McpMiddleware, server=server, settings=McpSettings(response_mode=mode))  # type: ignore[arg-type]
    return app


@pytest.mark.parametrize("mode", ["json", "sse", "auto"])
async def test_disconnect_cancels_handler(mode: str) -> None:
    """Dropping the connection mid-call stops the handler with reason client_disconnect."""
    recorder = Recorder()
    app = build_app(mode, recorder)
    with serve(app) as server:
        client = McpTestClient(server.url + "/mcp")
        async with client.stream(
            "tools/call", {"name": "slow", "arguments": {}}, progress=True
        ) as s:
            await wait_for(recorder.started)
            if mode != "json":
                message = await s.next_message()
                assert message is not None
                assert message["method"] == "notifications/progress"
            await s.drop()
        await wait_for(recorder.cancelled)
        assert recorder.reason is CancelReason.CLIENT_DISCONNECT
        response = await client.request("tools/list")
        assert response.status == 200
