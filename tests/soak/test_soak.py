"""The soak (issue 28): one replica on Redis under an unbroken mixed load, official SDK
calls in both eras, calls its clients cancel at random by closing their sockets, listen
streams long and short, 2025-era sessions that come and go, tasks, while its RSS, open
fds, threads, asyncio tasks and the Redis key count are sampled. After the warm-up, none
may grow beyond the bounds of tests/soak/growth.py; once the load stops, the replica's
asyncio tasks and fds go back to what they were before it began.

SOAK_SECONDS (default 120: the short form in `make test`) is the length of the load;
`make soak` runs an hour. The samples are printed; SOAK_REPORT=path writes them, the
slopes and the outcomes as JSON (`python -m bench.soak_plot` draws them).

For finding what grows (docs/benchmarks.md): SOAK_LOAD=calls,listens,... runs only those
kinds of load (LOADS; all of them by default, and the checks that the load ran apply to
the kinds that ran), and SOAK_DIAG=1 (with SOAK_TRACEMALLOC=<frames>) samples the
replica's memory diagnostics (tests/soak/diag.py) too, takes a tracemalloc baseline at the
end of the warm-up and reports what grew since it, and what `malloc_trim(0)` gives back,
once the load is over."""

from __future__ import annotations

import json
import os
import random
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import httpx
import pytest

from ..fleet.load import Tally, listener, sdk_calls, tasks
from ..servers import MODERN, RedisServer, Worker
from . import diag, load
from .conftest import SETTINGS, TTL
from .growth import RSS_MB_PER_10K, SLACK, judge
from .sampler import RESOURCES, Sample, take

SECONDS = float(os.environ.get("SOAK_SECONDS", "120"))
WARMUP = max(45.0, SECONDS / 6)
"""Seconds of load before the slopes are measured (longer than every key's TTL)."""
INTERVAL = max(2.0, SECONDS / 300)
"""Seconds between samples: every 2 s in the short form, every 12 s in the hour."""
IDLE_TASKS = 2
"""How many asyncio tasks above their count before the load may remain once it is over."""
SEED = int(os.environ.get("SOAK_SEED", str(random.randrange(1 << 30))))
LOADS = ("calls", "tasks", "cancels", "sessions", "listens")
"""The kinds of load: SDK calls in both eras; task-capable calls polled to their end;
calls cut by their clients (2026-07-28 and 2025-era); 2025-era sessions that come and go;
listen streams (kept and short) with the announcements they hear."""
LOAD = frozenset(os.environ.get("SOAK_LOAD", ",".join(LOADS)).split(","))
assert not LOAD - set(LOADS), f"SOAK_LOAD: {sorted(LOAD - set(LOADS))} not in {LOADS}"


async def test_soak(replica: Worker, redis_server: RedisServer) -> None:
    tally, counts, stop = Tally(), load.Counts(), anyio.Event()
    samples: list[Sample] = []
    diagnosis: dict[str, Any] = {}
    cancellers = (load.cancels, load.cancels, load.legacy_cancels)
    started = time.monotonic()

    async def sample() -> Sample:
        requests = len(tally.calls) + counts.requests
        return await anyio.to_thread.run_sync(
            take, replica.pid, replica.url, redis_server.url, started, requests
        )

    async def sampling() -> None:
        print("\n  " + "  ".join(f"{name:>8}" for name in ("t", "requests", *RESOURCES)))
        while not stop.is_set():
            samples.append(await sample())
            row = samples[-1].as_dict()
            print("  " + "  ".join(f"{row[k]:>8}" for k in ("t", "requests", *RESOURCES)))
            if row["diag"] is not None:
                print("    diag", _diag_line(row["diag"]))
            await anyio.sleep(INTERVAL)

    before = await sample()
    with anyio.fail_after(SECONDS + 120):
        async with anyio.create_task_group() as drivers:
            url, rng = replica.url, random.Random(SEED)
            seeds = [rng.randrange(1 << 30) for _ in range(7)]
            if "calls" in LOAD:
                for name, mode in (("py-2026", MODERN), ("py-2025", "legacy")):
                    for n in (1, 2):
                        drivers.start_soon(sdk_calls, url, mode, f"{name}-{n}", tally, stop)
            if "tasks" in LOAD:
                drivers.start_soon(tasks, url, tally, stop)
            if "cancels" in LOAD:
                for driver, seed in zip(cancellers, seeds[:3], strict=True):
                    drivers.start_soon(driver, url, counts, stop, seed)
            if "sessions" in LOAD:
                for seed in seeds[3:5]:
                    drivers.start_soon(load.sessions, url, counts, stop, seed)
            if "listens" in LOAD:
                for seed in seeds[5:7]:
                    drivers.start_soon(load.listens, url, counts, stop, seed)
                drivers.start_soon(load.announcer, url, counts, stop)
            drivers.start_soon(sampling)
            if diag.ENABLED:
                drivers.start_soon(_baseline_after_warmup, replica.url)
            async with anyio.create_task_group() as listeners:  # streams kept the whole run
                if "listens" in LOAD:
                    for _ in (1, 2):
                        listeners.start_soon(listener, url, tally, stop)
                await anyio.sleep(SECONDS)
                listeners.cancel_scope.cancel()
            stop.set()
    growth = judge(samples, WARMUP)
    fds_band = next(g.band for g in growth if g.resource == "fds")
    after = await _settled(sample, before, fds_band[1])
    if diag.ENABLED:
        diagnosis["idle"] = await _diag(replica.url, "")
        diagnosis["idle_collected"] = await _diag(replica.url, "?collect=1")
        diagnosis["grown"] = await _diag(replica.url, "/top?n=60")
        diagnosis["trim"] = await _diag(replica.url, "/trim")
    outcomes = Counter(o for c in tally.calls for o in c.outcomes) + counts.outcomes
    report = _report(samples, growth, outcomes, tally, before, after)
    if diagnosis:
        report["diagnosis"] = diagnosis
    print(json.dumps({k: v for k, v in report.items() if k != "samples"}, indent=2))
    if os.environ.get("SOAK_REPORT"):
        await anyio.Path(os.environ["SOAK_REPORT"]).write_text(json.dumps(report, indent=2))

    # the load ran, and nothing in it failed
    if not set(LOADS) - LOAD:
        assert samples[-1].requests > 20 * SECONDS, report["requests"]
    good = {"ok", "cancelled", "legacy cancelled", "session closed", "session abandoned"}
    good |= {"listen closed", "listen event", "announced"}
    assert set(outcomes) <= good, outcomes
    if "listens" in LOAD:
        assert tally.listens["events"] > 0
        assert set(tally.listens) == {"opened", "events"}, tally.listens
    if "tasks" in LOAD:
        assert tally.tasks
        assert {t["status"] for t in tally.tasks.values()} == {"completed"}
    # nothing grew after the warm-up, and what the load held is given back
    assert [g.failure for g in growth if g.failure] == []
    # once the load is over: the asyncio tasks are back to their count before it, the fds
    # within their warm-up band (the Redis pool keeps the connections the load opened),
    # and every Redis key expired
    assert _idle(after, before, fds_band[1]), (before, after)


