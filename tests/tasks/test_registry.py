"""TaskRegistry on the store, on a fake clock: the TTL counts from creation and no write
extends it, a task is its principal's, an expired lease fails the task."""

from __future__ import annotations

from mcp_asgi.store import MemoryStore
from mcp_asgi.tasks import TaskRecord, TaskRegistry


class FakeClock:
    """Seconds that move only when told (shared by the store and the registry)."""

    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def registry() -> tuple[TaskRegistry, FakeClock]:
    clock = FakeClock()
    return TaskRegistry(MemoryStore(clock=clock), clock=clock), clock


def record(clock: FakeClock, **fields: object) -> TaskRecord:
    values: dict[str, object] = {
        "id": "t1",
        "owner": "alice",
        "tool": "build",
        "status": "working",
        "created": clock.now,
        "updated": clock.now,
        "ttl": 60.0,
        "poll_interval_ms": 1000,
        "worker": "w1",
        "lease": clock.now + 3600,
    }
    values.update(fields)
    return TaskRecord(**values)  # type: ignore[arg-type]


async def test_a_task_is_kept_until_its_ttl_ends_and_removed_after() -> None:
    """Readable up to createdAt + ttl, gone after it, whatever was written meanwhile."""
    tasks, clock = registry()
    assert await tasks.create(record(clock))
    assert not await tasks.create(record(clock)), "an id is never reused"
    clock.now += 30

    def finish(task: TaskRecord) -> bool:
        task.status = "completed"
        task.result = {"content": []}
        return True

    done = await tasks.change("t1", finish)
    assert done is not None
    assert done.updated == clock.now
    clock.now += 29.9
    found = await tasks.find("t1", "alice")
    assert found is not None
    assert found.status == "completed"
    clock.now += 0.2
    assert await tasks.find("t1", "alice") is None
    assert await tasks.change("t1", finish) is None


async def test_a_task_is_its_principals_only() -> None:
    """Another principal, or none, sees no task at all (the same answer as unknown)."""
    tasks, clock = registry()
    await tasks.create(record(clock))
    assert await tasks.find("t1", "alice") is not None
    assert await tasks.find("t1", "mallory") is None
    assert await tasks.find("t1", None) is None
    assert await tasks.find("unknown", "alice") is None


async def test_an_expired_lease_fails_a_running_task() -> None:
    """A running task whose replica stopped renewing its lease ends failed (worker_lost)
    when it is next read; a finished one is left as it is."""
    tasks, clock = registry()
    await tasks.create(record(clock, lease=clock.now + 10, ttl=None))
    clock.now += 9
    alive = await tasks.find("t1", "alice")
    assert alive is not None
    assert alive.status == "working"
    clock.now += 2
    lost = await tasks.find("t1", "alice")
    assert lost is not None
    assert lost.status == "failed"
    assert lost.detailed()["error"]["data"] == {"reason": "worker_lost"}
    assert lost.lost


def test_only_a_lost_task_says_it_is_lost() -> None:
    """`TaskRecord.lost` reads the error's data only where it is an object: a handler's
    own error may carry a string, a list or nothing there."""
    _, clock = registry()
    for data in ("worker_lost", ["worker_lost"], None, {"reason": "timeout"}):
        failed = record(clock, lease=clock.now, ttl=None)
        failed.status = "failed"
        failed.error = {"code": -32603, "message": "it failed", "data": data}
        assert not failed.lost, data
    assert not record(clock, lease=clock.now, ttl=None).lost  # no error at all


async def test_the_wire_shapes() -> None:
    """CreateTaskResult fields are flat with integer milliseconds; a failed task always
    carries its error, a completed one its result, an input_required one its questions."""
    _, clock = registry()
    task = record(clock, ttl=None, status="failed")
    shape = task.detailed()
    assert shape["ttlMs"] is None
    assert shape["error"]["code"] == -32603
    assert shape["createdAt"].endswith("Z")
    asking = record(clock, status="input_required", input_requests={"k": {"method": "x"}})
    assert asking.detailed()["inputRequests"] == {"k": {"method": "x"}}
    assert asking.task()["ttlMs"] == 60000
    assert "inputRequests" not in asking.task()
