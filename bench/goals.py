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

from . import cancel_latency, instructions, report, stacks

Row = tuple[str, str, str, str]  # goal, measured, run, met?
_H11 = "uvicorn-h11"  # (the server of a run from before the cancel bench named one)
SERVERS = {_H11: "h11", "uvicorn-httptools": "httptools"}
BURST = 200  # issue 27's calls in flight
MASS = 300  # issue 27's calls closed at once
# the least single cancels a p99 is read from: of fewer, a p99 is the largest one or two (the
# thirty-round burst runs take one a round, to pair the bursts, not to read this goal)
ONE_CANCEL_SAMPLES = 100
X = report.TIMES


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


def instruction_goals() -> list[Row]:
    lines = instructions.GOALS
    named = {"async": "`async` echo", "def": "`def` echo", "cancelled": "a cancelled call"}
    goal = "instructions in process: " + ", ".join(
        f"{named.get(case, case)} ≤ {line}{X}" for case, line in lines.items()
    )
    found = latest(lambda d: {"floor", *lines} <= set(d["rows"]), "instructions-*.json")
    if found is None:
        return [_missing(goal)]
    name, data = found
    counts = {case: row["instructions"] for case, row in data["rows"].items()}
    ratios = {case: counts[case] / counts["floor"] for case in lines}
    measured = ", ".join(f"{case} {ratio:.2f}{X}" for case, ratio in ratios.items())
    met = all(ratio <= lines[case] for case, ratio in ratios.items())
    return [(goal + " the floor's", measured, f"`{name}`", "yes" if met else "**no**")]


def _throughput_rows() -> dict[tuple[str, str], tuple[str, dict[str, Any]]]:
    """(server, tool) → (run, row) of the goals' target, from the newest run of `bench.stacks`
    that has each (a run of some servers counts for those; a quick run for none)."""
    found: dict[tuple[str, str], tuple[str, dict[str, Any]]] = {}
    for name, data in runs("stacks-*.json"):
        if "quick" in name:
            continue
        for row in data["rows"]:
            if row["target"] == stacks.GOAL_TARGET:
                found.setdefault((row["server"], row["tool"]), (name, row))
    return found


def throughput() -> list[Row]:
    rows = _throughput_rows()
    out: list[Row] = []
    kinds = {"echo": "`async` echo", "echo_sync": "`def` echo"}
    for server, lines in stacks.GOALS.items():
        for tool, line in lines.items():
            if tool == "cpu_extra":
                goal = f"server CPU per `async` echo, {SERVERS[server]} ≤ the floor's + {line}{X}"
                got = rows.get((server, "echo"))
                if got is None or not got[1].get("cpu_extras"):
                    out.append(_missing(goal))
                    continue
                name, row = got
                extras = row["cpu_extras"]
                interval = _interval(extras)
                measured = f"{row['cpu_extra']:+.2f}{X}{_spread(interval, '+.3f')}"
                out.append(
                    (goal, measured, _run(name, extras), verdict(row["cpu_extra"], line, interval))
                )
                continue
            goal = f"{SERVERS[server]}, {kinds[tool]} ≥ {line}{X} the floor's req/s"
            got = rows.get((server, tool))
            if got is None:
                out.append(_missing(goal))
                continue
            name, row = got
            interval = _interval(row["ratios"])
            met = verdict(row["ratio"], line, interval, at_least=True)
            measured = f"{row['ratio']:.2f}{X}{_spread(interval, '.3f')}"
            out.append((goal, measured, _run(name, row["ratios"]), met))
    return out


def _missing(goal: str) -> Row:
    return (goal, "not measured", report.DASH, report.DASH)


def _run(name: str, rounds: list[Any]) -> str:
    return f"`{name}` ({len(rounds)} rounds)"


Runs = list[tuple[str, dict[tuple[str, str], dict[str, Any]]]]


def _cancel_runs(concurrency: int) -> Runs:
    """The tree's `bench.cancel_latency` runs (no copy, not quick), newest first, each with
    its rows of the async kind at `concurrency` by (server, mode)."""
    found: Runs = []
    for name, data in runs("cancel-latency-*.json"):
        plan = data["meta"].get("plan", {})
        if data["meta"].get("quick") or plan.get("code"):
            continue
        rows = {
            (row.get("server", _H11), row["mode"]): row
            for row in data["rows"]
            if row["kind"] == "async" and row["concurrency"] == concurrency
        }
        found.append((name, rows))
    return found


def _newest(found: Runs, key: tuple[str, str], least: int = 0) -> tuple[str, dict[str, Any]] | None:
    """The newest run that has a row for `key` (of at least `least` cancels), and that row."""
    return next(
        (
            (name, rows[key])
            for name, rows in found
            if key in rows and rows[key]["cancelled"] >= least
        ),
        None,
    )


def _one_cancel(goal: str, name: str, row: dict[str, Any]) -> Row:
    met = verdict(row["p99_ms"], cancel_latency.GOAL_ASYNC_P99)
    return (goal, f"{row['p99_ms']:.2f} ms of {row['cancelled']} cancels", f"`{name}`", met)


def cancels() -> list[Row]:
    out: list[Row] = []
    one, burst = _cancel_runs(1), _cancel_runs(BURST)
    one_line, over_line = cancel_latency.GOAL_ASYNC_P99, cancel_latency.GOAL_BURST_ASYNC_OVER_FLOOR
    for server, short in SERVERS.items():
        for mode in ("json", "sse"):
            goal = f"one `async` cancel ≤ {one_line:g} ms p99, {short}, {mode.upper()}"
            got = _newest(one, (server, mode), least=ONE_CANCEL_SAMPLES)
            out.append(_missing(goal) if got is None else _one_cancel(goal, *got))
    for server, short in SERVERS.items():
        for mode in ("json", "sse"):
            goal = (
                f"{BURST} in flight: p99 ≤ the floor's + {over_line:g} ms, {short}, {mode.upper()}"
            )
            got = _newest(burst, (server, mode))
            if got is None or got[1].get("paired_over_ms") is None:
                out.append(_missing(goal))
                continue
            name, row = got
            over = row["paired_over_ms"]
            interval = row.get("paired_over_interval_ms")
            bounds = None if interval is None else (interval[0], interval[1])
            measured = f"{over:+.2f} ms{_spread(bounds, '+.2f')} over, paired by round"
            same_run = dict(burst)[name]
            stops = [  # the bare stops (`cancel_latency.STOPS`), in the same run
                f"the {stop_name} {same_run[(server, stop)]['paired_over_ms']:+.2f}"
                for stop, (stop_name, _) in cancel_latency.STOPS.items()
                if same_run.get((server, stop), {}).get("paired_over_ms") is not None
            ]
            if stops:
                measured += f" ({', '.join(stops)})"
            met = verdict(over, over_line, bounds)
            out.append((goal, measured, _run(name, row.get("rounds", [])), met))
    return out


def mass() -> list[Row]:
    goal = f"{MASS} closed at once: p99 ≤ {report.MASS_AGAINST_SDK}{X} the official SDK's (SSE)"

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
    ratios = report.mass_ratios(report.aggregate(data))
    if not ratios:
        return [_missing(goal)]
    ratio, interval = report.med(ratios), _interval(ratios)
    measured = f"{ratio:.2f}{X}{_spread(interval, '.2f')} paired by round"
    met = verdict(ratio, report.MASS_AGAINST_SDK, interval)
    return [(goal, measured, _run(name, ratios), met)]


def table() -> str:
    rows = [*instruction_goals(), *throughput(), *cancels(), *mass()]
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
