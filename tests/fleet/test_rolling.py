"""Rolling restart under load (issue 28): three replicas behind HAProxy restarted one by one
(SIGTERM, drain, start) while official SDK clients call tools (progress streams, long
calls), listen for changes and run tasks. Asserted are outcomes, not timings: every call
completes, possibly after retryable answers only; none hangs; listen streams end gracefully
and listen again; every task ends completed or failed saying so, readable on every replica;
every request in flight at a SIGTERM has its span, with its reason if it was cut. The
latency figures are printed (FLEET_REPORT=path also writes them as JSON). `make fleet` runs
the longer form: several rolling restarts in a row (FLEET_ROUNDS)."""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
from collections import Counter
from pathlib import Path
from typing import Any

import anyio
import pytest

from mcp_asgi.testing import McpTestClient

from ..helpers import eventually, trigger
from ..servers import MODERN
from ..tasks.apps import TASKS, TaskClient
from .load import RETRYABLE, Call, Tally, listener, sdk_calls, tasks
from .rig import CHANNEL, Fleet

NODE_DIR = Path(__file__).parent.parent / "node"
STEADY = 6.0  # seconds of load before the first SIGTERM, and after the last replica is back
REASON = "mcp_asgi.cancellation.reason"
METHOD = {"echo": "tools/call", "paced": "tools/call", "paced-long": "tools/call"}
METHOD |= {"task-start": "tools/call", "task-get": "tasks/get"}
"""The method of each kind of call the load makes."""
ROUNDS = int(os.environ.get("FLEET_ROUNDS", "1"))  # rolling restarts (`make fleet`: more)


async def test_rolling_restart_under_load(fleet: Fleet, tmp_path: Path) -> None:
    node = shutil.which("node")
    assert node is not None, "Node.js is needed (make test installs it in tests/node)"
    assert (NODE_DIR / "node_modules" / "@modelcontextprotocol" / "sdk").is_dir(), (
        "run `npm ci --prefix tests/node` (make test does)"
    )
    tally, stop, stop_file = Tally(), anyio.Event(), tmp_path / "stop"
    ts: dict[str, Any] = {}

    async def ts_client() -> None:
        done = await anyio.run_process(
            [node, str(NODE_DIR / "fleet_client.mjs"), fleet.url + "/mcp", str(stop_file)],
            cwd=NODE_DIR,
            check=False,
            stderr=subprocess.PIPE,
        )
        assert done.returncode == 0, done.stderr.decode()
        ts.update(json.loads(done.stdout))

    # tasks outliving the run: whichever replica runs one is restarted under it
    on_fleet = TaskClient(fleet.url)
    long_tasks = [await on_fleet.start("sleepy", seconds=600, label=f"long{n}") for n in (1, 2)]
    with anyio.fail_after(240 * ROUNDS):
        async with anyio.create_task_group() as load:
            for name, mode in (("py-2026", MODERN), ("py-2025", "legacy")):
                for n in (1, 2):
                    load.start_soon(sdk_calls, fleet.url, mode, f"{name}-{n}", tally, stop)
            load.start_soon(tasks, fleet.url, tally, stop)
            load.start_soon(ts_client)
            async with anyio.create_task_group() as listeners:
                for _ in (1, 2):
                    listeners.start_soon(listener, fleet.url, tally, stop)
                await eventually(lambda: tally.listens["opened"] == 2, 30, "both listening")
                await anyio.sleep(STEADY)
                for _ in range(ROUNDS):
                    await anyio.to_thread.run_sync(fleet.rolling_restart)
                await anyio.sleep(STEADY)
                await _listeners_hear_a_change(fleet, tally, 2)
                listeners.cancel_scope.cancel()
            stop.set()
            stop_file.touch()

    for task_id in long_tasks:
        tally.tasks[task_id] = await on_fleet.until(task_id, "failed", "completed", limit=30)
        assert tally.tasks[task_id]["status"] == "failed"
    calls = tally.calls + [Call(**c) for c in ts["calls"]]
    outcomes = Counter(o for c in calls for o in c.outcomes)
    report = _report(fleet, calls, outcomes, tally, ts["progress"])
    print(json.dumps(report, indent=2))
    if os.environ.get("FLEET_REPORT"):
        await anyio.Path(os.environ["FLEET_REPORT"]).write_text(json.dumps(report, indent=2))

    # every call completed, after retryable answers only; none hung
    assert [c for c in calls if not c.ok] == []
    assert set(outcomes) <= {"ok", *RETRYABLE}, outcomes
    assert {c.client for c in calls} >= {"py-2026-1", "py-2025-1", "ts-2025", "tasks"}
    # listen streams: each listener's stream was cut at least once, always gracefully
    assert tally.listens["ended gracefully"] >= 2, tally.listens
    assert set(tally.listens) <= {"opened", "events", "ended gracefully"}, tally.listens
    await _tasks_are_readable_everywhere(fleet, tally)
    _cut_requests_have_spans(fleet, calls, tally)
    _every_call_has_its_span(fleet, calls, len(long_tasks))


