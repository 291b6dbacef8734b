"""A served request leaves no reference cycles behind: everything it made is freed by
reference counting the moment it ends. Cycles would be found only by the garbage
collector, whose full collections pause every request in flight (under load they were the
p99 tail), so each kind of request here is served many times with the collector off, and
then the collector must find nothing.

On asyncio (what uvicorn runs); a whole request through the middleware, scripted client.
"""

from __future__ import annotations

import gc
import logging
from collections.abc import Awaitable, Callable, Iterator

import anyio
import anyio.lowlevel
import pytest

from mcp_asgi import CancelToken, Context, McpMiddleware, McpServer

from .helpers import Wire, wire_for

pytestmark = pytest.mark.anyio

SSE = "application/json, text/event-stream"


class Tools:
    """The server, and an event its long-running tool sets once it runs."""

    def __init__(self) -> None:
        self.started = anyio.Event()
        server = McpServer("garbage")

        @server.tool()
        async def echo(text: str) -> str:
            """Returns its input at once."""
            return text

        @server.tool()
        async def progress(ctx: Context) -> str:
            """Streams a notification and lets the loop run before answering."""
            await ctx.report_progress(1)
            await anyio.lowlevel.checkpoint()
            return "done"

        @server.tool()
        async def forever(ctx: Context) -> str:
            """Runs until the client leaves."""
            await ctx.report_progress(1)
            self.started.set()
            await anyio.sleep_forever()
            return "never"

        @server.tool()
        def blocking(text: str, token: CancelToken) -> str:
            """Answers from a worker thread."""
            token.raise_if_cancelled()
            return text

        async def not_found(scope: object, receive: object, send: object) -> None:
            raise AssertionError("not routed here")

        self.app = McpMiddleware(not_found, server=server)


async def answered(app: McpMiddleware, wire: Wire) -> None:
    """Serve `wire`, whose client leaves once its reply is complete."""
    with anyio.fail_after(5):
        await wire.run(app)
    assert wire.ended


def call(tool: str, accept: str | None = None, **arguments: object) -> Wire:
    params = {"name": tool, "arguments": arguments}
    return wire_for("tools/call", params, accept=accept, leave_when_done=True)


@pytest.fixture
def collector_off() -> Iterator[None]:
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


Scenario = Callable[[Tools], Awaitable[None]]


async def echo_json(tools: Tools) -> None:
    await answered(tools.app, call("echo", text="hi"))


async def progress_sse(tools: Tools) -> None:
    await answered(tools.app, call("progress", accept=SSE))


async def thread_tool(tools: Tools) -> None:
    await answered(tools.app, call("blocking", text="hi"))


async def unknown_tool(tools: Tools) -> None:
    await answered(tools.app, call("nope"))


async def invalid_arguments(tools: Tools) -> None:
    await answered(tools.app, call("echo", text=3))


async def cancelled_by_disconnect(tools: Tools) -> None:
    tools.started = anyio.Event()
    wire = wire_for("tools/call", {"name": "forever", "arguments": {}}, accept=SSE)
    async with anyio.create_task_group() as group:
        group.start_soon(wire.run, tools.app)
        with anyio.fail_after(5):
            await tools.started.wait()
        wire.disconnect()


@pytest.mark.parametrize(
    "scenario",
    [
        echo_json,
        progress_sse,
        thread_tool,
        unknown_tool,
        invalid_arguments,
        cancelled_by_disconnect,
    ],
)
@pytest.mark.usefixtures("collector_off")
async def test_a_served_request_leaves_no_reference_cycles(
    scenario: Scenario, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.CRITICAL)
    tools = Tools()
    for _ in range(3):  # first calls fill caches (schemas, loggers): not per request
        await scenario(tools)
    gc.collect()
    for _ in range(20):
        await scenario(tools)
    assert gc.collect() == 0