async def _diag(url: str, route: str) -> Any:
    """What the replica's diagnostics route diag.PREFIX + `route` answers."""
    async with httpx.AsyncClient(timeout=120) as client:
        return (await client.get(url + diag.PREFIX + route)).json()


async def _baseline_after_warmup(url: str) -> None:
    """The replica's tracemalloc baseline, taken as the warm-up ends."""
    await anyio.sleep(WARMUP)
    await _diag(url, "/baseline")


def _diag_line(figures: dict[str, Any]) -> str:
    """One sample's diagnostics on a line: pymalloc blocks, tracked objects, traced KB, and
    mallinfo2's heap, in-use and free KB."""
    info, py = figures.get("mallinfo") or {}, figures.get("pymalloc", {})
    maps = figures.get("maps", {})
    traced = figures.get("traced", [0, 0])[0]
    return (
        f"blocks {figures['blocks']} objects {figures['gc_objects']} traced_kb {traced // 1024}"
        f" | glibc arena_kb {info.get('arena', 0) // 1024} mmap_kb {info.get('hblkhd', 0) // 1024}"
        f" used_kb {info.get('uordblks', 0) // 1024} free_kb {info.get('fordblks', 0) // 1024}"
        f" | pymalloc arenas {py.get('arenas_allocated_current')}"
        f" used_kb {py.get('bytes_in_allocated_blocks', 0) // 1024}"
        f" free_kb {py.get('bytes_in_available_blocks', 0) // 1024}"
        f" | rss heap_kb {maps.get('heap_kb')} anon_kb {maps.get('anon_kb')}"
        f" file_kb {maps.get('file_kb')}"
        f" | growers {figures['growers']}"
    )


def _idle(now: Sample, before: Sample, fds: float) -> bool:
    return now.tasks <= before.tasks + IDLE_TASKS and now.fds <= fds and now.keys == 0


async def _settled(sample: Callable[[], Awaitable[Sample]], before: Sample, fds: float) -> Sample:
    """The replica once the load has stopped and it is idle again (`_idle`), or as it is
    after waiting for every key's TTL and 40 s more."""
    with anyio.move_on_after(float(TTL) + 40):
        while not _idle(now := await sample(), before, fds):  # noqa: ASYNC110 (another process)
            await anyio.sleep(1)
        return now
    return await sample()


def _report(
    samples: list[Sample],
    growth: list[Any],
    outcomes: Counter[str],
    tally: Tally,
    before: Sample,
    after: Sample,
) -> dict[str, Any]:
    return {
        "seconds": SECONDS,
        "warmup_s": WARMUP,
        "interval_s": INTERVAL,
        "seed": SEED,
        "load": sorted(LOAD),
        "settings": SETTINGS,
        "bounds": {"rss_mb_per_10k_requests": RSS_MB_PER_10K, "slack": SLACK},
        "requests": samples[-1].requests,
        "outcomes": dict(outcomes),
        "listens": dict(tally.listens),
        "tasks": dict(Counter(t.get("status") for t in tally.tasks.values())),
        "idle_before": before.as_dict(),
        "idle_after": after.as_dict(),
        "growth": [g.as_dict() for g in growth],
        "samples": [s.as_dict() for s in samples],
    }


pytestmark = pytest.mark.timeout(SECONDS + 300)