async def _listeners_hear_a_change(fleet: Fleet, tally: Tally, listeners: int) -> None:
    """Once every replica is subscribed to the bus and every listener listens again, a
    change announced on one replica reaches every listener, wherever its stream is now."""

    def listening() -> bool:
        return tally.listens["opened"] - tally.listens["ended gracefully"] == listeners

    subscribed = len(fleet.replicas)
    await eventually(lambda: fleet.redis.subscribers(CHANNEL) == subscribed, 30, "the bus")
    await eventually(listening, 30, "every listener listening again")
    await trigger(fleet.url, "POST", "/notify")
    await eventually(lambda: tally.listens["events"] == listeners, 30, "the change heard")


async def _tasks_are_readable_everywhere(fleet: Fleet, tally: Tally) -> None:
    """Every task ended (completed with its result, or failed saying the server shut
    down), and every replica reads the same outcome from the shared store."""
    assert tally.tasks
    for task_id, last in tally.tasks.items():
        assert last["status"] in ("completed", "failed"), last
        if last["status"] == "completed":
            assert last["result"]["content"][0]["text"].endswith("slept 1s"), last
        else:
            assert "shut" in json.dumps(last["error"]), (last, fleet.replica_records())
        for replica in fleet.replicas:
            mcp = McpTestClient(replica.url + "/mcp", capabilities=TASKS)
            seen = (await mcp.request("tasks/get", {"taskId": task_id})).final["result"]
            assert (seen["status"], seen.get("result"), seen.get("error")) == (
                last["status"],
                last.get("result"),
                last.get("error"),
            )


def _cut_requests_have_spans(fleet: Fleet, calls: list[Call], tally: Tally) -> None:
    """On each replica, every request span open at its SIGTERM ended either finished or
    cut with reason server_shutdown; the calls, listen streams and tasks cut are exactly
    the ones the clients saw cut."""
    for restart in fleet.restarts:
        mine = fleet.spans(restart.pid)
        assert mine, f"no spans from {restart.name}"
        for span in mine:
            started, ended = _seconds(span["start_time"]), _seconds(span["end_time"])
            if started < restart.signalled < ended:
                reason = span["attributes"].get(REASON)
                assert reason in (None, "server_shutdown"), span
                assert reason or span["status"]["status_code"] != "ERROR", span
    cut = Counter(
        span["name"].split(" ")[0]
        for span in fleet.spans()
        if span["attributes"].get(REASON) == "server_shutdown"
    )
    seen_cut = Counter(METHOD[c.what] for c in calls for o in c.outcomes if o == "server_shutdown")
    seen_cut["subscriptions/listen"] = tally.listens["ended gracefully"]
    seen_cut["task"] = sum(task["status"] == "failed" for task in tally.tasks.values())
    assert +cut == +seen_cut


def _every_call_has_its_span(fleet: Fleet, calls: list[Call], long_tasks: int) -> None:
    """Every tools/call attempt that reached a replica (answered, or cut) has exactly one
    span there: none was lost with its process."""
    reached = sum(
        o in ("ok", "server_shutdown")
        for c in calls
        if METHOD[c.what] == "tools/call"
        for o in c.outcomes
    )
    spans = sum(span["name"].startswith("tools/call ") for span in fleet.spans())
    assert spans == reached + long_tasks


def _seconds(iso: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


def _report(
    fleet: Fleet, calls: list[Call], outcomes: Counter[str], tally: Tally, ts_progress: int
) -> dict[str, Any]:
    """Calls, outcomes, and latency (p50/p99 of whole calls, retries included) of the
    steady state against the restart window (first SIGTERM to the last replica back)."""
    first, last = fleet.restarts[0].signalled, fleet.restarts[-1].back

    def figures(window: list[Call]) -> dict[str, Any]:
        by_what: dict[str, Any] = {}
        for what in sorted({c.what for c in window}):
            ms = sorted((c.ended - c.started) * 1000 for c in window if c.what == what)
            p99 = ms[min(len(ms) - 1, int(len(ms) * 0.99))]
            by_what[what] = {"calls": len(ms), "p50_ms": statistics.median(ms), "p99_ms": p99}
        return by_what

    return {
        "load_s": round(max(c.ended for c in calls) - min(c.started for c in calls), 1),
        "calls": len(calls),
        "attempts": sum(outcomes.values()),
        "outcomes": dict(outcomes),
        "retried_calls": sum(len(c.outcomes) > 1 for c in calls),
        "progress_notifications": tally.progress + ts_progress,
        "listens": dict(tally.listens),
        "tasks": dict(Counter(t["status"] for t in tally.tasks.values())),
        "drains_s": [round(r.exited - r.signalled, 1) for r in fleet.restarts],
        "restarts_s": [round(r.back - r.signalled, 1) for r in fleet.restarts],
        "steady": figures([c for c in calls if c.started < first or c.started > last]),
        "restarting": figures([c for c in calls if first <= c.started <= last]),
    }


pytestmark = pytest.mark.timeout(300 * ROUNDS)
