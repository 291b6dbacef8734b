"""Whether a soak's samples grew: after the warm-up, a least-squares slope per resource,
judged against stated bounds (counts of requests and of things, never times).

- RSS: the fitted growth per 10,000 requests after the warm-up is below `RSS_MB_PER_10K`.
- fds, threads, asyncio tasks: they stay in their warm-up band, that is, the line fitted
  after the warm-up rises by at most the resource's slack over the whole measured window,
  and no sample after the warm-up exceeds the warm-up's highest by more than that slack
  (`SLACK`: an absolute count, or a fraction of the warm-up's highest, whichever is
  larger). The load's concurrency is fixed, so these do not follow the request rate.
- Redis keys: their slope is reported, not judged. Every key lives a TTL, so their count
  follows the request rate, which follows how busy the machine is; the soak asserts
  instead that they all expire once the load stops (tests/soak/test_soak.py).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .sampler import RESOURCES, Sample

RSS_MB_PER_10K = 2.0
"""Most RSS growth after the warm-up, in MB per 10,000 requests (200 bytes a request)."""

SLACK: dict[str, tuple[int, float]] = {
    "fds": (16, 0.15),
    "threads": (4, 0.15),
    "tasks": (32, 0.15),
}
"""Per counted resource: (absolute slack, slack as a fraction of the warm-up's highest)."""


def slope(xs: Sequence[float], ys: Sequence[float]) -> float:
    """The least-squares slope of ys over xs (0 when the xs do not vary)."""
    n = len(xs)
    if n < 2:
        return 0.0
    mean_x, mean_y = sum(xs) / n, sum(ys) / n
    spread = sum((x - mean_x) ** 2 for x in xs)
    if spread == 0:
        return 0.0
    return sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys, strict=True)) / spread


@dataclass(frozen=True)
class Growth:
    """One resource after the warm-up: its slopes, its warm-up band, and the verdict."""

    resource: str
    per_minute: float
    per_10k_requests: float
    fitted_growth: float
    band: tuple[float, float]
    peak_after: float
    allowed: float
    failure: str | None

    def as_dict(self) -> dict[str, Any]:
        return {
            "resource": self.resource,
            "per_minute": round(self.per_minute, 4),
            "per_10k_requests": round(self.per_10k_requests, 4),
            "fitted_growth": round(self.fitted_growth, 3),
            "band": list(self.band),
            "peak_after": self.peak_after,
            "allowed": None if math.isinf(self.allowed) else round(self.allowed, 3),
            "failure": self.failure,
        }


def judge(samples: Sequence[Sample], warmup: float) -> list[Growth]:
    """Each resource's growth over the samples taken `warmup` seconds or more into the load,
    against the band of those taken before."""
    before = [s for s in samples if s.t < warmup]
    after = [s for s in samples if s.t >= warmup]
    if len(before) < 2 or len(after) < 3:
        raise ValueError(f"too few samples: {len(before)} in the warm-up, {len(after)} after")
    return [_one(name, before, after) for name in RESOURCES]


def _one(name: str, before: Sequence[Sample], after: Sequence[Sample]) -> Growth:
    ys = [float(getattr(s, name)) for s in after]
    per_second = slope([s.t for s in after], ys)
    per_request = slope([float(s.requests) for s in after], ys)
    fitted = per_second * (after[-1].t - after[0].t)
    warm = [float(getattr(s, name)) for s in before]
    band, peak = (min(warm), max(warm)), max(ys)
    failure = None
    if name == "rss_mb":
        allowed = RSS_MB_PER_10K
        if per_request * 10_000 > allowed:
            failure = f"RSS grew {per_request * 10_000:.2f} MB per 10k requests (> {allowed})"
    elif name not in SLACK:
        allowed = float("inf")
    else:
        absolute, fraction = SLACK[name]
        allowed = max(absolute, fraction * band[1])
        if fitted > allowed:
            failure = f"{name} grew {fitted:.1f} over the run after the warm-up (> {allowed:g})"
        elif peak > band[1] + allowed:
            failure = f"{name} reached {peak:g}, above the warm-up band {band} + {allowed:g}"
    return Growth(name, per_second * 60, per_request * 10_000, fitted, band, peak, allowed, failure)
