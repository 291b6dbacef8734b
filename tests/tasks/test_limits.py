"""Tasks cannot be hoarded (issue 25): a client runs at most `max_tasks_per_client` tasks
(429), the process at most `max_tasks` (503), a result over `max_task_result_bytes` is not
kept (the task fails saying so), ended tasks keep at most `max_kept_task_bytes_per_client`
(429) and `max_kept_task_bytes` (503) until their TTL ends, and a large result served by
tasks/get counts against the client's rate."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError
from starlette.applications import Starlette

from mcp_asgi import McpMiddleware, McpSettings
from mcp_asgi.limits import TooManyRequests
from mcp_asgi.protocol.jsonrpc import ProtocolError
from mcp_asgi.tasks.capacity import KeptBytes
from mcp_asgi.testing import serve

from .apps import TaskClient, task_app, task_server, with_users


def users_app(**settings: Any) -> Any:
    """The task server, each request's client the `x-user` it names."""
    mcp = McpMiddleware(
        Starlette(), server=task_server(), settings=McpSettings(auth_host_identity=True, **settings)
    )
    return with_users(mcp)


async def refused(
    client: TaskClient, status: int, limit: str, tool: str = "sleepy", **arguments: Any
) -> dict[str, Any]:
    """A tools/call refused with HTTP `status` and Retry-After, naming the setting `limit`."""
    arguments = arguments or {"seconds": 30, "label": "refused"}
    call = {"name": tool, "arguments": arguments}
    response = await client.mcp.request("tools/call", call)
    assert response.status == status, response.final
    assert int(response.headers["retry-after"]) >= 1
    error: dict[str, Any] = response.final["error"]
    assert error["data"]["limit"] == limit
    assert limit in error["message"]
    return error


async def test_a_client_runs_at_most_max_tasks_per_client() -> None:
    """alice's third running task is refused (429, Retry-After) while bob still starts
    his; once one of hers has ended (cancelled), she may start another."""
    with serve(users_app(max_tasks_per_client=2), timeout_graceful_shutdown=1) as live:
        alice, bob = TaskClient(live.url, "alice"), TaskClient(live.url, "bob")
        first = await alice.start("sleepy", seconds=30, label="a1")
        await alice.start("sleepy", seconds=30, label="a2")
        await refused(alice, 429, "max_tasks_per_client")
        await bob.start("sleepy", seconds=30, label="b1")
        await alice.rpc("tasks/cancel", first)
        await alice.until(first, "cancelled")
        await alice.start("sleepy", seconds=30, label="a3")


async def test_the_process_runs_at_most_max_tasks() -> None:
    """With `max_tasks` running, anyone's next task is refused (503, Retry-After: another
    replica may take it), within their own per-client limit."""
    with serve(users_app(max_tasks=2), timeout_graceful_shutdown=1) as live:
        alice, bob = TaskClient(live.url, "alice"), TaskClient(live.url, "bob")
        await alice.start("sleepy", seconds=30, label="a1")
        await bob.start("sleepy", seconds=30, label="b1")
        error = await refused(TaskClient(live.url, "carol"), 503, "max_tasks")
        assert error["data"]["reason"] == "server_busy"


async def test_a_result_over_max_task_result_bytes_fails_the_task() -> None:
    """A result larger than the setting is not kept: the task is failed with an error
    naming the setting and the size, and tasks/get serves only that; a smaller one is
    kept."""
    with serve(task_app(max_task_result_bytes=1000), timeout_graceful_shutdown=1) as live:
        client = TaskClient(live.url)
        small = await client.until(await client.start("big", size=100), "completed", "failed")
        assert small["result"]["content"][0]["text"] == "x" * 100
        task_id = await client.start("big", size=5000)
        response = await client.mcp.request("tasks/get", {"taskId": task_id})
    failed = response.final["result"]
    assert failed["status"] == "failed"
    assert "result" not in failed
    assert failed["error"]["data"]["reason"] == "result_too_large"
    assert failed["error"]["data"]["limit"] == "max_task_result_bytes"
    assert failed["error"]["data"]["bytes"] > 5000
    assert "max_task_result_bytes" in failed["statusMessage"]
    assert len(response.raw) < 1000


