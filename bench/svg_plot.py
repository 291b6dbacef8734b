"""A tiny SVG line-plot writer (no plotting library): panels stacked one above the other,
each with its own y axis, a shared x axis, an optional shaded span (a warm-up) and an
optional dashed straight line (a fit)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

WIDTH, PANEL, GAP, LEFT, RIGHT, TOP, BOTTOM = 760, 120, 34, 70, 20, 36, 40


@dataclass(frozen=True)
class Panel:
    """One panel: a title, the points (x, y), and an optional fitted line y = a + b x drawn
    over `fit_from` onwards."""

    title: str
    xs: Sequence[float]
    ys: Sequence[float]
    fit: tuple[float, float] | None = None
    fit_from: float = 0.0


def nice_ticks(low: float, high: float, count: int = 4) -> list[float]:
    """About `count` round tick values covering [low, high]."""
    if high <= low:
        high = low + 1
    raw = (high - low) / count
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    first = math.floor(low / step) * step
    return [first + i * step for i in range(count + 3) if first + i * step <= high + step / 2]


def _label(value: float) -> str:
    return f"{value:g}" if abs(value) < 1e5 else f"{value:.3g}"


def plot(panels: Sequence[Panel], x_label: str, shade: tuple[float, float] | None = None) -> str:
    """The panels as one SVG document; `shade` is an x span shaded in every panel."""
    height = TOP + len(panels) * (PANEL + GAP) + BOTTOM - GAP
    x_low = min(min(p.xs) for p in panels)
    x_high = max(max(p.xs) for p in panels)
    x_ticks = nice_ticks(x_low, x_high, 8)
    x_low, x_high = min(x_low, x_ticks[0]), max(x_high, x_ticks[-1])
    plot_width = WIDTH - LEFT - RIGHT

    def sx(x: float) -> float:
        return LEFT + (x - x_low) / (x_high - x_low) * plot_width

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
        f'viewBox="0 0 {WIDTH} {height}" font-family="sans-serif" font-size="11">',
        f'<rect width="{WIDTH}" height="{height}" fill="white"/>',
    ]
    for i, panel in enumerate(panels):
        top = TOP + i * (PANEL + GAP)
        y_ticks = nice_ticks(min(panel.ys), max(panel.ys))
        y_low, y_high = y_ticks[0], y_ticks[-1]
        if y_high == y_low:
            y_high = y_low + 1

        def sy(y: float, top: float = top, y_low: float = y_low, y_high: float = y_high) -> float:
            return top + PANEL - (y - y_low) / (y_high - y_low) * PANEL

        out.append(
            f'<text x="{LEFT}" y="{top - 8}" font-weight="bold">{escape(panel.title)}</text>'
        )
        if shade is not None:
            out.append(
                f'<rect x="{sx(shade[0]):.1f}" y="{top}" width="{sx(shade[1]) - sx(shade[0]):.1f}"'
                f' height="{PANEL}" fill="#eee"/>'
            )
        for y in y_ticks:
            out.append(
                f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{sy(y):.1f}" y2="{sy(y):.1f}" '
                'stroke="#ddd"/>'
                f'<text x="{LEFT - 6}" y="{sy(y) + 4:.1f}" text-anchor="end">{_label(y)}</text>'
            )
        for x in x_ticks:
            out.append(
                f'<line x1="{sx(x):.1f}" x2="{sx(x):.1f}" y1="{top}" y2="{top + PANEL}" '
                'stroke="#eee"/>'
            )
        points = " ".join(
            f"{sx(x):.1f},{sy(y):.1f}" for x, y in zip(panel.xs, panel.ys, strict=True)
        )
        out.append(f'<polyline points="{points}" fill="none" stroke="#1f77b4" stroke-width="1.2"/>')
        if panel.fit is not None:
            a, b = panel.fit
            x0, x1 = panel.fit_from, max(panel.xs)
            out.append(
                f'<line x1="{sx(x0):.1f}" y1="{sy(a + b * x0):.1f}" x2="{sx(x1):.1f}" '
                f'y2="{sy(a + b * x1):.1f}" stroke="#d62728" stroke-width="1.5" '
                'stroke-dasharray="6 4"/>'
            )
        out.append(
            f'<rect x="{LEFT}" y="{top}" width="{plot_width}" height="{PANEL}" fill="none" '
            'stroke="#888"/>'
        )
    bottom = TOP + len(panels) * (PANEL + GAP) - GAP
    for x in x_ticks:
        out.append(
            f'<text x="{sx(x):.1f}" y="{bottom + 14}" text-anchor="middle">{_label(x)}</text>'
        )
    out.append(
        f'<text x="{LEFT + plot_width / 2}" y="{bottom + 32}" text-anchor="middle">'
        f"{escape(x_label)}</text>"
    )
    out.append("</svg>")
    return "\n".join(out) + "\n"
