"""Redis fails under two uvicorn replicas sharing it (tests/faults_app.py, a real
redis-server): paused with SIGSTOP (it accepts connections, answers nothing), then killed and
started again on the same port, while calls, a listen stream and 2025-era sessions run.

Every request ends while Redis is still away, with its result or the stated 503
(`store_unavailable`: a session or a task this replica cannot read); the health check says
degraded meanwhile and ok after; each replica logs the outage once per component, never per
request; and once Redis is back, without restarting anything, a change crosses replicas
again and the sessions and tasks go on."""

from __future__ import annotations

import shutil
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from mcp_asgi import Context, McpServer
from mcp_asgi.legacy.shared import CONTROL
from mcp_asgi.testing import McpResponse, McpTestClient, serve

from ..helpers import eventually, mcp_app, next_message
from ..servers import LegacyClient, RedisServer, Worker, wait_ready
from ..tasks.apps import TaskClient
from .test_legacy_replicas import opened_on
from .test_redis import LISTEN, until_method

# the first test starts two workers (its setup) on the shared 2-core machine
pytestmark = pytest.mark.timeout(90)
SETTINGS = {"MCP_REDIS_TIMEOUT": "0.5", "MCP_REDIS_RETRY_MAX": "0.5"}
WITHIN = 3.0  # seconds every request has, Redis still away (its own bound: 0.5 s)
PAUSE = 3.0  # seconds Redis stays paused, at least
UNAVAILABLE = "503 store_unavailable"


@dataclass
class Replica:
    worker: Worker
    log: Path
    seen: int = 0  # how much of the log earlier tests read

    @property
    def mcp(self) -> str:
        return self.worker.url + "/mcp"

    def new_lines(self) -> list[str]:
        """The log lines since the last call."""
        text = self.log.read_text(encoding="utf-8", errors="replace")
        lines, self.seen = text[self.seen :].splitlines(), len(text)
        return lines


@dataclass
class Fleet:
    redis: RedisServer
    a: Replica
    b: Replica
    channel: str

    def subscribed(self) -> bool:
        control = "mcp_asgi:" + CONTROL
        return self.redis.subscribers(self.channel) == 2 and self.redis.subscribers(control) == 2


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    """Two replicas on one redis-server, with short Redis timeouts, for the module."""
    executable = shutil.which("redis-server")
    if executable is None:
        pytest.skip("redis-server is not installed: run `make test`")
    workdir = tmp_path_factory.mktemp("faults")
    redis_server = RedisServer(executable, workdir)
    redis_server.start()
    channel = f"mcp_asgi:faults:{redis_server.port}"
    replicas: list[Replica] = []
    try:
        for name in "ab":
            log = workdir / f"{name}.log"
            worker = Worker(
                redis_server.url, channel, app="tests.faults_app:app", settings=SETTINGS, log=log
            )
            replicas.append(Replica(worker, log))
        fleet = Fleet(redis_server, replicas[0], replicas[1], channel)
        wait_ready(fleet.subscribed, "both replicas subscribed")
        yield fleet
    finally:
        for replica in replicas:
            replica.worker.stop()
        redis_server.stop()


def outcome(response: McpResponse) -> str:
    """`ok`, or the HTTP status and the error's reason."""
    final = response.final if response.messages else {}
    if response.status == 200 and "result" in final:
        return "ok"
    reason = final.get("error", {}).get("data", {}).get("reason")
    return f"{response.status} {reason}"


async def health(replica: Replica) -> dict[str, Any]:
    async with httpx.AsyncClient(verify=False) as http:
        response = await http.get(replica.worker.url + "/health", timeout=5)
    report: dict[str, Any] = response.json()
    assert response.status_code == (200 if report["status"] == "ok" else 503)
    return report


async def until_health(replica: Replica, status: str) -> dict[str, Any]:
    """The health report once it says `status` (15 s at most)."""
    for _ in range(150):
        report = await health(replica)
        if report["status"] == status:
            return report
        await anyio.sleep(0.1)
    raise AssertionError(f"health never said {status}: {report}")


async def opened(replica: Replica) -> LegacyClient:
    client = LegacyClient(replica.mcp)
    await client.initialize()
    return client


def on(replica: Replica, session: LegacyClient) -> LegacyClient:
    """A client of `session` talking to `replica`."""
    client = LegacyClient(replica.mcp)
    client.session_id, client.version = session.session_id, session.version
    return client


def echo(client: LegacyClient) -> Awaitable[McpResponse]:
    return client.call("tools/call", {"name": "echo", "arguments": {"text": "hi"}})


