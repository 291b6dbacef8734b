"""Where one request's time goes, stage by stage, in process (no sockets, no server).

    python -m bench.stages                          # echo (async) on mcp_asgi and the floor
    python -m bench.stages --tool echo_sync         # the def tool: the thread hop's share
    python -m bench.stages --json

Each target is driven as `bench.inprocess` drives it (32 requests at a time), once plain
(µs per request on the wall clock and in CPU time of all threads) and once under cProfile.
Every function's own time (cProfile's tottime) goes to the stage its module belongs to; a
C function (json, regex, dict methods...) goes to the stage of its first Python caller.
The stages' shares of the profiled time, times the plain µs per request, estimate each
stage's µs. cProfile inflates small functions, so read shares and orders of magnitude, not
exact figures; the instructions of `valgrind --tool=callgrind` (docs/benchmarks.md) are the
load-independent total.

Stages: read (`http/body.py`); validate (JSON parsing, JSON-RPC and MCP validation,
Origin, Accept, Content-Type, limits, `requestState`); scope (`RequestScope`, its watcher,
the handler's task, `InFlight`, the endpoint's and middleware's own code, `Context`);
dispatch (`McpServer.dispatch`, the method and tool looked up); schema validation (the
arguments checked and bound: `server/schema.py`, `json_schema.py`, pydantic); handler (the
tool, and for a `def` tool the hop to its thread and back: `_loop/threads.py`,
`threading`, `queue`); encode (the result and the JSON-RPC response built and serialized);
write (`http/reply.py`, the ASGI `send`); telemetry (`mcp_asgi/telemetry`,
`opentelemetry`); anyio (cancel scopes, limiters); event loop (`asyncio`: tasks, futures,
the loop's turns); floor app (the floor's Starlette routing, request and response).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import pstats
import time
from collections import defaultdict
from typing import Any

from . import inprocess, targets

STAGES = (
    "read",
    "validate",
    "scope",
    "dispatch",
    "schema validation",
    "handler",
    "encode",
    "write",
    "telemetry",
    "anyio",
    "event loop",
    "floor app",
    "other",
)
# (path fragment, function name or "*") -> stage; the first match wins
RULES: tuple[tuple[str, str, str], ...] = (
    ("mcp_asgi/http/body.py", "*", "read"),
    ("mcp_asgi/http/reply.py", "dump", "encode"),
    ("mcp_asgi/http/reply.py", "encode_reply", "encode"),
    ("mcp_asgi/http/reply.py", "_encode", "encode"),
    ("mcp_asgi/http/reply.py", "*", "write"),
    ("mcp_asgi/http/", "*", "validate"),
    ("mcp_asgi/protocol/jsonrpc.py", "response", "encode"),
    ("mcp_asgi/protocol/", "*", "validate"),
    ("mcp_asgi/limits/", "*", "validate"),
    ("mcp_asgi/input/", "*", "validate"),
    ("mcp_asgi/server/listen.py", "*", "validate"),
    ("mcp_asgi/server/primitives.py", "invoke", "handler"),
    ("mcp_asgi/server/primitives.py", "_result", "encode"),
    ("mcp_asgi/server/content", "*", "encode"),
    ("mcp_asgi/server/schema.py", "*", "schema validation"),
    ("mcp_asgi/server/json_schema.py", "*", "schema validation"),
    ("pydantic", "*", "schema validation"),
    ("mcp_asgi/server/context.py", "*", "scope"),
    ("mcp_asgi/server/", "*", "dispatch"),
    ("mcp_asgi/_loop/threads.py", "*", "handler"),
    ("mcp_asgi/lifecycle/work.py", "run_sync", "handler"),
    ("mcp_asgi/lifecycle/work.py", "work", "handler"),
    ("mcp_asgi/lifecycle/", "*", "scope"),
    ("mcp_asgi/telemetry/", "*", "telemetry"),
    ("opentelemetry", "*", "telemetry"),
    ("mcp_asgi/", "*", "scope"),  # middleware.py, endpoint.py, inflight.py
    ("bench/targets.py", "echo", "handler"),
    ("bench/targets.py", "echo_sync", "handler"),
    ("bench/targets.py", "*", "floor app"),
    ("bench/inprocess.py", "*", "write"),  # the ASGI receive and send stand-ins
    ("starlette", "*", "floor app"),
    ("anyio", "*", "anyio"),
    ("sniffio", "*", "anyio"),
    ("threading.py", "*", "handler"),
    ("queue.py", "*", "handler"),
    ("asyncio", "*", "event loop"),
    ("contextlib.py", "*", "scope"),
)


def stage_of(path: str, name: str) -> str | None:
    for fragment, function, stage in RULES:
        if fragment in path and function in ("*", name):
            return stage
    return None


def attribute(stats: pstats.Stats) -> dict[str, float]:
    """Seconds of own time per stage."""
    raw: dict[Any, Any] = stats.stats  # type: ignore[attr-defined]
    seconds: dict[str, float] = defaultdict(float)
    for (path, _line, name), (_cc, _nc, tottime, _ct, callers) in raw.items():
        stage = stage_of(path, name)
        if stage is None and callers:  # a C function: its first Python caller's stage
            for caller_path, _l, caller_name in callers:
                stage = stage_of(caller_path, caller_name)
                if stage is not None:
                    break
        seconds[stage or "other"] += tottime
    return dict(seconds)


async def _profiled(app: Any, calls: int, concurrency: int, tool: str) -> pstats.Stats:
    profiler = cProfile.Profile()
    profiler.enable()
    await inprocess._measure(app, calls, concurrency, tool)
    profiler.disable()
    return pstats.Stats(profiler)


async def _run(args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in args.targets.split(","):
        app = targets.BUILDERS[name](inprocess._NullLog())
        stop = await inprocess._lifespan(app)
        try:
            tool = "echo" if name == "starlette-floor" else args.tool
            await inprocess._measure(app, args.calls // 4, args.concurrency, tool)  # warm up
            wall = await inprocess._measure(app, args.calls, args.concurrency, tool)
            cpu = await inprocess._measure(
                app, args.calls, args.concurrency, tool, time.process_time
            )
            seconds = attribute(await _profiled(app, args.calls, args.concurrency, tool))
        finally:
            await stop()
        total = sum(seconds.values()) or 1.0
        out[name] = {
            "tool": tool,
            "wall_us": round(wall, 1),
            "cpu_us": round(cpu, 1),
            "stages": {
                stage: {
                    "share": round(seconds[stage] / total, 4),
                    "us": round(cpu * seconds[stage] / total, 1),
                }
                for stage in STAGES
                if seconds.get(stage)
            },
        }
    return out


def table(results: dict[str, Any]) -> str:
    names = list(results)
    lines = [
        "| stage | " + " | ".join(f"{n} ({results[n]['tool']}) µs, share" for n in names) + " |",
        "|---|" + "---:|" * len(names),
    ]
    for stage in STAGES:
        cells = []
        for n in names:
            part = results[n]["stages"].get(stage)
            cells.append(f"{part['us']:.1f} ({100 * part['share']:.0f}%)" if part else "-")
        if any(c != "-" for c in cells):
            lines.append(f"| {stage} | " + " | ".join(cells) + " |")
    lines.append(
        "| **total, CPU of all threads** | "
        + " | ".join(f"**{results[n]['cpu_us']:.1f}**" for n in names)
        + " |"
    )
    lines.append(
        "| total, wall clock | " + " | ".join(f"{results[n]['wall_us']:.1f}" for n in names) + " |"
    )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="µs per request by stage, in process.")
    parser.add_argument("--targets", default="starlette-floor,mcp_asgi")
    parser.add_argument("--tool", default="echo", help="echo, or echo_sync (a def tool)")
    parser.add_argument("--calls", type=int, default=4000)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    results = asyncio.run(_run(args))
    print(json.dumps(results, indent=1) if args.json else table(results))


if __name__ == "__main__":
    main()
