"""Tasks on a live uvicorn: they outlive their creator's connection, stop only when asked
(async, thread and subprocess work), ask their user in place, and end at their deadline."""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable
from typing import Any

import anyio
import pytest

from mcp_asgi import CancelReason
from mcp_asgi.store import StoreUnavailable
from mcp_asgi.store.memory import MemoryStore
from mcp_asgi.testing import McpTestClient, serve

from ..helpers import CANCEL_LOGGER, eventually, wait_for
from .apps import Seen, TaskClient, task_app


async def test_a_task_survives_its_creators_disconnect(url: str, seen: Seen) -> None:
    """The creating request reads its CreateTaskResult and drops the connection: the work
    goes on, unaware of it, and completes."""
    client = TaskClient(url)
    call = {"name": "sleepy", "arguments": {"seconds": 0.5, "label": "survivor"}}
    async with client.mcp.stream("tools/call", call) as stream:
        created = await stream.next_message()
        assert created is not None
        await stream.drop()
    task_id = created["result"]["taskId"]
    assert created["result"]["resultType"] == "task"
    done = await client.until(task_id, "completed", "failed", "cancelled")
    assert done["status"] == "completed"
    assert done["result"]["content"][0]["text"] == "survivor slept 0.5s"
    assert seen.reasons["survivor"] is None


async def test_a_disconnect_before_the_task_exists_cancels_the_call(seen: Seen) -> None:
    """Within the result window the call is an ordinary request: its client leaving
    cancels it (client_disconnect), and no task is ever created."""
    with serve(task_app(seen, task_result_window=30), timeout_graceful_shutdown=1) as live:
        client = TaskClient(live.url)
        call = {"name": "sleepy", "arguments": {"seconds": 30, "label": "early"}}
        async with client.mcp.stream("tools/call", call) as stream:
            await wait_for(seen.event("early"))
            await stream.drop()
        await eventually(lambda: "early" in seen.reasons, what="the handler to stop")
    assert seen.reasons["early"] is CancelReason.CLIENT_DISCONNECT


@pytest.mark.parametrize("tool", ["sleepy", "threaded", "process"])
async def test_tasks_cancel_stops_the_work(
    url: str, seen: Seen, tool: str, caplog: pytest.LogCaptureFixture
) -> None:
    """tasks/cancel stops async, thread and subprocess work through the request machinery:
    the handler sees task_cancelled, one cancellation record says so with its latency,
    and the task ends cancelled; a second cancel gets the same acknowledgement."""
    caplog.set_level(logging.INFO, logger=CANCEL_LOGGER)
    client = TaskClient(url)
    task_id = await client.start(tool, seconds=30, label=tool)
    await wait_for(seen.event(tool))
    ack = await client.rpc("tasks/cancel", task_id)
    assert set(ack["result"]) == {"resultType", "_meta"}
    assert ack["result"]["resultType"] == "complete"
    ended = await client.until(task_id, "cancelled", "completed", "failed")
    assert ended["status"] == "cancelled"
    assert "result" not in ended
    assert "error" not in ended
    await eventually(lambda: tool in seen.reasons, what="the handler to stop")
    assert seen.reasons[tool] is CancelReason.TASK_CANCELLED
    records = [r for r in caplog.records if r.name == CANCEL_LOGGER]
    seen_records = [(getattr(r, "reason", None), getattr(r, "outcome", None)) for r in records]
    assert seen_records == [("task_cancelled", "exited")]
    assert getattr(records[0], "latency", None) is not None
    again = await client.rpc("tasks/cancel", task_id)
    assert again["result"]["resultType"] == "complete"


async def test_a_task_asks_and_waits_in_place(url: str) -> None:
    """A question puts the task in input_required; tasks/update delivers the answer
    (unknown keys acknowledged and ignored) and the handler goes on where it waited, to
    the next question and to the end; an answered key is acknowledged again, ignored."""
    client = TaskClient(url, elicitation={})
    task_id = await client.start("confirm", label="asker")
    first = await client.until(task_id, "input_required")
    assert list(first["inputRequests"]) == ["first"]
    assert first["inputRequests"]["first"]["method"] == "elicitation/create"
    answer = {"action": "accept", "content": {"confirm": True}}
    ack = await client.rpc("tasks/update", task_id, inputResponses={"first": answer, "nope": {}})
    assert ack["result"]["resultType"] == "complete"
    after = await client.get(task_id)
    assert "first" not in after.get("inputRequests", {})
    await client.until_asked(task_id, "second")
    again = await client.rpc("tasks/update", task_id, inputResponses={"first": answer})
    assert again["result"]["resultType"] == "complete"
    assert list((await client.get(task_id))["inputRequests"]) == ["second"]
    await client.rpc("tasks/update", task_id, inputResponses={"second": {"action": "decline"}})
    done = await client.until(task_id, "completed", "failed")
    assert done["result"]["content"][0]["text"] == "asker: accept, decline"


