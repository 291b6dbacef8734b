"""The plot and the slopes of a soak report (tests/soak, SOAK_REPORT=path).

    python -m bench.soak_plot soak-report.json [--svg docs/img/soak.svg]

Writes an SVG with one panel per resource over the minutes of the load (the warm-up
shaded, the least-squares line after it dashed) and prints the slopes as a Markdown table,
for docs/benchmarks.md. Needs nothing beyond the standard library.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from bench.svg_plot import Panel, plot

TITLES = {
    "rss_mb": "RSS (MB)",
    "fds": "open file descriptors",
    "threads": "threads",
    "tasks": "asyncio tasks",
    "keys": "Redis keys (DBSIZE)",
}


def panels(report: dict[str, Any]) -> list[Panel]:
    """One panel per resource, x in minutes, its fit through the after-warm-up means."""
    samples, warmup = report["samples"], report["warmup_s"] / 60
    out = []
    for growth in report["growth"]:
        name = growth["resource"]
        xs = [s["t"] / 60 for s in samples]
        ys = [float(s[name]) for s in samples]
        after = [(x, y) for x, y in zip(xs, ys, strict=True) if x >= warmup]
        mean_x = sum(x for x, _ in after) / len(after)
        mean_y = sum(y for _, y in after) / len(after)
        b = growth["per_minute"]
        title = f"{TITLES[name]}: {b:+.3g}/min, {growth['per_10k_requests']:+.3g}/10k requests"
        out.append(Panel(title, xs, ys, fit=(mean_y - b * mean_x, b), fit_from=warmup))
    return out


def table(report: dict[str, Any]) -> str:
    """The slopes after the warm-up, as Markdown."""
    rows = [
        "| resource | warm-up band | after: highest | slope per minute | per 10k requests "
        "| fitted growth after warm-up | allowed | verdict |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for g in report["growth"]:
        low, high = g["band"]
        allowed = "not judged" if g["allowed"] is None else f"{g['allowed']:g}"
        rows.append(
            f"| {TITLES[g['resource']]} | {low:g} to {high:g} | {g['peak_after']:g} "
            f"| {g['per_minute']:+.4g} | {g['per_10k_requests']:+.4g} "
            f"| {g['fitted_growth']:+.4g} | {allowed} | {g['failure'] or 'within'} |"
        )
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("report", type=Path)
    parser.add_argument("--svg", type=Path, default=Path("docs/img/soak.svg"))
    args = parser.parse_args()
    report = json.loads(args.report.read_text())
    warmup = report["warmup_s"] / 60
    args.svg.write_text(plot(panels(report), "minutes of load", shade=(0.0, warmup)))
    minutes = report["samples"][-1]["t"] / 60
    print(f"{minutes:.0f} minutes of load, {report['requests']} requests, warm-up {warmup:g} min")
    print(table(report))


if __name__ == "__main__":
    main()
