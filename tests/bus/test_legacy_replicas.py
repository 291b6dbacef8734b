"""2025-era sessions across replicas: two uvicorn workers sharing a real redis-server
(tests/replica_app.py). A session opened on A is served by B; a cancel, a DELETE and an
elicitation answer POSTed to B reach the request running on A; a stream A closed early is
resumed on B; the official Python SDK cut off from A by the network resumes its call and its
GET stream on B. Without a record, B answers 404. The workers run with
`legacy_disconnect_cancels=False` (what resumption is for) and a short `retry`. The tests
run on one redis-server and on a Redis Cluster (there, a session's keys share a slot)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import anyio
import httpx
import pytest
from mcp import Client

from mcp_asgi.legacy.shared import CONTROL

from ..cut_proxy import CutProxy, lines
from ..helpers import eventually
from ..interop.test_legacy_node import NODE, NODE_DIR
from ..legacy.test_resume import get_headers, opened, read_events
from ..servers import (
    LegacyClient,
    RedisCluster,
    RedisServer,
    Worker,
    redis_executable,
    wait_ready,
)

RESUMING = {"MCP_LEGACY_DISCONNECT_CANCELS": "false", "MCP_LEGACY_SSE_RETRY": "0.1"}


@pytest.fixture(scope="module", params=["redis", "cluster"])
def replicas(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, str]]:
    """The /mcp URLs of two workers sharing one redis-server, or the session's Redis
    Cluster (bus and store), for the module: each test opens sessions of its own."""
    redis: RedisServer | RedisCluster
    if request.param == "cluster":
        redis = request.getfixturevalue("redis_cluster")
    else:
        redis = RedisServer(redis_executable(), tmp_path_factory.mktemp("redis"))
        redis.start()
    channel = f"mcp_asgi:replicas:{request.param}"
    workers: list[Worker] = []
    try:
        for _ in range(2):
            workers.append(
                Worker(redis.url, channel, app="tests.replica_app:app", settings=RESUMING)
            )
        control = "mcp_asgi:" + CONTROL
        wait_ready(lambda: redis.subscribers(control) == 2, "both replicas listening")
        yield workers[0].url + "/mcp", workers[1].url + "/mcp"
    finally:
        for worker in workers:
            worker.stop()
        if isinstance(redis, RedisServer):
            redis.stop()


async def opened_on(url: str, other: str) -> tuple[LegacyClient, LegacyClient]:
    """A session initialized on `url` (declaring elicitation), and a client of the same
    session on `other`."""
    a = LegacyClient(url)
    body = a.body(
        "initialize",
        {
            "protocolVersion": a.version,
            "capabilities": {"elicitation": {}},
            "clientInfo": {"name": "t", "version": "1"},
        },
    )
    response = await a.post(body, {"content-type": "application/json", "accept": "*/*"})
    assert response.status == 200
    a.session_id = response.headers["mcp-session-id"]
    b = LegacyClient(other)
    b.session_id, b.version = a.session_id, a.version
    return a, b


async def _first(stream: Any) -> dict[str, Any]:
    with anyio.fail_after(10):
        message = await stream.next_message()
    assert message is not None
    return dict(message)


async def test_a_session_opened_on_one_replica_is_served_by_another(
    replicas: tuple[str, str],
) -> None:
    """B adopts A's session from Redis; an id nobody opened is 404 there (one with braces
    too, which could not be a hash tag)."""
    _, b = await opened_on(*replicas)
    listed = await b.call("tools/list")
    assert listed.status == 200
    assert {t["name"] for t in listed.final["result"]["tools"]} == {
        "wait",
        "ask",
        "paced",
        "polled",
    }
    for unknown in ("not-a-session", "{a}b"):  # braces: no hash tag of a session of ours
        b.session_id = unknown
        assert (await b.call("tools/list")).status == 404


async def test_a_cancel_posted_to_another_replica_reaches_the_request(
    replicas: tuple[str, str],
) -> None:
    """notifications/cancelled POSTed to B ends the call running on A: its stream ends
    with no result."""
    a, b = await opened_on(*replicas)
    async with a.open("tools/call", {"name": "wait"}, id=7, progress=True) as stream:
        assert (await _first(stream))["method"] == "notifications/progress"
        notified = await b.notify("notifications/cancelled", {"requestId": 7})
        assert notified.status == 202
        with anyio.fail_after(10):
            assert await stream.next_message() is None


async def test_a_delete_on_another_replica_ends_the_session_everywhere(
    replicas: tuple[str, str],
) -> None:
    """DELETE on B ends A's call in flight, and A then answers 404."""
    a, b = await opened_on(*replicas)
    async with a.open("tools/call", {"name": "wait"}, progress=True) as stream:
        await _first(stream)
        assert (await b.delete()).status == 204
        with anyio.fail_after(10):
            assert await stream.next_message() is None
    assert (await a.call("tools/list")).status == 404


async def test_an_answer_posted_to_another_replica_reaches_the_handler(
    replicas: tuple[str, str],
) -> None:
    """The handler on A elicits; the answer POSTed to B resumes it."""
    a, b = await opened_on(*replicas)
    async with a.open("tools/call", {"name": "ask"}) as stream:
        asked = await _first(stream)
        assert asked["method"] == "elicitation/create"
        answer = {"jsonrpc": "2.0", "id": asked["id"], "result": {"action": "decline"}}
        assert (await b.post(answer, b.session_headers())).status == 202
        final = await _first(stream)
    assert final["result"]["structuredContent"] == {"action": "decline", "content": None}


