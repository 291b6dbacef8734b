"""Would a compiled request path move the time? Issue 27 asks, where a goal is missed,
"whether a well-kept compiled dependency would move it". This compiles the request path's
modules with mypyc (from mypy, a dev dependency) in a copy of `mcp_asgi` and measures the
copy beside the tree, in one run:

    python -m bench.compiled                 # count and time (about 8 minutes)
    python -m bench.compiled --rounds 8 --duration 3 --no-counts
    python -m bench.compiled --write         # and rewrite docs/benchmarks.md's table
    python -m bench.compiled --build DIR     # only build the copy, for another bench's --code

- instructions per in-process echo (`bench.instructions`: the floor, `async`, `def`);
- the whole server process per echo on uvicorn h11 (`bench.server_counts`: instructions,
  cache misses, mispredicted branches), unless `--no-counts`;
- throughput on uvicorn h11 under `wrk`: the floor, mcp_asgi as it is and compiled,
  interleaved, the order turned each round; the ratio to the floor's req/s in the same
  round, its median over rounds.

It measures speed only: served to `bench.cancel_latency --code` (`--build DIR` makes a
copy to keep), the compiled copy does not stop a call whose client leaves (see "A
compiled request path" in docs/benchmarks.md).

The target is `mcp_asgi-limits` (the goals' own). The copy differs from the tree only where
mypyc needs it to: a class attribute annotated `Final[T]` is annotated `T` (mypyc cannot
build a slotted dataclass whose fields are `Final`; the annotation is the type checker's
only). Needs a C compiler and Python's headers. Results:
``bench/results/compiled-<timestamp>.json``; the table is printed (and with `--write`
replaces the generated block of docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from . import ab, env, instructions, report, run, server_counts

ROOT, RESULTS = env.ROOT, run.RESULTS
MODULES = (
    "mcp_asgi/protocol/headers.py",
    "mcp_asgi/protocol/validate.py",
    "mcp_asgi/protocol/message.py",
    "mcp_asgi/protocol/request.py",
    "mcp_asgi/protocol/jsonrpc.py",
    "mcp_asgi/http/accept.py",
    "mcp_asgi/http/origin.py",
    "mcp_asgi/http/exchange.py",
    "mcp_asgi/http/reply.py",
    "mcp_asgi/endpoint.py",
    "mcp_asgi/inflight.py",
    "mcp_asgi/runtime.py",
    "mcp_asgi/middleware.py",
    "mcp_asgi/lifecycle/scope.py",
    "mcp_asgi/lifecycle/runner.py",
    "mcp_asgi/lifecycle/work.py",
    "mcp_asgi/lifecycle/armed.py",
    "mcp_asgi/lifecycle/outcome.py",
    "mcp_asgi/server/primitives.py",
    "mcp_asgi/server/context.py",
    "mcp_asgi/server/schema.py",
    "mcp_asgi/limits/clients.py",
    "mcp_asgi/input/rounds.py",
    "mcp_asgi/telemetry/telemetry.py",
    "mcp_asgi/telemetry/trace_context.py",
    "mcp_asgi/tasks/methods.py",
    "mcp_asgi/legacy/era.py",
    "mcp_asgi/_loop/current.py",
    "mcp_asgi/_loop/clock.py",
    "mcp_asgi/_loop/line.py",
)
"""What runs for every request and mypyc compiles: the middleware, the validation ladder, the
endpoint, the request's scope, runner and work, the server's dispatch of a tool, the
limits, the telemetry's begin, the reply. Left as Python: `server/mcp_server.py` (an
async generator, which mypyc does not compile), `http/body.py` (mypyc fails on its
signature), `_loop/cheap_scope.py` (a subclass of `list`, which mypyc does not compile)
and `_loop/eager.py` (compiled, its `at_once` breaks a thread tool's call: a
`SystemError`, an exception left set, in mypyc's code)."""
TARGET, FLOOR = ab.TARGET, ab.FLOOR
_FINAL_FIELD = re.compile(r"^(\s+\w+): Final\[(.*)\]", re.MULTILINE)


def build(copy: Path) -> list[str]:
    """A copy of `mcp_asgi` in `copy` with `MODULES` compiled; the extension modules made."""
    shutil.copytree(
        ROOT / "mcp_asgi", copy / "mcp_asgi", ignore=shutil.ignore_patterns("__pycache__")
    )
    for module in MODULES:
        path = copy / module
        path.write_text(_FINAL_FIELD.sub(r"\1: \2", path.read_text()))
    done = subprocess.run(
        [sys.executable, "-m", "mypyc", *MODULES], cwd=copy, capture_output=True, check=False
    )
    built = sorted(str(p.relative_to(copy)) for p in (copy / "mcp_asgi").rglob("*.so"))
    if done.returncode != 0 or len(built) != len(MODULES):
        raise SystemExit(
            f"mypyc did not build the {len(MODULES)} modules (it needs a C compiler and "
            f"Python's headers):\n{done.stdout.decode()[-2000:]}{done.stderr.decode()[-2000:]}"
        )
    return built


def throughput(copy: Path, rounds: int, seconds: float) -> dict[str, Any]:
    """req/s of the floor and the target as it is (`pure`) and compiled (`compiled`) on
    uvicorn h11, interleaved (`ab.interleaved`); each one's ratio to the floor's in the
    same round, its median over rounds."""
    plan = {"floor": (FLOOR, ROOT), "pure": (TARGET, ROOT), "compiled": (TARGET, copy)}
    found = ab.interleaved(plan, rounds, seconds)
    floor = found["floor"]["rps"]
    return {
        name: {
            "rps": measured["rps"],
            "ratio_median": statistics.median(
                v / f for v, f in zip(measured["rps"], floor, strict=True)
            ),
            "cpu_ms_per_call_median": statistics.median(measured["cpu_ms_per_call"]),
        }
        for name, measured in found.items()
    }


def table(result: dict[str, Any]) -> str:
    """Markdown: each figure for the floor, mcp_asgi as it is, and compiled."""
    keys = ("floor", "pure", "compiled")
    lines = [
        "| per echo | floor | mcp_asgi | mcp_asgi, request path compiled (mypyc) |",
        "|---|---:|---:|---:|",
    ]
    counted = result["instructions"]
    floor = counted["pure"]["floor"]["instructions"]
    for case in ("async", "def"):
        values = [counted[key][case]["instructions"] for key in keys[1:]]
        cells = [f"{v:,} ({v / floor:.2f}x)" for v in values]
        lines.append(f"| in process, `{case}`: instructions | {floor:,} | {' | '.join(cells)} |")
    counts: dict[str, dict[str, float]] = result.get("server_counts") or {}
    for label, events in server_counts.COLUMNS if counts else ():
        values = [sum(counts[key].get(e, 0.0) for e in events) for key in keys]
        cells = [f"{v:,.0f} ({v - values[0]:+,.0f})" for v in values[1:]]
        lines.append(f"| uvicorn h11 server: {label} | {values[0]:,.0f} | {' | '.join(cells)} |")
    speed = result["throughput"]
    ratios = [f"{speed[key]['ratio_median']:.3f}" for key in keys[1:]]
    lines.append(
        f"| uvicorn h11, `async` echo: x the floor's req/s | 1.00 | {' | '.join(ratios)} |"
    )
    cpu = [f"{speed[key]['cpu_ms_per_call_median']:.4f}" for key in keys]
    lines.append(f"| uvicorn h11: server CPU ms a call | {' | '.join(cpu)} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="A compiled request path, side by side.")
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--duration", type=float, default=3.0, help="seconds of wrk a run")
    parser.add_argument("--no-counts", action="store_true", help="skip bench.server_counts")
    parser.add_argument("--write", action="store_true", help="rewrite docs/benchmarks.md")
    parser.add_argument(
        "--build", type=Path, help="only build the copy in this new folder (and keep it)"
    )
    args = parser.parse_args(argv)
    if args.build is not None:
        args.build.mkdir(parents=True)
        print("\n".join(build(args.build.resolve())))
        return
    started = time.time()
    with tempfile.TemporaryDirectory(prefix="mcp-asgi-mypyc-") as tmp:
        copy = Path(tmp)
        env.log(f"compiling {len(MODULES)} modules with mypyc (a minute or two)")
        built = build(copy)
        result: dict[str, Any] = {
            "started": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.gmtime(started)),
            "python": sys.version.split()[0],
            "modules": list(MODULES),
            "built": built,
        }
        env.log("instructions in process: the tree, then the copy")
        result["instructions"] = {
            key: instructions.measure(["floor", "async", "def"], 64, 576, 2, code)
            for key, code in (("pure", ROOT), ("compiled", copy))
        }
        if not args.no_counts:
            env.log("the whole server under callgrind, uvicorn h11")
            result["server_counts"] = {
                key: server_counts.count(target, "h11", 800, 3200, 32, code)
                for key, target, code in (
                    ("floor", FLOOR, ROOT),
                    ("pure", TARGET, ROOT),
                    ("compiled", TARGET, copy),
                )
            }
        env.log(f"throughput, uvicorn h11: {args.rounds} rounds of {args.duration:g} s each")
        result["throughput"] = throughput(copy, args.rounds, args.duration)
    result["seconds"] = time.time() - started
    RESULTS.mkdir(exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(started))
    (RESULTS / f"compiled-{stamp}.json").write_text(json.dumps(result, indent=1) + "\n")
    text = (
        f"Run: `python -m bench.compiled` — {result['started']} ({result['seconds']:.0f} s), "
        f"Python {result['python']}; {len(MODULES)} modules of the request path compiled by "
        f"mypyc in a copy; the target `{TARGET}`; throughput: medians over {args.rounds} "
        f"interleaved rounds of {args.duration:g} s of `wrk -t1 -c32`.\n\n" + table(result)
    )
    print(text)
    if args.write:
        report.write_generated("compiled", "compiled", text)


if __name__ == "__main__":
    main()
