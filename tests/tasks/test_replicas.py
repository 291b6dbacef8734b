"""Tasks shared by every replica: two uvicorn processes on one real redis-server. A task
created on A is read, answered and cancelled on B; a cancel whose signal cannot be sent
still lands (at A's next lease renewal); a replica killed with -9 leaves its task failed
once the lease has run out; a replica shut down fails its tasks saying so. The first and
the kill -9 run on a Redis Cluster too."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator

import pytest
import redis

from ..helpers import next_message
from ..servers import RedisServer, Worker
from .apps import TaskClient
from .conftest import replica

pytestmark = pytest.mark.usefixtures("replica_env")
ANSWER = {"action": "accept", "content": {"confirm": True}}


@pytest.fixture
def pair(request: pytest.FixtureRequest) -> Iterator[tuple[Worker, Worker]]:
    """Replicas A and B on one Redis; on the session's Redis Cluster for a test
    parametrized with `indirect=["pair"]` and "cluster"."""
    if getattr(request, "param", "redis") == "cluster":
        url = request.getfixturevalue("redis_cluster").url
        channel = f"mcp_asgi:tasks-test:{request.node.name}"
    else:
        redis_server: RedisServer = request.getfixturevalue("redis_server")
        url, channel = redis_server.url, f"mcp_asgi:tasks-test:{redis_server.port}"
    a = replica(url, channel)
    try:
        b = replica(url, channel)
        try:
            yield a, b
        finally:
            b.stop()
    finally:
        a.stop()


@pytest.mark.parametrize("pair", ["redis", "cluster"], indirect=True)
async def test_created_on_a_read_answered_and_cancelled_on_b(pair: tuple[Worker, Worker]) -> None:
    """tasks/get, tasks/update and tasks/cancel work on the replica that does not run the
    task: state from the store, answers and the cancel recorded there and signalled."""
    a, b = pair
    on_a, on_b = TaskClient(a.url, elicitation={}), TaskClient(b.url, elicitation={})
    task_id = await on_a.start("confirm", label="shared")
    asking = await on_b.until(task_id, "input_required")
    assert list(asking["inputRequests"]) == ["first"]
    ack = await on_b.rpc("tasks/update", task_id, inputResponses={"first": ANSWER})
    assert ack["result"]["resultType"] == "complete"
    assert "first" not in (await on_b.get(task_id)).get("inputRequests", {})
    await on_b.until_asked(task_id, "second")
    await on_b.rpc("tasks/cancel", task_id)
    ended = await on_b.until(task_id, "cancelled", "completed", "failed")
    assert ended["status"] == "cancelled"
    assert (await on_a.get(task_id))["status"] == "cancelled"


async def test_a_listener_on_b_hears_a_task_of_a_end(pair: tuple[Worker, Worker]) -> None:
    """A task's status change on A crosses the Redis bus: B's listen stream watching it
    hears it cancelled (B reads the record from the shared store; its creation, published
    on A just before B subscribed, may be heard first)."""
    a, b = pair
    on_a, on_b = TaskClient(a.url), TaskClient(b.url)
    task_id = await on_a.start("sleepy", seconds=30, label="watched")
    listen = {"notifications": {"taskIds": [task_id]}}
    async with on_b.mcp.stream("subscriptions/listen", listen) as stream:
        ack = await next_message(stream)
        assert ack["params"]["notifications"] == {"taskIds": [task_id]}
        await on_a.rpc("tasks/cancel", task_id)
        heard = [await next_message(stream)]
        while heard[-1]["params"]["status"] == "working":  # its creation may arrive late
            heard.append(await next_message(stream))
    assert {m["method"] for m in heard} == {"notifications/tasks"}
    assert heard[-1]["params"]["status"] == "cancelled"


async def test_a_cancel_lands_when_its_signal_cannot_be_sent(redis_server: RedisServer) -> None:
    """B's Redis user may not PUBLISH: its tasks/cancel is recorded in the store but never
    signalled. A reads the record at its next lease renewal and cancels the work."""
    with redis.Redis.from_url(redis_server.url) as admin:
        admin.execute_command(
            "ACL", "SETUSER", "nobus", "on", ">pw", "~*", "&*", "+@all", "-publish"
        )
    channel = f"mcp_asgi:tasks-test:{redis_server.port}"
    cut = redis_server.url.replace("redis://", "redis://nobus:pw@")
    with redis.Redis.from_url(cut) as nobus, pytest.raises(redis.exceptions.NoPermissionError):
        nobus.publish("task-worker:any", b"x")
    a = replica(redis_server.url, channel)
    try:
        b = replica(cut, channel)
        try:
            on_a, on_b = TaskClient(a.url), TaskClient(b.url)
            task_id = await on_a.start("sleepy", seconds=60, label="cut")
            ack = await on_b.rpc("tasks/cancel", task_id)
            assert ack["result"]["resultType"] == "complete"
            ended = await on_b.until(task_id, "cancelled", "completed", "failed")
            assert ended["status"] == "cancelled"
        finally:
            b.stop()
    finally:
        a.stop()


@pytest.mark.parametrize("pair", ["redis", "cluster"], indirect=True)
async def test_a_killed_replicas_task_fails_after_its_lease(pair: tuple[Worker, Worker]) -> None:
    """kill -9 of the replica running a task: no renewal, and once the lease has run out
    the task reads failed on the other replica, with an error saying the worker was lost."""
    a, b = pair
    on_a, on_b = TaskClient(a.url), TaskClient(b.url)
    task_id = await on_a.start("sleepy", seconds=60, label="doomed")
    os.kill(a._process.pid, signal.SIGKILL)
    a._process.wait(10)
    failed = await on_b.until(task_id, "failed", "completed", "cancelled")
    assert failed["error"]["data"] == {"reason": "worker_lost"}
    assert "lease" in failed["statusMessage"]


async def test_a_replica_shut_down_fails_its_tasks(pair: tuple[Worker, Worker]) -> None:
    """SIGTERM to the replica running a task: the work is cancelled (server_shutdown) and
    the task reads failed, saying so, on the other replica."""
    a, b = pair
    on_a, on_b = TaskClient(a.url), TaskClient(b.url)
    task_id = await on_a.start("sleepy", seconds=60, label="shutdown")
    a.stop()
    failed = await on_b.until(task_id, "failed", "completed", "cancelled")
    assert failed["error"]["data"] == {"reason": "server_shutdown"}
