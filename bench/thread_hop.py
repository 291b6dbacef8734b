"""The cost of one hop to a worker thread and back, side by side in one run.

    python -m bench.thread_hop              # asyncio and uvloop, 3 rounds each

`concurrency` tasks each hand `lambda: None` to a thread in a loop; CPU time of the whole
process (all threads) and wall time per call, for:

* ``anyio.to_thread.run_sync(abandon_on_cancel=True)`` (what mcp_asgi used before);
* ``loop.run_in_executor`` with a `ThreadPoolExecutor` (asyncio's own way);
* ``mcp_asgi._loop.threads.run_in_thread`` (what sync handlers use now).

Rounds interleave the three; the report gives each one's median per loop.
"""

from __future__ import annotations

import argparse
import asyncio
import contextvars
import json
import statistics
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import anyio
import anyio.to_thread

from mcp_asgi._loop.threads import run_in_thread

Hop = Callable[[Callable[[], object]], Awaitable[object]]


async def _per_call(hop: Hop, calls: int, concurrency: int) -> tuple[float, float]:
    async def worker(n: int) -> None:
        for _ in range(n):
            await hop(_nothing)

    per_task = calls // concurrency
    await asyncio.gather(*(worker(max(1, per_task // 10)) for _ in range(concurrency)))
    cpu, wall = time.process_time(), time.perf_counter()
    await asyncio.gather(*(worker(per_task) for _ in range(concurrency)))
    done = per_task * concurrency
    return (time.process_time() - cpu) / done * 1e6, (time.perf_counter() - wall) / done * 1e6


def _nothing() -> None:
    pass


async def _run(rounds: int, calls: int, concurrency: int) -> dict[str, dict[str, float]]:
    loop = asyncio.get_running_loop()
    executor = ThreadPoolExecutor(max_workers=concurrency)

    async def with_anyio(fn: Callable[[], object]) -> object:
        return await anyio.to_thread.run_sync(fn, abandon_on_cancel=True)

    async def with_executor(fn: Callable[[], object]) -> object:
        return await loop.run_in_executor(executor, contextvars.copy_context().run, fn)

    async def with_pool(fn: Callable[[], object]) -> object:
        return await run_in_thread(fn, bounded=True)  # the caller bounds them (ThreadSlots)

    hops: dict[str, Hop] = {
        "anyio.to_thread.run_sync": with_anyio,
        "loop.run_in_executor": with_executor,
        "mcp_asgi run_in_thread": with_pool,
    }
    seen: dict[str, list[tuple[float, float]]] = {name: [] for name in hops}
    for round_no in range(rounds):
        order = list(hops)[::-1] if round_no % 2 else list(hops)
        for name in order:
            seen[name].append(await _per_call(hops[name], calls, concurrency))
    executor.shutdown()
    return {
        name: {
            "cpu_us": round(statistics.median(c for c, _ in values), 1),
            "wall_us": round(statistics.median(w for _, w in values), 1),
        }
        for name, values in seen.items()
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="µs per hop to a worker thread and back.")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--calls", type=int, default=8000)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    import uvloop

    results: dict[str, Any] = {}
    for loop_name, runner in (("asyncio", asyncio.run), ("uvloop", uvloop.run)):
        results[loop_name] = runner(_run(args.rounds, args.calls, args.concurrency))
    if args.json:
        print(json.dumps(results, indent=1))
        return
    print("| loop | hop | CPU µs/call | wall µs/call |")
    print("|---|---|---:|---:|")
    for loop_name, rows in results.items():
        for name, row in rows.items():
            print(f"| {loop_name} | `{name}` | {row['cpu_us']} | {row['wall_us']} |")


if __name__ == "__main__":
    main()
