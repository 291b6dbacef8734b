"""Instructions per in-process request, counted by callgrind (issue 27): the figure that
does not move with the load of a shared machine.

    python -m bench.instructions                   # the goals and the feature table
    python -m bench.instructions --cases floor,async --jobs 1
    python -m bench.instructions --write           # and rewrite docs/benchmarks.md's tables

Each case of `bench.features` runs under `valgrind --tool=callgrind` (with
`PYTHONHASHSEED=0`, `nice`), serving `--short` and then `--long` requests after a warm-up,
the counts dumped after each batch; (the long batch's instructions - the short one's) /
(long - short) is one request's instructions, start-up, warm-up and the dumps' own cost
taken out. The floor (a bare
Starlette route that parses the same body and writes the same answer) runs in the same
invocation, so every ratio compares counts of one tree, one interpreter, one run.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from . import features, report
from .env import import_path

ROOT, RESULTS = report.ROOT, report.RESULTS
GOALS: dict[str, float] = {
    "async": 1.5,
    "def": 2.0,
    "cancelled": 2.5,
}  # times the floor's instructions, at most
_TOTALS = re.compile(r"^totals: (\d+)", re.MULTILINE)


def count(case: str, batches: list[int], code: Path = ROOT) -> list[int]:
    """Instructions of each batch of requests of `python -m bench.features CASE BATCH...`
    under callgrind (its dumps after the warm-up and after each batch), `mcp_asgi` imported
    from `code` (`env.import_path`)."""
    with tempfile.TemporaryDirectory() as tmp:
        command = [
            "nice",
            "valgrind",
            "--tool=callgrind",
            "--instr-atstart=no",  # until the warm-up's end (`features.mark`)
            f"--callgrind-out-file={tmp}/out",
            sys.executable,
            "-m",
            "bench.features",
            case,
            *map(str, batches),
        ]
        env = {
            **os.environ,
            "PYTHONHASHSEED": "0",
            "PYTHONPATH": import_path(code),
            features.MARKS_ENV: "1",
        }
        done = subprocess.run(command, capture_output=True, cwd=code, env=env, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"{case} {batches} failed:\n{done.stderr.decode()[-3000:]}")
        # out.1 is start-up and warm-up; out.2... one batch each
        dumps = [Path(f"{tmp}/out.{n}").read_text() for n in range(2, len(batches) + 2)]
    return [int(_TOTALS.search(dump).group(1)) for dump in dumps]  # type: ignore[union-attr]


def per_request(case: str, short: int, long: int, code: Path = ROOT) -> dict[str, Any]:
    low, high = count(case, [short, long], code)
    return {
        "case": case,
        "label": features.CASES[case].label,
        "short": [short, low],
        "long": [long, high],
        "instructions": round((high - low) / (long - short)),
    }


def measure(
    cases: list[str], short: int, long: int, jobs: int, code: Path = ROOT
) -> dict[str, dict[str, Any]]:
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        rows = list(pool.map(lambda case: per_request(case, short, long, code), cases))
    return {row["case"]: row for row in rows}


def _tree() -> str:
    done = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, cwd=ROOT, check=False
    )
    dirty = subprocess.run(
        ["git", "status", "--porcelain", "--", "mcp_asgi"], capture_output=True, cwd=ROOT
    )
    return done.stdout.decode().strip() + ("+changes" if dirty.stdout.strip() else "")


def tables(run: dict[str, Any]) -> str:
    rows: dict[str, dict[str, Any]] = run["rows"]
    lines = [
        f"Run: `python -m bench.instructions` — {run['started']} ({run['seconds']:.0f} s), "
        f"tree {run['tree']}, Python {run['python']}; callgrind, each case served "
        f"{run['short']} and {run['long']} requests after the same warm-up, 32 at a time "
        "(instructions per request = the difference of the two counts ÷ the difference "
        "of the requests).",
        "",
    ]
    floor = rows.get("floor")
    goal_rows = [c for c in GOALS if c in rows]
    if goal_rows or floor:
        lines += [
            "| request | instructions | \u00d7 floor | goal | met? |",
            "|---|---:|---:|---:|---|",
        ]
        if floor:
            lines.append(f"| {floor['label']} | {floor['instructions']:,} | 1.00 | | |")
        for case in goal_rows:
            n = rows[case]["instructions"]
            if floor is None:
                lines.append(f"| {rows[case]['label']} | {n:,} | | \u2264 {GOALS[case]} | |")
                continue
            ratio = n / floor["instructions"]
            met = "yes" if ratio <= GOALS[case] else "**no**"
            goal = f"\u2264 {GOALS[case]}"
            lines.append(f"| {rows[case]['label']} | {n:,} | **{ratio:.2f}** | {goal} | {met} |")
        lines.append("")
    feature_rows = [c for c in features.FEATURES if c in rows]
    if feature_rows:
        # the reference: everything optional off (else the least of the rows counted)
        least = (
            rows["off"]["instructions"]
            if "off" in rows
            else min(rows[c]["instructions"] for c in feature_rows)
        )
        lines += [
            "| configuration (`async` echo) | instructions | \u00d7 all off | \u2212 all off |"
            + (" \u00d7 floor |" if floor else ""),
            "|---|---:|---:|---:|" + ("---:|" if floor else ""),
        ]
        for case in feature_rows:
            n = rows[case]["instructions"]
            line = f"| {rows[case]['label']} | {n:,} | {n / least:.2f} | {n - least:+,} |"
            if floor:
                line += f" {n / floor['instructions']:.2f} |"
            lines.append(line)
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Instructions per in-process request.")
    parser.add_argument("--cases", default=",".join(features.CASES))
    parser.add_argument("--short", type=int, default=64, help="requests of the short run")
    parser.add_argument("--long", type=int, default=576, help="requests of the long run")
    parser.add_argument("--jobs", type=int, default=2, help="callgrind runs at once")
    parser.add_argument("--write", action="store_true", help="rewrite docs/benchmarks.md")
    args = parser.parse_args(argv)
    cases = args.cases.split(",")
    unknown = [c for c in cases if c not in features.CASES]
    if unknown or args.short % 32 or args.long % 32 or args.long <= args.short:
        raise SystemExit(f"unknown cases {unknown}, or --short/--long not multiples of 32")
    report.whole_for_the_page(args.write, "case", (cases, features.CASES))
    started = time.time()
    rows = measure(cases, args.short, args.long, args.jobs)
    run = {
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.gmtime(started)),
        "seconds": time.time() - started,
        "tree": _tree(),
        "python": sys.version.split()[0],
        "short": args.short,
        "long": args.long,
        "rows": rows,
    }
    RESULTS.mkdir(exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(started))
    (RESULTS / f"instructions-{stamp}.json").write_text(json.dumps(run, indent=1) + "\n")
    text = tables(run)
    print(text)
    if args.write:
        report.write_generated("instructions", "instructions", text)


if __name__ == "__main__":
    main()