async def all_within(requests: dict[str, Callable[[], Awaitable[str]]]) -> dict[str, str]:
    """Run the requests at once; each one's outcome, every one ended within WITHIN."""
    outcomes: dict[str, str] = {}

    async def run(name: str, request: Callable[[], Awaitable[str]]) -> None:
        outcomes[name] = await request()

    with anyio.move_on_after(WITHIN):
        async with anyio.create_task_group() as tg:
            for name, request in requests.items():
                tg.start_soon(run, name, request)
    assert sorted(outcomes) == sorted(requests), "requests still pending with Redis away"
    return outcomes


def outage_lines(replica: Replica) -> dict[str, int]:
    """How many records of each kind the replica logged since the last look."""
    lines = replica.new_lines()
    counts = {
        "store lost": sum(line.startswith("WARNING mcp_asgi.store store: lost") for line in lines),
        "store back": sum(line.startswith("INFO mcp_asgi.store") for line in lines),
        "bus lost": sum(line.startswith("WARNING mcp_asgi.bus bus: lost") for line in lines),
        "bus back": sum(line.startswith("INFO mcp_asgi.bus") for line in lines),
        "other warnings": sum(
            line.startswith(("WARNING", "ERROR", "Traceback")) and " lost Redis " not in line
            for line in lines
        ),
    }
    return counts


async def test_a_paused_redis(fleet: Fleet) -> None:
    """SIGSTOP for about three seconds; a task's work ends meanwhile."""
    a, b = fleet.a, fleet.b
    a.new_lines(), b.new_lines()
    session = await opened(a)  # known to B too, before the pause
    assert outcome(await echo(on(b, session))) == "ok"
    only_a = await opened(a)  # B never saw it
    task_id = await TaskClient(a.worker.url).start("quick")
    tasks_b = TaskClient(b.worker.url)
    await tasks_b.until(task_id, "completed")
    modern_a, modern_b = McpTestClient(a.mcp), McpTestClient(b.mcp)
    async with McpTestClient(b.mcp).stream("subscriptions/listen", LISTEN) as stream:
        await next_message(stream)
        ending = await TaskClient(a.worker.url).start("slow", seconds=1.0)  # done while paused
        fleet.redis.pause()
        paused_at = anyio.current_time()
        try:

            async def new_session() -> str:
                fresh = await opened(a)  # served by A alone
                return outcome(await echo(fresh))

            async def modern(client: McpTestClient) -> str:
                return outcome(await client.request("tools/call", _echo_params()))

            async def notified() -> str:
                async with httpx.AsyncClient(verify=False) as http:
                    response = await http.post(a.worker.url + "/notify", timeout=WITHIN)
                return "ok" if response.status_code == 200 else str(response.status_code)

            async def streamed() -> str:
                body = session.body("tools/call", {"name": "progress"}, progress=True)
                response = await session.post(body, session.session_headers())
                assert [m.get("method") for m in response.messages[:-1]] == [
                    "notifications/progress"
                ] * 2
                return outcome(response)

            outcomes = await all_within(
                {
                    "2026 on A": lambda: modern(modern_a),
                    "2026 on B": lambda: modern(modern_b),
                    "session on A": lambda: _outcome_of(echo(session)),
                    "session on B": lambda: _outcome_of(echo(on(b, session))),
                    "session A's only, on B": lambda: _outcome_of(echo(on(b, only_a))),
                    "new session": new_session,
                    "SSE reply": streamed,
                    "change announced": notified,
                    "tasks/get on B": lambda: _outcome_of(
                        tasks_b.mcp.request("tasks/get", {"taskId": task_id})
                    ),
                    "new task on A": lambda: _outcome_of(
                        TaskClient(a.worker.url).mcp.request("tools/call", {"name": "quick"})
                    ),
                }
            )
            during = [await until_health(a, "degraded"), await until_health(b, "degraded")]
            more = await all_within(
                {f"again {i}": lambda: _outcome_of(echo(on(b, only_a))) for i in range(5)}
            )
            await anyio.sleep(PAUSE - (anyio.current_time() - paused_at))  # the rest of it
        finally:
            fleet.redis.resume()
        after = [await until_health(a, "ok"), await until_health(b, "ok")]
        async with httpx.AsyncClient(verify=False) as http:
            assert (await http.post(a.worker.url + "/notify")).status_code == 200
        crossed = await until_method(stream, "notifications/tools/list_changed")
    assert outcomes == {
        "2026 on A": "ok",
        "2026 on B": "ok",
        "session on A": "ok",
        "session on B": "ok",
        "session A's only, on B": UNAVAILABLE,
        "new session": "ok",
        "SSE reply": "ok",
        "change announced": "ok",
        "tasks/get on B": UNAVAILABLE,
        "new task on A": UNAVAILABLE,
    }
    assert set(more.values()) == {UNAVAILABLE}
    assert {r["store"] for r in during} == {"unreachable"}
    assert after == [{"status": "ok", "store": "ok", "bus": "ok"}] * 2
    assert crossed["method"] == "notifications/tools/list_changed"
    assert outcome(await echo(on(b, only_a))) == "ok"  # adopted now
    assert outcome(await echo(on(b, session))) == "ok"
    assert (await tasks_b.get(task_id))["status"] == "completed"
    # the outcome reached while Redis was away is stored once it is back: not lost
    ended = await tasks_b.until(ending, "completed", "failed")
    assert ended["status"] == "completed", ended
    assert ended["result"]["content"][0]["text"] == "slept 1s"
    for replica in (a, b):
        counts = outage_lines(replica)
        assert counts["store lost"] == counts["store back"] == 1, counts
        assert counts["bus lost"] == counts["bus back"] <= 1, counts
        assert counts["other warnings"] == 0, counts