async def test_a_stream_closed_on_one_replica_is_resumed_on_another(
    replicas: tuple[str, str],
) -> None:
    """A closes the call's stream early; the GET with its Last-Event-ID goes to B, which
    follows A's log in Redis to the result."""
    a, b = await opened_on(*replicas)
    body = a.body("tools/call", {"name": "polled"})
    async with opened(replicas[0], a.session_headers(), body) as response:
        events = await read_events(response)
    async with opened(replicas[1], get_headers(b, events[0]["id"])) as response:
        rest = await read_events(response)
    final = [e for e in rest if e.get("data")]
    assert len(final) == 1
    assert '"polled"' in final[0]["data"]


@pytest.mark.parametrize("replicas", ["cluster"], indirect=True)
async def test_on_a_cluster_a_sessions_keys_share_one_slot(
    replicas: tuple[str, str], redis_cluster: RedisCluster
) -> None:
    """The record of a session and its streams (a call's events, its end) hold the session
    id as their hash tag: one slot, on one master; another session's may be elsewhere."""
    a, _ = await opened_on(*replicas)
    async with opened(replicas[0], a.session_headers(), a.body("tools/call", {"name": "polled"})):
        pass
    pattern = f"*{a.session_id}*"
    await eventually(lambda: len(redis_cluster.keys(pattern)) >= 3, what="the call's end")
    keys = redis_cluster.keys(pattern)
    assert {name.split(":")[1] for name, _ in keys} == {"session", "events"}
    assert len({slot for _, slot in keys}) == 1


async def test_the_python_sdk_cut_off_from_one_replica_resumes_on_another(
    replicas: tuple[str, str],
) -> None:
    """The official Python SDK (legacy mode) reaches A through a proxy; once its GET stream
    has brought a first tools/list_changed (so the SDK holds an event id of it: a stream
    cut before its first event reaches the client is opened anew, not resumed), and after
    the call's first progress, the proxy is cut and sends new connections to B, and a
    tools/list_changed is raised while the client is away. The SDK reconnects both streams
    with Last-Event-ID, now to B: the call's progress 2 and result (B follows A's log in
    Redis) and the notification (logged by A for its away GET stream, replayed by B)."""
    a_port, b_port = (int(url.rsplit(":", 1)[1].split("/")[0]) for url in replicas)
    seen: list[float] = []
    first, changes = anyio.Event(), [anyio.Event(), anyio.Event()]

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append(progress)
        first.set()

    async def on_message(message: Any) -> None:
        if getattr(message, "method", None) == "notifications/tools/list_changed":
            next(e for e in [*changes, anyio.Event()] if not e.is_set()).set()

    async with (
        CutProxy.running(a_port) as proxy,
        Client(proxy.url + "/mcp", mode="legacy", message_handler=on_message) as client,
        anyio.create_task_group() as tg,
    ):
        results: list[Any] = []

        async def call() -> None:
            results.append(await client.call_tool("paced", {}, progress_callback=on_progress))

        async with httpx.AsyncClient(timeout=10) as http:
            with anyio.fail_after(10):
                while not changes[0].is_set():  # until the GET stream is up and brought it
                    await http.post(replicas[0].removesuffix("/mcp") + "/notify")
                    with anyio.move_on_after(1.0):  # (the stream not up yet: nobody got it)
                        await changes[0].wait()
        tg.start_soon(call)
        with anyio.fail_after(10):
            await first.wait()
        proxy.target = b_port
        before = proxy.connections
        await proxy.cut()
        async with httpx.AsyncClient(timeout=10) as http:
            await http.post(replicas[1].removesuffix("/mcp") + "/notify")
        with anyio.fail_after(15):
            await changes[1].wait()
    assert results[0].content[0].text == "paced"
    assert seen == [1.0, 2.0]
    assert proxy.connections > before  # the client came back, to B


@pytest.mark.skipif(NODE is None, reason="Node.js is not installed")
async def test_the_typescript_sdk_answers_on_another_replica_after_a_cut(
    replicas: tuple[str, str],
) -> None:
    """The TypeScript SDK 1.x calls `ask` on A through the proxy; once A's
    elicitation/create has arrived, the proxy is cut and points at B. The SDK's answer is
    POSTed to B, reaches A's handler through Redis, and the call's stream, resumed on B
    with Last-Event-ID, brings A's result."""
    assert NODE is not None
    a_port, b_port = (int(url.rsplit(":", 1)[1].split("/")[0]) for url in replicas)
    async with CutProxy.running(a_port) as proxy:
        script = [NODE, str(NODE_DIR / "replica_legacy_client.mjs"), proxy.url + "/mcp"]
        async with await anyio.open_process(script, cwd=NODE_DIR) as process:
            assert process.stdout is not None
            assert process.stdin is not None
            output = lines(process.stdout)
            with anyio.fail_after(15):
                assert await anext(output) == "asked"
                proxy.target = b_port
                await proxy.cut()
                await process.stdin.send(b"go\n")
                out = json.loads(await anext(output))
                assert await process.wait() == 0
    assert out["result"] == {"action": "accept", "content": {}}
