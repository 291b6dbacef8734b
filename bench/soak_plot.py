"""The plot and the slopes of a soak report (tests/soak, SOAK_REPORT=path).

    python -m bench.soak_plot soak-report.json [--svg docs/img/soak.svg]

Writes an SVG with one panel per resource over the minutes of the load (the warm-up
shaded, the least-squares line after it dashed) and prints the slopes as a Markdown table,
for docs/benchmarks.md. A report made with SOAK_DIAG=1 adds panels and rows for where the
memory is (DIAG): the bytes in Python's small-object allocator (pymalloc) in use, and
glibc malloc's heap in use and free but kept. Needs nothing beyond the standard library.
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

DIAG = {
    "pymalloc_used_mb": ("pymalloc in use (MB)", ("pymalloc", "bytes_in_allocated_blocks")),
    "glibc_used_mb": ("glibc heap in use (MB)", ("mallinfo", "uordblks")),
    "glibc_free_mb": ("glibc heap free but kept (MB)", ("mallinfo", "fordblks")),
}
"""The diagnostics' series (SOAK_DIAG=1): a title, and where in a sample's `diag` (bytes)."""


def _slope(xs: list[float], ys: list[float]) -> float:
    n = len(xs)
    mean_x, mean_y = sum(xs) / n, sum(ys) / n
    spread = sum((x - mean_x) ** 2 for x in xs)
    return sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys, strict=True)) / spread


def diag_growth(report: dict[str, Any]) -> list[dict[str, Any]]:
    """For a SOAK_DIAG=1 report, each DIAG series in MB, and its slopes after the warm-up
    (per minute, per 10k requests), like the judged resources' (none when not made so)."""
    out = []
    for name, (_, (group, field)) in DIAG.items():
        samples = [s for s in report["samples"] if (s.get("diag") or {}).get(group)]
        if not any(s["t"] < report["warmup_s"] for s in samples) or len(samples) < 3:
            continue  # not made with SOAK_DIAG=1, or by a version without this figure
        ys = [s["diag"][group][field] / 2**20 for s in samples]
        if not any(ys):
            continue  # another malloc than glibc's (SOAK_LD_PRELOAD): mallinfo2 is all 0
        paired = list(zip(samples, ys, strict=True))
        after = [(s["t"], s["requests"], y) for s, y in paired if s["t"] >= report["warmup_s"]]
        per_second = _slope([a[0] for a in after], [a[2] for a in after])
        per_request = _slope([float(a[1]) for a in after], [a[2] for a in after])
        warm = [y for s, y in paired if s["t"] < report["warmup_s"]]
        out.append(
            {
                "resource": name,
                "xs": [s["t"] for s in samples],
                "ys": ys,
                "per_minute": per_second * 60,
                "per_10k_requests": per_request * 10_000,
                "fitted_growth": per_second * (after[-1][0] - after[0][0]),
                "band": [min(warm), max(warm)],
                "peak_after": max(a[2] for a in after),
                "allowed": None,
                "failure": None,
            }
        )
    return out


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
    for growth in diag_growth(report):
        xs = [t / 60 for t in growth["xs"]]
        after = [(x, y) for x, y in zip(xs, growth["ys"], strict=True) if x >= warmup]
        mean_x = sum(x for x, _ in after) / len(after)
        mean_y = sum(y for _, y in after) / len(after)
        b = growth["per_minute"]
        per_10k = growth["per_10k_requests"]
        title = f"{DIAG[growth['resource']][0]}: {b:+.3g}/min, {per_10k:+.3g}/10k requests"
        out.append(Panel(title, xs, growth["ys"], fit=(mean_y - b * mean_x, b), fit_from=warmup))
    return out


def table(report: dict[str, Any]) -> str:
    """The slopes after the warm-up, as Markdown."""
    rows = [
        "| resource | warm-up band | after: highest | slope per minute | per 10k requests "
        "| fitted growth after warm-up | allowed | verdict |",
        "|---|---|---|---|---|---|---|---|",
    ]
    titles = {**TITLES, **{name: title for name, (title, _) in DIAG.items()}}
    for g in [*report["growth"], *diag_growth(report)]:
        low, high = g["band"]
        allowed = "not judged" if g["allowed"] is None else f"{g['allowed']:g}"
        verdict = "within" if g["resource"] in TITLES else "diagnostic"
        rows.append(
            f"| {titles[g['resource']]} | {low:.4g} to {high:.4g} | {g['peak_after']:.4g} "
            f"| {g['per_minute']:+.4g} | {g['per_10k_requests']:+.4g} "
            f"| {g['fitted_growth']:+.4g} | {allowed} | {g['failure'] or verdict} |"
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