async def test_a_restarted_redis(fleet: Fleet) -> None:
    """Redis killed mid-load and started again on the same port (empty: it saves nothing).
    The sessions both replicas serve go on there; the rest is as for a pause."""
    a, b = fleet.a, fleet.b
    a.new_lines(), b.new_lines()
    session = await opened(a)
    assert outcome(await echo(on(b, session))) == "ok"  # B serves it too now
    async with McpTestClient(b.mcp).stream("subscriptions/listen", LISTEN) as stream:
        await next_message(stream)
        stopped = anyio.Event()
        outcomes: list[str] = []
        down = False
        batches_while_down = 0

        async def load() -> None:
            nonlocal batches_while_down
            while not stopped.is_set():
                batches_while_down += down
                batch = await all_within(
                    {
                        "2026": lambda: _outcome_of(
                            McpTestClient(b.mcp).request("tools/call", _echo_params())
                        ),
                        "on A": lambda: _outcome_of(echo(session)),
                        "on B": lambda: _outcome_of(echo(on(b, session))),
                        "new": lambda: _outcome_of(LegacyClient(a.mcp).initialize()),
                    }
                )
                outcomes.extend(batch.values())

        async with anyio.create_task_group() as tg:
            tg.start_soon(load)
            await anyio.to_thread.run_sync(fleet.redis.stop)
            down = True
            during = [await until_health(a, "degraded"), await until_health(b, "degraded")]
            await eventually(lambda: batches_while_down >= 2, what="requests while Redis is down")
            down = False
            await anyio.to_thread.run_sync(fleet.redis.start)
            after = [await until_health(a, "ok"), await until_health(b, "ok")]
            stopped.set()
        await anyio.to_thread.run_sync(lambda: wait_ready(fleet.subscribed, "resubscribed"))
        async with httpx.AsyncClient(verify=False) as http:
            assert (await http.post(a.worker.url + "/notify")).status_code == 200
        crossed = await until_method(stream, "notifications/tools/list_changed")
    assert set(outcomes) == {"ok"}  # nothing needed a record it could not read
    assert {r["store"] for r in during} == {"unreachable"}
    assert after == [{"status": "ok", "store": "ok", "bus": "ok"}] * 2
    assert crossed["method"] == "notifications/tools/list_changed"
    assert outcome(await echo(on(b, session))) == "ok"
    assert outcome(await echo(session)) == "ok"
    for replica in (a, b):
        counts = outage_lines(replica)
        assert counts["store lost"] == counts["store back"] == 1, counts
        assert counts["bus lost"] == counts["bus back"] == 1, counts
        assert counts["other warnings"] == 0, counts


def _echo_params() -> dict[str, Any]:
    return {"name": "echo", "arguments": {"text": "hi"}}


async def _outcome_of(response: Awaitable[McpResponse]) -> str:
    return outcome(await response)


async def test_a_question_to_a_2025_client_without_redis_is_a_clear_error() -> None:
    """The store that carries the client's answer is out of reach: the handler's elicit
    fails at once with reason store_unavailable, answered as the call's error (not an
    internal error with a traceback, not a wait for an answer that cannot come)."""
    server = McpServer("no-redis")

    @server.tool()
    async def ask(ctx: Context) -> str:
        answer = await ctx.elicit("Who are you?", {"type": "object", "properties": {}})
        return str(answer.action)

    app = mcp_app(server, bus_url="redis://127.0.0.1:1/0", redis_timeout=0.3)
    with serve(app) as live:
        client, _ = await opened_on(live.url + "/mcp", live.url + "/mcp")  # this replica's only
        with anyio.fail_after(10):
            response = await client.call("tools/call", {"name": "ask"})
    error = response.final["error"]
    assert error["data"] == {"reason": "store_unavailable"}
    assert "cannot send elicitation/create" in error["message"]
