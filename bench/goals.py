"""Issue 27's measurable goals, each read off the latest run in `bench/results/` that measures
it (the tree's own runs: none of a copy, none of `--quick`):

    python -m bench.goals            # the table
    python -m bench.goals --write    # and into docs/benchmarks.md (`make bench`'s last step)

* instructions in process: `bench.instructions` (`instructions-*.json`);
* throughput and server CPU: `bench.stacks` (`stacks-*.json`, also a run of some servers),
  the goals' target `mcp_asgi-limits`;
* cancel latency, one at a time and 200 in flight: `bench.cancel_latency`
  (`cancel-latency-*.json`), each mode from the latest run that has it;
* the mass cancel against the official SDK: `bench.run` (`full-*.json`, `partial-*.json`)
  with `mcp_asgi` and `sdk-sse` side by side.

A ratio or an excess read over rounds is their median, with its 95% bootstrap interval; a
verdict is the median's, and says so where the interval holds the line (the run cannot
tell). A goal no run has measured yet says so.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Iterator
from typing import Any

from . import report

Row = tuple[str, str, str, str]  # goal, measured, run, met?
_H11 = "uvicorn-h11"  # (the server of a run from before the cancel bench named one)
SERVERS = {_H11: "h11", "uvicorn-httptools": "httptools"}
BURST = 200  # issue 27's calls in flight
MASS = 300  # issue 27's calls closed at once
X = report.TIMES
TARGET = "mcp_asgi-limits"  # the throughput goals' target (limits far above the load)


def runs(*patterns: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """The results files matching any of `patterns`, newest first (their names end in the
    time they were written)."""
    paths = {path for pattern in patterns for path in report.RESULTS.glob(pattern)}
    for path in sorted(paths, key=lambda p: p.stem[-15:], reverse=True):
        yield path.stem, json.loads(path.read_text())


def latest(
    wanted: Callable[[dict[str, Any]], bool], *patterns: str
) -> tuple[str, dict[str, Any]] | None:
    """The newest run matching `patterns` of which `wanted` is true."""
    return next(((name, data) for name, data in runs(*patterns) if wanted(data)), None)


def verdict(
    value: float,
    line: float,
    interval: tuple[float, float] | None = None,
    *,
    at_least: bool = False,
) -> str:
    """Met when `value` (a median) is at most `line` (`at_least`: at least); with an
    interval that holds the line, the run cannot tell."""
    met = "yes" if (value >= line if at_least else value <= line) else "**no**"
    if interval is not None and interval[0] <= line <= interval[1]:
        return f"{met} by the median (the interval holds the line)"
    return met


def _interval(values: list[float]) -> tuple[float, float] | None:
    return report.median_interval(values) if len(values) >= 3 else None


def _spread(interval: tuple[float, float] | None, fmt: str) -> str:
    return "" if interval is None else f" [{interval[0]:{fmt}}, {interval[1]:{fmt}}]"


def instructions() -> list[Row]:
    found = latest(lambda d: {"floor", "async", "def"} <= set(d["rows"]), "instructions-*.json")
    goal = (
        f"instructions in process: `async` echo ≤ 1.5{X}, `def` ≤ 2.0{X}, a cancelled call "
        f"≤ 2.5{X} the floor's"
    )
    if found is None:
        return [_missing(goal)]
    name, data = found
    counts = {case: row["instructions"] for case, row in data["rows"].items()}
    lines = {"async": 1.5, "def": 2.0, "cancelled": 2.5}
    ratios = {case: counts[case] / counts["floor"] for case in lines if case in counts}
    measured = ", ".join(f"{case} {ratio:.2f}{X}" for case, ratio in ratios.items())
    met = all(ratio <= lines[case] for case, ratio in ratios.items())
    return [(goal, measured, f"`{name}`", "yes" if met else "**no**")]


def _throughput_rows() -> dict[tuple[str, str], tuple[str, dict[str, Any]]]:
    """(server, tool) → (run, row) of the goals' target, from the newest run of `bench.stacks`
    that has each (a run of some servers counts for those; a quick run for none)."""
    found: dict[tuple[str, str], tuple[str, dict[str, Any]]] = {}
    for name, data in runs("stacks-*.json"):
        if "quick" in name:
            continue
        for row in data["rows"]:
            if row["target"] == TARGET:
                found.setdefault((row["server"], row["tool"]), (name, row))
    return found


def throughput() -> list[Row]:
    rows = _throughput_rows()
    out: list[Row] = []
    goals = (("uvicorn-h11", 0.9, 0.7), ("uvicorn-httptools", 0.8, 0.5))
    for server, async_line, def_line in goals:
        for tool, kind, line in (("echo", "async", async_line), ("echo_sync", "def", def_line)):
            goal = f"{SERVERS[server]}, `{kind}` echo ≥ {line}{X} the floor's req/s"
            got = rows.get((server, tool))
            if got is None:
                out.append(_missing(goal))
                continue
            name, row = got
            interval = _interval(row["ratios"])
            met = verdict(row["ratio"], line, interval, at_least=True)
            measured = f"{row['ratio']:.2f}{X}{_spread(interval, '.3f')}"
            out.append((goal, measured, _run(name, row["ratios"]), met))
    goal = f"server CPU per `async` echo, httptools ≤ the floor's + 0.25{X}"
    got = rows.get(("uvicorn-httptools", "echo"))
    if got is None or not got[1].get("cpu_extras"):
        return [*out, _missing(goal)]
    name, row = got
    interval = _interval(row["cpu_extras"])
    measured = f"{row['cpu_extra']:+.2f}{X}{_spread(interval, '+.3f')}"
    out.append(
        (goal, measured, _run(name, row["cpu_extras"]), verdict(row["cpu_extra"], 0.25, interval))
    )
    return out


def _missing(goal: str) -> Row:
    return (goal, "not measured", report.DASH, report.DASH)


def _run(name: str, rounds: list[Any]) -> str:
    return f"`{name}` ({len(rounds)} rounds)"


def _cancel_rows(concurrency: int) -> dict[tuple[str, str], tuple[str, dict[str, Any]]]:
    """(server, mode) → (run, row) of the async kind at `concurrency`, the newest run of the
    tree's (no copy, not quick) that has each; the floors' rows under the name of every run
    that has them too ((server, mode@run)), to be read beside a row of the same run."""
    found: dict[tuple[str, str], tuple[str, dict[str, Any]]] = {}
    for name, data in runs("cancel-latency-*.json"):
        plan = data["meta"].get("plan", {})
        if data["meta"].get("quick") or plan.get("code"):
            continue
        for row in data["rows"]:
            if row["kind"] != "async" or row["concurrency"] != concurrency:
                continue
            server = row.get("server", _H11)
            found.setdefault((server, row["mode"]), (name, row))
            found.setdefault((server, f"{row['mode']}@{name}"), (name, row))
    return found


def _one_cancel(goal: str, name: str, row: dict[str, Any]) -> Row:
    return (goal, f"{row['p99_ms']:.2f} ms", f"`{name}`", verdict(row["p99_ms"], 2.0))


def cancels() -> list[Row]:
    out: list[Row] = []
    one = _cancel_rows(1)
    for server, short in SERVERS.items():
        for mode in ("json", "sse"):
            goal = f"one `async` cancel ≤ 2 ms p99, {short}, {mode.upper()}"
            got = one.get((server, mode))
            out.append(_missing(goal) if got is None else _one_cancel(goal, *got))
    burst = _cancel_rows(BURST)
    for server, short in SERVERS.items():
        for mode in ("json", "sse"):
            goal = f"{BURST} in flight: p99 ≤ the floor's + 2 ms, {short}, {mode.upper()}"
            got = burst.get((server, mode))
            if got is None or got[1].get("paired_over_ms") is None:
                out.append(_missing(goal))
                continue
            name, row = got
            over = row["paired_over_ms"]
            interval = row.get("paired_over_interval_ms")
            bounds = None if interval is None else (interval[0], interval[1])
            measured = f"{over:+.2f} ms{_spread(bounds, '+.2f')} over, paired by round"
            least = burst.get((server, f"floor-task@{name}"))  # the least stop, same run
            if least is not None and least[1].get("paired_over_ms") is not None:
                measured += f" (the least stop {least[1]['paired_over_ms']:+.2f})"
            out.append(
                (goal, measured, _run(name, row.get("rounds", [])), verdict(over, 2.0, bounds))
            )
    return out


def mass() -> list[Row]:
    goal = f"{MASS} closed at once: p99 ≤ 0.5{X} the official SDK's (SSE)"

    def side_by_side(data: dict[str, Any]) -> bool:
        meta = data["meta"]
        return (
            not meta.get("quick")
            and meta.get("plan", {}).get("mass_streams") == MASS
            and {"mcp_asgi", report.SDK_SSE} <= set(meta["targets"])
            and any("mass" in r for r in data["records"])
        )

    found = latest(side_by_side, "full-*.json", "partial-*.json")
    if found is None:
        return [_missing(goal)]
    name, data = found
    agg = report.aggregate(data)
    mine = agg["mcp_asgi"].get("mass", {}).get("p99_by_round", {})
    theirs = agg[report.SDK_SSE].get("mass", {}).get("p99_by_round", {})
    ratios = [mine[n] / theirs[n] for n in mine if theirs.get(n)]
    if not ratios:
        return [(goal, "not measured", f"`{name}`", report.DASH)]
    ratio, interval = report.med(ratios), _interval(ratios)
    measured = f"{ratio:.2f}{X}{_spread(interval, '.2f')} paired by round"
    return [(goal, measured, _run(name, ratios), verdict(ratio, 0.5, interval))]


def table() -> str:
    rows = [*instructions(), *throughput(), *cancels(), *mass()]
    lines = ["| goal | measured | run | met? |", "|---|---|---|---|"]
    lines += [f"| {goal} | {measured} | {run} | {met} |" for goal, measured, run, met in rows]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Issue 27's goals from the latest runs.")
    parser.add_argument("--write", action="store_true", help="rewrite docs/benchmarks.md")
    args = parser.parse_args(argv)
    text = table()
    print(text)
    if args.write:
        report.write_generated("goals", "goals", text)


if __name__ == "__main__":
    main()
