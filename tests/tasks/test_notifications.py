"""Status notifications: a `subscriptions/listen` stream with `taskIds` hears each status
change of the caller's own tasks as a `notifications/tasks` carrying what `tasks/get`
answers; another principal's or an unknown id is not accepted."""

from __future__ import annotations

from typing import Any

from starlette.applications import Starlette

from mcp_asgi import McpMiddleware, McpSettings
from mcp_asgi.testing import McpStream, serve

from ..helpers import next_message, wait_for
from .apps import Seen, TaskClient, task_server, with_users

SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"


def watching(*task_ids: str) -> dict[str, Any]:
    return {"notifications": {"taskIds": list(task_ids)}}


async def acknowledged(stream: McpStream) -> dict[str, Any]:
    """The acknowledgement's `notifications` (what the stream accepted)."""
    ack = await next_message(stream)
    assert ack["method"] == "notifications/subscriptions/acknowledged", ack
    return dict(ack["params"]["notifications"])


async def status(stream: McpStream, subscription_id: str | int) -> dict[str, Any]:
    """The next task notification's params, checked for its method and subscription id."""
    message = await next_message(stream)
    assert message["method"] == "notifications/tasks", message
    params = dict(message["params"])
    assert params.pop("_meta") == {SUBSCRIPTION_ID: subscription_id}
    return params


def as_get_answers(answer: dict[str, Any]) -> dict[str, Any]:
    """A tasks/get result without its envelope: the DetailedTask."""
    return {k: v for k, v in answer.items() if k not in ("_meta", "resultType")}


async def test_a_listener_hears_its_task_go_working_then_completed(url: str, seen: Seen) -> None:
    """The acknowledgement echoes the task id; answering the task's question makes it
    working (heard while the handler is held), then it completes: the notification is
    the DetailedTask tasks/get answers, result included."""
    client = TaskClient(url, elicitation={})
    task_id = await client.start("gated", label="gate")
    await client.until(task_id, "input_required")
    async with client.mcp.stream("subscriptions/listen", watching(task_id), id="w") as stream:
        assert await acknowledged(stream) == {"taskIds": [task_id]}
        answer = {"action": "accept", "content": {"confirm": True}}
        await client.rpc("tasks/update", task_id, inputResponses={"go": answer})
        working = await status(stream, "w")
        seen.event("gate").set()
        completed = await status(stream, "w")
    assert working["taskId"] == task_id
    assert working["status"] == "working"
    assert "result" not in working
    assert completed["status"] == "completed"
    assert completed["result"]["content"][0]["text"] == "gate: accept"
    assert completed == as_get_answers(await client.get(task_id))
    assert {"createdAt", "lastUpdatedAt", "ttlMs"} <= set(completed)


async def test_another_principals_task_is_not_accepted() -> None:
    """bob asks to watch alice's task and a made-up id: neither is accepted nor echoed;
    alice's own listener is acknowledged with her id only."""
    mcp = McpMiddleware(
        Starlette(), server=task_server(), settings=McpSettings(auth_host_identity=True)
    )
    with serve(with_users(mcp), timeout_graceful_shutdown=1) as live:
        alice, bob = TaskClient(live.url, "alice"), TaskClient(live.url, "bob")
        task_id = await alice.start("sleepy", seconds=30, label="hers")
        asked = watching(task_id, "made-up")
        async with bob.mcp.stream("subscriptions/listen", asked) as stream:
            assert await acknowledged(stream) == {}
        async with alice.mcp.stream("subscriptions/listen", asked) as stream:
            assert await acknowledged(stream) == {"taskIds": [task_id]}
        await alice.rpc("tasks/cancel", task_id)


async def test_a_cancelled_task_is_notified_cancelled(url: str, seen: Seen) -> None:
    """tasks/cancel of a watched task: its notification says cancelled, with neither a
    result nor an error, as tasks/get does."""
    client = TaskClient(url)
    task_id = await client.start("sleepy", seconds=30, label="doomed")
    await wait_for(seen.event("doomed"))
    async with client.mcp.stream("subscriptions/listen", watching(task_id), id=7) as stream:
        await acknowledged(stream)
        await client.rpc("tasks/cancel", task_id)
        cancelled = await status(stream, 7)
    assert cancelled["status"] == "cancelled"
    assert cancelled == as_get_answers(await client.get(task_id))