async def test_a_large_result_served_counts_against_the_rate() -> None:
    """Each tasks/get of a 640 KiB result counts as 11 requests (one per full 64 KiB, plus
    the request): a burst of 60 serves it about 5 times, then 429 with Retry-After, where
    plain counting would serve it 59 times."""
    app = task_app(rate_limit=1, rate_limit_burst=60)
    with serve(app, timeout_graceful_shutdown=1) as live:
        client = TaskClient(live.url)
        task_id = await client.start("big", size=640 * 1024)
        served = 0
        for _ in range(30):
            response = await client.mcp.request("tasks/get", {"taskId": task_id})
            if response.status != 200:
                break
            assert response.final["result"]["status"] == "completed"
            served += 1
    assert response.status == 429
    assert int(response.headers["retry-after"]) >= 1
    assert response.final["error"]["data"]["limit"] == "rate_limit"
    assert 1 <= served <= 8


@pytest.mark.parametrize("window", [0, 5], ids=["ended-after-creation", "done-when-created"])
async def test_ended_tasks_keep_at_most_their_bytes_until_their_ttl(window: float) -> None:
    """Results kept for the TTL count against the client (429 past
    max_kept_task_bytes_per_client) and the process (503 past max_kept_task_bytes), with
    a Retry-After up to the TTL's end: whether the work ended after the task was stored
    (no result window) or before (stored with its result)."""
    settings = {
        "max_kept_task_bytes_per_client": 10_000,
        "max_kept_task_bytes": 25_000,
        "task_result_window": window,
    }
    with serve(users_app(**settings), timeout_graceful_shutdown=1) as live:
        alice, bob = TaskClient(live.url, "alice"), TaskClient(live.url, "bob")
        for client in (alice, alice, bob, bob):  # about 6.3 KB each
            await client.until(await client.start("big", size=6000), "completed")
        await refused(alice, 429, "max_kept_task_bytes_per_client", "big", size=10)
        error = await refused(TaskClient(live.url, "carol"), 503, "max_kept_task_bytes")
    assert 3000 < error["data"]["retryAfter"] <= 3600  # the default TTL, 1 h


def test_kept_bytes_are_given_back_when_their_ttl_ends() -> None:
    """What expired no longer counts; Retry-After is the time until the oldest expires;
    a task kept forever (no TTL) counts forever, its Retry-After capped at an hour."""
    kept = KeptBytes(per_client=100, total=150)
    kept.add("a", 60, expires=10.0)
    kept.add("a", 60, expires=5.0)
    with pytest.raises(TooManyRequests) as too_many:
        kept.check("a", now=1.0)
    assert too_many.value.headers == [(b"retry-after", b"4")]
    kept.check("a", now=5.0)  # the one that expired at 5 s is given back
    assert (kept.held("a"), kept.kept) == (60, 60)
    kept.add("b", 100, expires=None)
    with pytest.raises(ProtocolError) as busy:
        kept.check("c", now=6.0)
    assert busy.value.http_status == 503
    assert busy.value.headers == [(b"retry-after", b"4")]
    kept.check("c", now=10.0)
    with pytest.raises(TooManyRequests) as forever:
        kept.check("b", now=11.0)
    assert forever.value.headers == [(b"retry-after", b"3600")]


@pytest.mark.parametrize(
    "name",
    [
        "max_tasks_per_client",
        "max_tasks",
        "max_task_result_bytes",
        "max_kept_task_bytes_per_client",
        "max_kept_task_bytes",
    ],
)
def test_a_limit_of_zero_is_refused_at_start_up(name: str) -> None:
    """0 would refuse every task: the settings say which one is wrong."""
    zero: dict[str, Any] = {name: 0}
    with pytest.raises(ValidationError, match=rf"{name}\n.*greater than 0"):
        McpSettings(**zero)
