"""The app's routes run as tasks (`AppRoutes(task=...)`) on a live uvicorn: a route task
outlives its creator's connection and completes; `tasks/cancel` tells the route its
client left (`http.disconnect`), cancels its work (`task_cancelled`) and closes its
`yield` dependency; `max_task_duration` does the same with `timeout`, and the task fails."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi import FastAPI
from mcp import Client
from mcp.shared.exceptions import MCPError

from mcp_asgi.routes import AppRoutes
from mcp_asgi.testing import McpTestClient, serve

from ..helpers import CANCEL_LOGGER, Otel, attrs, wait_for
from ..tasks.apps import TASKS, TaskClient
from .apps import Record, mcp_routes_app


@pytest.fixture
def record() -> Record:
    return Record()


def task_routes_app(record: Record, **settings: Any) -> FastAPI:
    """The shop with its `tasks`-tagged routes in a source of their own, always tasks."""
    app, _, _ = mcp_routes_app(
        record,
        routes=AppRoutes(exclude=["tag:tasks"]),
        extra=(AppRoutes(include=["tag:tasks"], task="required"),),
        **settings,
    )
    return app


@pytest.fixture
def url(record: Record) -> Iterator[str]:
    with serve(task_routes_app(record), timeout_graceful_shutdown=1) as live:
        yield live.url


async def test_a_route_task_survives_its_creators_disconnect(url: str, record: Record) -> None:
    """The first call (no tools/list before it: the source is read by the call) creates
    a task; its creator drops the connection; the route, watching for a disconnect all
    along, hears none and completes, and the task carries its answer."""
    client = TaskClient(url)
    call = {"name": "watch", "arguments": {"seconds": 0.5}}
    async with client.mcp.stream("tools/call", call) as stream:
        created = await stream.next_message()
        assert created is not None
        await stream.drop()
    assert created["result"]["resultType"] == "task", created
    done = await client.until(created["result"]["taskId"], "completed", "failed", "cancelled")
    assert done["status"] == "completed", done
    answer = done["result"]["structuredContent"]
    assert (answer["done"], answer["disconnected"]) == ("resource", False)
    assert answer["polls"] > 1  # it watched all along
    assert record.events == ["open"]


async def test_tasks_cancel_disconnects_and_cancels_the_route(
    url: str, record: Record, caplog: pytest.LogCaptureFixture
) -> None:
    """tasks/cancel: the route's work is cancelled where it awaits, its shielded cleanup
    hears http.disconnect, its `yield` dependency is closed with the cancellation; the
    task ends cancelled and the cancellation record says task_cancelled."""
    caplog.set_level(logging.INFO, logger=CANCEL_LOGGER)
    client = TaskClient(url)
    task_id = await client.start("watch", seconds=30)
    await wait_for(record.watching)
    ack = await client.rpc("tasks/cancel", task_id)
    assert ack["result"]["resultType"] == "complete"
    ended = await client.until(task_id, "cancelled", "completed", "failed")
    assert ended["status"] == "cancelled"
    await wait_for(record.exited)
    await wait_for(record.closed)
    assert_route_stopped(record, caplog, "task_cancelled")


async def test_max_task_duration_cancels_the_route_and_fails_the_task(
    record: Record, caplog: pytest.LogCaptureFixture
) -> None:
    """Past max_task_duration the route's work is cancelled where it awaits (its shielded
    cleanup hears http.disconnect, its `yield` dependency is closed with the
    cancellation); the task ends failed with the timeout error, the cancellation record
    and the task's span say timeout, and nothing more is written for it: a later
    tasks/cancel is acknowledged and the task stays as it ended."""
    caplog.set_level(logging.INFO, logger=CANCEL_LOGGER)
    otel = Otel()
    app = task_routes_app(record, otel=otel, max_task_duration=0.5)
    with serve(app, timeout_graceful_shutdown=1) as live:
        client = TaskClient(live.url)
        task_id = await client.start("watch", seconds=30)
        failed = await client.until(task_id, "failed", "completed", "cancelled")
        await wait_for(record.exited)
        await wait_for(record.closed)
        span = await otel.wait_span("task watch")
        ack = await client.rpc("tasks/cancel", task_id)
        assert ack["result"]["resultType"] == "complete"
        after = await client.get(task_id)
    assert failed["status"] == "failed", failed
    assert failed["error"]["code"] == -32603
    assert failed["error"]["data"] == {"reason": "timeout"}
    assert failed["error"]["message"].startswith("Request timed out")
    assert failed["statusMessage"] == failed["error"]["message"]
    assert "result" not in failed
    assert after == failed
    assert_route_stopped(record, caplog, "timeout")
    assert attrs(span)["mcp_asgi.cancellation.reason"] == "timeout"
    assert attrs(span)["mcp_asgi.cancellation.outcome"] == "exited"
    statuses = [
        dict(e.attributes or {})["mcp_asgi.task.status"]
        for e in span.events
        if e.name == "mcp_asgi.task.status"
    ]
    assert statuses == ["working", "failed"]
    assert otel.total("mcp_asgi.tasks", {"mcp_asgi.task.status": "failed"}) == 1


async def test_a_required_route_task_needs_the_extension(url: str) -> None:
    """server/discover advertises the extension; a 2026-07-28 call that does not declare
    it, and a 2025-era session's call, get -32021 and the route never runs."""
    plain = McpTestClient(url + "/mcp")
    discovered = await plain.request("server/discover", {})
    capabilities = discovered.final["result"]["capabilities"]
    assert "io.modelcontextprotocol/tasks" in capabilities["extensions"]
    refused = await plain.request("tools/call", {"name": "watch", "arguments": {"seconds": 0}})
    assert refused.final["error"]["code"] == -32021
    assert refused.final["error"]["data"]["requiredCapabilities"] == TASKS
    async with Client(url + "/mcp", mode="legacy") as legacy:
        with pytest.raises(MCPError) as raised:
            await legacy.call_tool("watch", {"seconds": 0})
    assert raised.value.error.code == -32021


def assert_route_stopped(record: Record, caplog: pytest.LogCaptureFixture, reason: str) -> None:
    """The route was cancelled where it awaited, its cleanup heard the disconnect, its
    dependency was closed, and one cancellation record says `reason` and `exited`."""
    assert record.events == [
        "open",
        "route CancelledError",
        "heard http.disconnect",
        "closed by CancelledError",
    ]
    records = [r for r in caplog.records if r.name == CANCEL_LOGGER]
    assert [(getattr(r, "reason", None), getattr(r, "outcome", None)) for r in records] == [
        (reason, "exited")
    ]
