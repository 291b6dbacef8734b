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
import pytest

from mcp_asgi import McpMiddleware

from ..helpers import Wire, wire_for
from ..servers import Seen, scripted_app

pytestmark = pytest.mark.anyio

SSE = "application/json, text/event-stream"


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


Scenario = Callable[[McpMiddleware, Seen], Awaitable[None]]


async def echo_json(app: McpMiddleware, seen: Seen) -> None:
    await answered(app, call("echo", text="hi"))


async def progress_sse(app: McpMiddleware, seen: Seen) -> None:
    await answered(app, call("progress", accept=SSE))


async def thread_tool(app: McpMiddleware, seen: Seen) -> None:
    await answered(app, call("echo_sync", text="hi"))


async def unknown_tool(app: McpMiddleware, seen: Seen) -> None:
    await answered(app, call("nope"))


async def invalid_arguments(app: McpMiddleware, seen: Seen) -> None:
    await answered(app, call("echo", text=3))


async def cancelled_by_disconnect(app: McpMiddleware, seen: Seen) -> None:
    seen.started = anyio.Event()
    wire = wire_for("tools/call", {"name": "forever", "arguments": {}}, accept=SSE)
    async with anyio.create_task_group() as group:
        group.start_soon(wire.run, app)
        with anyio.fail_after(5):
            await seen.started.wait()
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
    seen = Seen()
    app = scripted_app(seen)
    for _ in range(3):  # first calls fill caches (schemas, loggers): not per request
        await scenario(app, seen)
    gc.collect()
    for _ in range(20):
        await scenario(app, seen)
    assert gc.collect() == 0
