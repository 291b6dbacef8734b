"""A task's telemetry: its own span (linked to the creating request's), its statuses as
span events, the cancellation attributes, and the task metrics."""

from __future__ import annotations

from typing import Any

from opentelemetry.trace import SpanKind, StatusCode

from mcp_asgi.testing import serve

from ..helpers import Otel, attrs, wait_for
from .apps import Seen, TaskClient, task_app


def _statuses(span: Any) -> list[str]:
    """The statuses of a task span's `mcp_asgi.task.status` events, in order."""
    return [
        str(dict(e.attributes or {})["mcp_asgi.task.status"])
        for e in span.events
        if e.name == "mcp_asgi.task.status"
    ]


def _value(otel: Otel, name: str, **where: Any) -> Any:
    points = [p for p in otel.points(name) if where.items() <= dict(p.attributes).items()]  # type: ignore[attr-defined]
    return sum(p.value for p in points)  # type: ignore[attr-defined]


async def test_a_cancelled_tasks_span_events_and_metrics() -> None:
    """The task's span is a root linked to its creating tools/call span; it records the
    cancel (task_cancelled, status UNSET) and the statuses working then cancelled; the
    metrics count it active while it ran and cancelled after."""
    otel, seen = Otel(), Seen()
    with serve(task_app(seen, otel), timeout_graceful_shutdown=1) as live:
        client = TaskClient(live.url)
        task_id = await client.start("sleepy", seconds=30, label="traced")
        await wait_for(seen.event("traced"))
        assert _value(otel, "mcp_asgi.tasks.active", **{"gen_ai.tool.name": "sleepy"}) == 1
        await client.rpc("tasks/cancel", task_id)
        await client.until(task_id, "cancelled")
        span = await otel.wait_span("task sleepy")
    creator = otel.span("tools/call sleepy")
    assert span.kind is SpanKind.INTERNAL
    assert span.parent is None
    assert [link.context.span_id for link in span.links] == [creator.context.span_id]
    assert attrs(span)["mcp_asgi.cancellation.reason"] == "task_cancelled"
    assert attrs(span)["mcp_asgi.cancellation.outcome"] == "exited"
    assert span.status.status_code is StatusCode.UNSET
    statuses = _statuses(span)
    assert statuses == ["working", "cancelled"]
    assert task_id not in str(attrs(span)) + str(attrs(creator))
    assert _value(otel, "mcp_asgi.tasks.active") == 0
    assert _value(otel, "mcp_asgi.tasks", **{"mcp_asgi.task.status": "cancelled"}) == 1


async def test_a_task_that_asks_shows_each_status() -> None:
    """input_required and working are span events as the task asks and is answered."""
    otel = Otel()
    with serve(task_app(None, otel), timeout_graceful_shutdown=1) as live:
        client = TaskClient(live.url, elicitation={})
        task_id = await client.start("confirm", label="events")
        answer = {"action": "accept", "content": {"confirm": True}}
        await client.until_asked(task_id, "first")
        await client.rpc("tasks/update", task_id, inputResponses={"first": answer})
        await client.until_asked(task_id, "second")
        await client.rpc("tasks/update", task_id, inputResponses={"second": answer})
        await client.until(task_id, "completed")
        span = await otel.wait_span("task confirm")
    statuses = _statuses(span)
    assert statuses == [
        "working",
        "input_required",
        "working",
        "input_required",
        "working",
        "completed",
    ]
    assert _value(otel, "mcp_asgi.tasks", **{"mcp_asgi.task.status": "completed"}) == 1