async def test_a_question_for_an_undeclared_capability_fails_the_task(url: str) -> None:
    """Questions may use only what the creating request declared: -32021, task failed."""
    client = TaskClient(url)  # no sampling
    task_id = await client.start("sample_later")
    failed = await client.until(task_id, "failed", "completed")
    assert failed["status"] == "failed"
    assert failed["error"]["code"] == -32021


async def test_max_task_duration_fails_the_task_with_timeout(seen: Seen) -> None:
    """Past max_task_duration the work is cancelled (timeout) and the task fails saying so."""
    with serve(task_app(seen, max_task_duration=0.5), timeout_graceful_shutdown=1) as live:
        client = TaskClient(live.url)
        task_id = await client.start("sleepy", seconds=30, label="late")
        failed = await client.until(task_id, "failed", "completed", "cancelled")
    assert failed["error"]["data"] == {"reason": "timeout"}
    assert failed["statusMessage"].startswith("Request timed out")
    assert seen.reasons["late"] is CancelReason.TIMEOUT


def refuse_writes(
    monkeypatch: pytest.MonkeyPatch,
    refused_if: Callable[[dict[str, Any], bytes | None], bool],
    times: float = math.inf,
) -> list[str]:
    """Make the in-memory store refuse, as an unreachable Redis would (`StoreUnavailable`),
    the first `times` writes of a task record for which `refused_if(the record written,
    the bytes expected)` holds; the keys refused, as they come."""
    set_if = MemoryStore.set_if
    refused: list[str] = []

    async def refusing(
        store: MemoryStore,
        key: str,
        value: bytes,
        *,
        expected: bytes | None,
        ttl: float | None = None,
    ) -> bool:
        refuse = len(refused) < times and key.startswith("task:")
        if refuse and refused_if(json.loads(value), expected):
            refused.append(key)
            raise StoreUnavailable("Redis unreachable (the test's)")
        return await set_if(store, key, value, expected=expected, ttl=ttl)

    monkeypatch.setattr(MemoryStore, "set_if", refusing)
    return refused


def refuse_outcomes(monkeypatch: pytest.MonkeyPatch, times: float) -> list[str]:
    """The first `times` writes of a completed task's outcome refused (`refuse_writes`)."""
    return refuse_writes(monkeypatch, lambda record, _: record["status"] == "completed", times)


