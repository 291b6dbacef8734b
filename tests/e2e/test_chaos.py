"""Chaos: hundreds of concurrent calls (async, thread, subprocess, streamed subprocess and
timed-out; JSON and SSE) with seeded random disconnects on a real uvicorn server.

Afterwards nothing is left: no request in flight, no orphan counted, no child process
alive, no request task on the server's loop, every span ended; and the app's own route
answered throughout.
"""

from __future__ import annotations

import asyncio
import os
import random
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from opentelemetry.context import Context as OtelContext
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor

from mcp_asgi import CancelToken, Context, McpServer
from mcp_asgi.testing import McpTestClient, serve

from ..helpers import Otel, eventually, group_gone, mcp_app, request_tasks, shell

pytestmark = pytest.mark.usefixtures("subreaper")

SEED = 20261129
CALLS = 400
CONCURRENCY = 100
KINDS = ("async", "thread", "process", "stream", "deadline")


class SpanCounter(SpanProcessor):
    """Counts spans started and ended (the exporter only ever sees ended ones)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.started = 0
        self.ended = 0

    def on_start(self, span: Span, parent_context: OtelContext | None = None) -> None:
        with self._lock:
            self.started += 1

    def on_end(self, span: ReadableSpan) -> None:
        with self._lock:
            self.ended += 1


@dataclass(frozen=True)
class Plan:
    """One call: which tool, which reply mode, and whether (and when) the client leaves."""

    kind: str
    accept: str
    steps: int
    drop_after: float | None


def plans(rng: random.Random) -> list[Plan]:
    accepts = ("application/json", "text/event-stream")
    return [
        Plan(
            kind=rng.choice(KINDS),
            accept=rng.choice(accepts),
            steps=rng.randint(1, 25),
            drop_after=rng.uniform(0.0, 0.15) if rng.random() < 0.5 else None,
        )
        for _ in range(CALLS)
    ]


def build_server(pgids: Path, loops: list[asyncio.AbstractEventLoop]) -> McpServer:
    server = McpServer("chaos")

    @server.tool()
    async def loop_ref() -> str:
        """Lets the test find the server's event loop."""
        loops.append(asyncio.get_running_loop())
        return "ok"

    @server.tool(name="async")
    async def async_work(steps: int, ctx: Context) -> int:
        """Sleeps in 10 ms steps, reporting progress."""
        for step in range(steps):
            await ctx.report_progress(step + 1, steps)
            await anyio.sleep(0.01)
        return steps

    @server.tool(name="thread")
    def thread_work(steps: int, token: CancelToken) -> int:
        """Works in 5 ms steps in a thread, polling its token."""
        for _ in range(steps):
            if token.wait(0.005):
                token.raise_if_cancelled()
        return steps

    @server.tool(name="process")
    async def process_work(steps: int, ctx: Context) -> int:
        """A shell sleeping `steps` hundredths of a second, with a long-lived grandchild it
        kills when it ends normally (a cancel must kill it)."""
        script = f"echo $$ >> {pgids}; sleep 30 & sleep {steps / 100}; kill $!"
        await ctx.run_process(shell(script))
        return steps

    @server.tool(name="stream")
    async def stream_work(steps: int, ctx: Context) -> int:
        """Streams `steps` lines, 10 ms apart, each reported as progress."""
        loop = f"i=0; while [ $i -lt {steps} ]; do echo $i; i=$((i+1)); sleep 0.01; done"
        script = f"echo $$ >> {pgids}; sleep 30 & {loop}; kill $!"
        count = 0
        async with ctx.stream_process(shell(script)) as lines:
            async for _ in lines:
                count += 1
                await ctx.report_progress(count, steps)
        return count

    @server.tool(name="deadline", timeout=0.05)
    async def deadline_work(steps: int, ctx: Context) -> int:
        """Always runs past its 50 ms timeout."""
        await anyio.sleep(1 + steps)
        return steps

    return server


