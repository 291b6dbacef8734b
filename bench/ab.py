"""Is a change faster, and can this machine tell? Two versions of mcp_asgi served side by
side with the floor, on one server each, kept up and loaded in turn:

    python -m bench.ab --base HEAD~1           # the tree against a revision (git archive)
    python -m bench.ab --code DIR              # against a copy (e.g. bench.compiled --build)
    python -m bench.ab --base main --http httptools --tool echo_sync --rounds 20

Each round loads the floor, the tree and the other version once (`wrk -t1 -c32`, the
order turned each round) and reads each one's req/s and server CPU per call (`/proc`).
What it reports, each with a 95% bootstrap interval of its median over the rounds:

- each version's req/s as a share of the floor's in the same round (issue 27's ratio);
- the other version against the tree, paired by round: req/s and CPU per call. An
  interval that holds 1.00 means this run cannot tell the two apart;
- unless `--no-counts`, instructions per in-process echo of both (`bench.instructions`:
  deterministic, so no interval).

For a change of a percent or two on this noisy machine, a single round (or a handful) says
nothing: its rounds move by several percent with the machine's other load. Results:
``bench/results/ab-<timestamp>.json``; the table is printed.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from . import env, instructions, load, report, run, servers, stacks

ROOT, RESULTS = env.ROOT, run.RESULTS
FLOOR = report.FLOOR
TARGET = stacks.GOAL_TARGET  # issue 27's configuration: limits on, far above the load
CASE = {"echo": "async", "echo_sync": "def"}  # bench.instructions' name of each echo


def interleaved(
    plan: dict[str, tuple[str, Path]],
    rounds: int,
    seconds: float,
    *,
    server: str = servers.DEFAULT,
    tool: str = "echo",
) -> dict[str, dict[str, list[float]]]:
    """Each of `plan`'s servers (name: target, the folder `mcp_asgi` is imported from) kept
    up and loaded in turn for `seconds`, `rounds` times, the order turned each round: each
    one's `rps` and `cpu_ms_per_call` by round. A run with errors under load is refused
    (an error answered fast would pass for speed)."""
    if not env.ensure_wrk():
        raise SystemExit("wrk is needed (apt-get install wrk)")
    names = list(plan)
    found: dict[str, dict[str, list[float]]] = {
        name: {"rps": [], "cpu_ms_per_call": []} for name in names
    }
    with tempfile.TemporaryDirectory(prefix="mcp-asgi-ab-") as tmp:
        procs = {
            name: run.Server(run.BY_NAME[target], Path(tmp), server=server, code=code)
            for name, (target, code) in plan.items()
        }
        try:
            for proc in procs.values():
                proc.start()
                load.check_echo(proc.port, tool)
                load.run_wrk(proc.port, 1, tool=tool)  # warm up
            for round_no in range(rounds):
                shift = round_no % len(names)
                for name in names[shift:] + names[:shift]:
                    proc = procs[name]
                    before = servers.process_cpu(proc.pid)
                    result = load.run_wrk(proc.port, seconds, tool=tool)
                    if result["errors"]:
                        raise SystemExit(f"{name}: {result['errors']} errors under load")
                    cpu = servers.process_cpu(proc.pid) - before
                    found[name]["cpu_ms_per_call"].append(1000 * cpu / result["requests"])
                    found[name]["rps"].append(result["rps"])
                env.log(f"round {round_no + 1}/{rounds}: " + ", ".join(
                    f"{name} {found[name]['rps'][-1]:.0f}" for name in names
                ))  # fmt: skip
        finally:
            for proc in procs.values():
                proc.stop()
    return found


def paired(top: list[float], bottom: list[float]) -> dict[str, float]:
    """The round-by-round ratios `top / bottom`: their median and its 95% interval."""
    ratios = [t / b for t, b in zip(top, bottom, strict=True)]
    low, high = report.median_interval(ratios)
    return {"median": report.med(ratios), "low": low, "high": high}


def export(revision: str, into: Path) -> str:
    """`mcp_asgi` as committed at `revision`, written under `into`; the commit's short id."""
    commit = subprocess.run(
        ["git", "rev-parse", "--short", f"{revision}^{{commit}}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    if commit.returncode != 0:
        raise SystemExit(f"--base {revision!r}: not a revision of this repository")
    archive = subprocess.run(
        ["git", "archive", revision, "mcp_asgi"], cwd=ROOT, capture_output=True, check=True
    )
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    return commit.stdout.strip()


def compare(
    other: Path, rounds: int, seconds: float, server: str, tool: str, counts: bool
) -> dict[str, Any]:
    """The floor, the tree and `other` measured in one run (see the module)."""
    result: dict[str, Any] = {"server": server, "tool": tool, "rounds": rounds}
    if counts:
        env.log("instructions in process: the tree, then the other version")
        cases = ["floor", CASE[tool]]
        result["instructions"] = {
            key: instructions.measure(cases, 64, 576, 2, code)
            for key, code in (("tree", ROOT), ("other", other))
        }
    env.log(f"throughput, {server}: {rounds} rounds of {seconds:g} s each")
    plan = {"floor": (FLOOR, ROOT), "tree": (TARGET, ROOT), "other": (TARGET, other)}
    found = interleaved(plan, rounds, seconds, server=server, tool=tool)
    result["measured"] = found
    floor = found["floor"]["rps"]
    result["x_floor"] = {key: paired(found[key]["rps"], floor) for key in ("tree", "other")}
    result["other_vs_tree"] = {
        "rps": paired(found["other"]["rps"], found["tree"]["rps"]),
        "cpu_ms_per_call": paired(
            found["other"]["cpu_ms_per_call"], found["tree"]["cpu_ms_per_call"]
        ),
    }
    return result


def _cell(stat: dict[str, float]) -> str:
    return f"{stat['median']:.3f} [{stat['low']:.3f}, {stat['high']:.3f}]"


def _verdict(stat: dict[str, float], faster_above: bool) -> str:
    if stat["low"] <= 1.0 <= stat["high"]:
        return "cannot tell"
    return "other faster" if (stat["low"] > 1.0) == faster_above else "tree faster"


def table(result: dict[str, Any], label: str) -> str:
    """Markdown: the figures of one comparison (medians, [95% interval])."""
    found, tool = result["measured"], result["tool"]
    lines = [
        f"| {result['server']}, `{CASE[tool]}` echo | floor | tree | {label} |",
        "|---|---:|---:|---:|",
        "| req/s, median | "
        + " | ".join(f"{report.med(found[k]['rps']):,.0f}" for k in ("floor", "tree", "other"))
        + " |",
        f"| x the floor's req/s, paired | 1.00 | {_cell(result['x_floor']['tree'])} | "
        f"{_cell(result['x_floor']['other'])} |",
        "| server CPU ms a call, median | "
        + " | ".join(
            f"{report.med(found[k]['cpu_ms_per_call']):.4f}" for k in ("floor", "tree", "other")
        )
        + " |",
    ]
    counted = result.get("instructions")
    if counted:
        case = CASE[tool]
        floor = counted["tree"]["floor"]["instructions"]
        tree, other = (counted[k][case]["instructions"] for k in ("tree", "other"))
        lines.append(
            f"| instructions in process | {floor:,} | {tree:,} ({tree / floor:.2f}x) | "
            f"{other:,} ({other / floor:.2f}x) |"
        )
    versus = result["other_vs_tree"]
    lines += [
        "",
        f"{label} ÷ tree, paired by round: req/s {_cell(versus['rps'])} "
        f"({_verdict(versus['rps'], True)}); CPU a call {_cell(versus['cpu_ms_per_call'])} "
        f"({_verdict(versus['cpu_ms_per_call'], False)}).",
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Two versions of mcp_asgi, side by side.")
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--base", help="a git revision: its mcp_asgi against the tree's")
    which.add_argument("--code", type=Path, help="a folder holding another mcp_asgi")
    parser.add_argument("--http", choices=("h11", "httptools"), default="h11")
    parser.add_argument("--tool", choices=tuple(CASE), default="echo")
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--duration", type=float, default=3.0, help="seconds of wrk a run")
    parser.add_argument("--no-counts", action="store_true", help="skip bench.instructions")
    args = parser.parse_args(argv)
    if args.rounds < 3:
        parser.error("--rounds: at least 3 (an interval needs rounds)")
    server = f"uvicorn-{args.http}"
    started = time.time()
    with tempfile.TemporaryDirectory(prefix="mcp-asgi-ab-base-") as tmp:
        if args.base is not None:
            other, label = Path(tmp), f"`{export(args.base, Path(tmp))}`"
        else:
            other, label = args.code.resolve(), f"`{args.code}`"
            if not (other / "mcp_asgi" / "__init__.py").is_file():
                parser.error(f"--code {args.code}: no mcp_asgi package in it")
        result = compare(other, args.rounds, args.duration, server, args.tool, not args.no_counts)
    result["other"] = label.strip("`")
    result["started"] = time.strftime("%Y-%m-%dT%H:%M:%S%z", time.gmtime(started))
    result["seconds"] = time.time() - started
    result["git"] = run.git_state()
    RESULTS.mkdir(exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(started))
    (RESULTS / f"ab-{stamp}.json").write_text(json.dumps(result, indent=1) + "\n")
    print(
        f"Run: `python -m bench.ab` — {result['started']} ({result['seconds']:.0f} s), the "
        f"tree ({result['git']}) against {label}, `{TARGET}`; {args.rounds} interleaved "
        f"rounds of {args.duration:g} s of `wrk -t1 -c32`; medians [95% bootstrap "
        "interval].\n\n" + table(result, label)
    )


if __name__ == "__main__":
    main()