async def test_an_outcome_stored_once_the_store_answers_again(
    seen: Seen, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The work is done while the store cannot be reached: its outcome is written again
    after a backoff, not dropped (the task would stay working until its lease ran out,
    then fail as lost)."""
    refused = refuse_outcomes(monkeypatch, 2)
    with serve(task_app(seen), timeout_graceful_shutdown=1) as live:
        client = TaskClient(live.url)
        task_id = await client.start("sleepy", seconds=0.1, label="stored late")
        ended = await client.until(task_id, "completed", "failed", "cancelled")
    assert ended["status"] == "completed", ended
    assert ended["result"]["content"][0]["text"] == "stored late slept 0.1s"
    assert refused == [f"task:{task_id}"] * 2


async def test_a_shutdown_ends_an_outcome_waiting_for_the_store(
    seen: Seen, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The store never takes the outcome: the app's shutdown ends the retries (the server
    stops, and no write is tried after it)."""
    refused = refuse_outcomes(monkeypatch, math.inf)
    # a lease of 0.3 s: the retries come every 0.1 s at most (a third of it)
    with serve(task_app(seen, task_lease=0.3), timeout_graceful_shutdown=1) as live:
        client = TaskClient(live.url)
        await client.start("sleepy", seconds=0.2, label="never stored")
        await eventually(lambda: len(refused) >= 2, what="the outcome tried again")
    tried = len(refused)
    await anyio.sleep(0.5)  # five backoffs: none comes
    assert len(refused) == tried


async def test_a_task_found_lost_while_it_runs_is_stopped_and_said_once(
    seen: Seen, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Its lease renewals do not get through (the store refuses them) until a reader fails
    the task as lost: the replica still running it cancels the work (timeout) at its next
    renewal and logs a WARNING naming the task — one line: the cancelled work's outcome,
    which then finds the task lost, says nothing more."""
    caplog.set_level(logging.WARNING, logger="mcp_asgi.tasks")
    refusing = False
    refused = refuse_writes(
        monkeypatch, lambda record, expected: refusing and record["status"] == "working"
    )
    # a lease of 0.3 s, renewed every 0.1 s
    with serve(task_app(seen, task_lease=0.3), timeout_graceful_shutdown=1) as live:
        client = TaskClient(live.url)
        task_id = await client.start("sleepy", seconds=30, label="lost")
        await wait_for(seen.event("lost"))
        refusing = True
        await eventually(lambda: len(refused) >= 4, what="the renewals refused past the lease")
        lost = await client.get(task_id)  # a reader finds the lease run out
        assert lost["status"] == "failed", lost
        assert lost["error"]["data"] == {"reason": "worker_lost"}
        await eventually(lambda: "lost" in seen.reasons, what="the work to stop")
        # the shutdown waits for the stopped work's outcome to be written
    assert seen.reasons["lost"] is CancelReason.TIMEOUT
    said = said_of(caplog, task_id)
    assert len(said) == 1, said
    assert f"task {task_id} failed as lost while this replica still ran it" in said[0]


async def test_an_outcome_that_finds_its_task_lost_is_said(
    seen: Seen, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The work ends while the store refuses both its renewals and its outcome (retried);
    a reader fails the task as lost meanwhile; when the outcome gets through it finds the
    task lost: one WARNING naming the task, from the outcome (no renewal is left to see
    it: the work is over)."""
    caplog.set_level(logging.WARNING, logger="mcp_asgi.tasks")
    refusing = False
    outcomes_refused = 0

    def refused_if(record: dict[str, Any], expected: bytes | None) -> bool:
        nonlocal outcomes_refused
        if not refusing:
            return False
        outcomes_refused += record["status"] == "completed"
        return record["status"] in ("working", "completed")

    refuse_writes(monkeypatch, refused_if)
    with serve(task_app(seen, task_lease=0.3), timeout_graceful_shutdown=1) as live:
        client = TaskClient(live.url)
        task_id = await client.start("sleepy", seconds=0.2, label="ended")
        refusing = True
        # the outcome refused for longer than the lease (retried every lease/3 at most)
        await eventually(lambda: outcomes_refused >= 5, what="the outcome refused past the lease")
        lost = await client.get(task_id)  # a reader finds the lease run out
        assert lost["status"] == "failed", lost
        assert lost["error"]["data"] == {"reason": "worker_lost"}
        refusing = False
        await eventually(
            lambda: any("outcome was not stored" in r.getMessage() for r in caplog.records),
            what="the outcome's warning",
        )
        assert (await client.get(task_id))["status"] == "failed"  # the loss stands
    assert seen.reasons["ended"] is None  # the work ran to its end
    said = said_of(caplog, task_id)
    assert len(said) == 1, said
    assert f"task {task_id} ended, but its outcome was not stored" in said[0]


def said_of(caplog: pytest.LogCaptureFixture, task_id: str) -> list[str]:
    """What mcp_asgi.tasks logged of the task `task_id`."""
    said = [r.getMessage() for r in caplog.records if r.name == "mcp_asgi.tasks"]
    return [message for message in said if f"task {task_id} " in message]


async def test_server_shutdown_cancels_running_tasks(seen: Seen) -> None:
    """The app's shutdown cancels the tasks it runs (server_shutdown)."""
    with serve(task_app(seen), timeout_graceful_shutdown=1) as live:
        client = TaskClient(live.url)
        await client.start("sleepy", seconds=30, label="shut")
        await wait_for(seen.event("shut"))
    assert seen.reasons["shut"] is CancelReason.SERVER_SHUTDOWN


async def test_a_call_without_the_extension_is_a_plain_call(url: str, seen: Seen) -> None:
    """A 2026-07-28 client that does not declare the extension: a task-optional tool runs
    as an ordinary request, and a task-required one is refused (-32021)."""
    plain = McpTestClient(url + "/mcp")
    call = {"name": "sleepy", "arguments": {"seconds": 0, "label": "plain"}}
    answered = await plain.request("tools/call", call)
    assert answered.final["result"]["content"][0]["text"] == "plain slept 0s"
    assert "taskId" not in answered.final["result"]
    refused = await plain.request("tools/call", {"name": "confirm", "arguments": {"label": "x"}})
    assert refused.final["error"]["code"] == -32021


async def test_max_threads_bounds_the_threads_of_tasks(seen: Seen) -> None:
    """max_threads=1: a second `def` task waits for the endpoint's one thread slot while
    the first runs (they share it with every request), and starts once it is cancelled."""
    app = task_app(seen, max_threads=1)
    with serve(app) as live:
        client = TaskClient(live.url)
        first = await client.start("threaded", seconds=30, label="first")
        await wait_for(seen.event("first"))
        assert app._runtime.threads.in_use == 1
        second = await client.start("threaded", seconds=30, label="second")
        await eventually(lambda: app._runtime.threads.waiting == 1, what="a wait for the slot")
        assert not seen.event("second").is_set()
        await client.rpc("tasks/cancel", first)
        await wait_for(seen.event("second"))
        await client.rpc("tasks/cancel", second)
        await client.until(second, "cancelled")
    assert seen.reasons == {
        "first": CancelReason.TASK_CANCELLED,
        "second": CancelReason.TASK_CANCELLED,
    }