async def call(url: str, plan: Plan, outcomes: dict[str, int]) -> None:
    client = McpTestClient(url, headers={"accept": plan.accept})
    sse = plan.accept == "text/event-stream"
    params = {"name": plan.kind, "arguments": {"steps": plan.steps}}
    async with client.stream("tools/call", params, progress=sse) as stream:
        if plan.drop_after is not None:
            await anyio.sleep(plan.drop_after)
            await stream.drop()
            outcomes["dropped"] += 1
            return
        final: dict[str, Any] | None = None
        while (message := await stream.next_message()) is not None:
            final = message
    assert final is not None, plan
    if plan.kind == "deadline":
        assert final["error"]["data"] == {"reason": "timeout"}, final
        outcomes["timed out"] += 1
    else:
        assert final["result"]["structuredContent"] == {"result": plan.steps}, (plan, final)
        outcomes["completed"] += 1


async def home_status(url: str) -> int:
    """GET the host app's own `/` route; the status code."""
    async with httpx.AsyncClient() as client:
        response = await client.get(url + "/")
        return response.status_code


def live_children() -> list[str]:
    """Processes whose parent is this test process and that are not zombies."""
    me, found = str(os.getpid()), []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            stat = Path(f"/proc/{pid}/stat").read_bytes()
        except OSError:
            continue
        state, ppid = stat[stat.rfind(b")") + 2 :].split()[:2]
        if ppid.decode() == me and state not in (b"Z", b"X"):
            found.append(pid)
    return found


async def request_tasks_on(loop: asyncio.AbstractEventLoop) -> int:
    """How many uvicorn request tasks are still running on the server's loop (asked there)."""

    async def count() -> int:
        return len(request_tasks())

    future = asyncio.run_coroutine_threadsafe(count(), loop)
    return await anyio.to_thread.run_sync(future.result, 10)


async def test_chaos(otel: Otel, tmp_path: Path) -> None:
    """A few hundred mixed calls with random disconnects leave nothing behind."""
    spans = SpanCounter()
    otel.tracer_provider.add_span_processor(spans)
    before = set(live_children())  # servers other tests' session fixtures keep running
    pgids = tmp_path / "pgids"
    loops: list[asyncio.AbstractEventLoop] = []
    middleware = mcp_app(
        build_server(pgids, loops),
        otel,
        cancel_grace=2.0,
        process_kill_grace=0.5,
        rate_limit=None,  # one address plays many clients here
        max_requests_per_client=None,
    )
    outcomes = {"dropped": 0, "completed": 0, "timed out": 0}
    home_ok = home_failed = 0
    with serve(middleware) as server:
        url = server.url + "/mcp"
        assert (await McpTestClient(url).call_tool("loop_ref"))["content"][0]["text"] == "ok"
        [loop] = loops
        finished = anyio.Event()

        async def poll_home() -> None:
            nonlocal home_ok, home_failed
            while not finished.is_set():
                if await home_status(server.url) == 200:
                    home_ok += 1
                else:
                    home_failed += 1
                await anyio.sleep(0.02)

        async def run_all() -> None:
            limit = anyio.Semaphore(CONCURRENCY)

            async def one(plan: Plan) -> None:
                async with limit:
                    await call(url, plan, outcomes)

            async with anyio.create_task_group() as calls:
                for plan in plans(random.Random(SEED)):
                    calls.start_soon(one, plan)
            finished.set()

        with anyio.fail_after(25):
            async with anyio.create_task_group() as tg:
                tg.start_soon(poll_home)
                tg.start_soon(run_all)

        await eventually(lambda: not middleware._inflight, what="no request in flight")
        await eventually(lambda: otel.orphans_active() == 0, what="no orphan")
        with anyio.fail_after(10):
            while await request_tasks_on(loop):  # noqa: ASYNC110 - counted on another loop
                await anyio.sleep(0.01)
    assert sum(outcomes.values()) == CALLS
    assert outcomes["dropped"] > 50
    assert outcomes["completed"] > 50
    assert home_ok > 0
    assert home_failed == 0
    assert spans.started == spans.ended
    assert spans.ended >= CALLS - outcomes["dropped"]
    started_groups = [int(line) for line in pgids.read_text().split()]
    assert len(started_groups) > 20
    assert [pgid for pgid in started_groups if not group_gone(pgid)] == []
    assert [pid for pid in live_children() if pid not in before] == []
