"""The soak's growth check (tests/soak/growth.py) on made-up samples: flat ones pass, and
each kind of growth it is there to catch fails it."""

from __future__ import annotations

import dataclasses

import pytest

from .growth import RSS_MB_PER_10K, judge, slope
from .sampler import Sample

WARMUP = 60.0


def _samples(**growth_per_sample: float) -> list[Sample]:
    """120 samples, 1 s and 100 requests apart, flat with a wobble, each resource rising by
    `growth_per_sample` from the warm-up's end on."""
    flat = Sample(t=0, requests=0, rss_mb=60.0, fds=30, threads=1, tasks=40, keys=300)
    out = []
    for i in range(120):
        wobble = (-1) ** i
        values = {
            "rss_mb": flat.rss_mb + 0.05 * wobble,
            "fds": flat.fds + 2 * wobble,
            "tasks": flat.tasks + 3 * wobble,
            "keys": flat.keys + 20 * wobble,
        }
        for name, rate in growth_per_sample.items():
            values[name] = values.get(name, getattr(flat, name)) + rate * max(0, i - WARMUP)
        counts = {k: round(v) for k, v in values.items() if k != "rss_mb"}
        out.append(
            dataclasses.replace(
                flat, t=float(i), requests=100 * i, rss_mb=values["rss_mb"], **counts
            )
        )
    return out


def _failures(samples: list[Sample]) -> dict[str, str]:
    return {g.resource: g.failure for g in judge(samples, WARMUP) if g.failure}


def test_slope_is_least_squares() -> None:
    assert slope([0, 1, 2, 3], [1, 3, 5, 7]) == pytest.approx(2)
    assert slope([0, 1, 2, 3], [0, 1, 0, 1]) == pytest.approx(0.2)
    assert slope([5, 5], [1, 2]) == 0.0


def test_flat_samples_pass() -> None:
    growth = judge(_samples(), WARMUP)
    assert [g.failure for g in growth] == [None] * 5
    assert abs(growth[0].per_10k_requests) < 0.1


def test_rss_growth_beyond_the_bound_fails() -> None:
    # 100 requests a sample: a growth of 1.5x the bound per 10k requests
    per_sample = 1.5 * RSS_MB_PER_10K / 100
    assert set(_failures(_samples(rss_mb=per_sample))) == {"rss_mb"}
    assert _failures(_samples(rss_mb=per_sample / 3)) == {}


@pytest.mark.parametrize("resource", ["fds", "threads", "tasks"])
def test_a_count_that_keeps_rising_fails(resource: str) -> None:
    # two more every sample: a leak of one per 50 requests
    assert set(_failures(_samples(**{resource: 2.0}))) == {resource}


def test_the_key_count_is_reported_not_judged() -> None:
    (keys,) = [g for g in judge(_samples(keys=2.0), WARMUP) if g.resource == "keys"]
    assert keys.failure is None
    assert keys.per_minute == pytest.approx(120, rel=0.05)


def test_a_count_that_jumps_out_of_its_band_fails() -> None:
    samples = _samples()
    samples[-5] = dataclasses.replace(samples[-5], tasks=200)
    assert "above the warm-up band" in _failures(samples)["tasks"]


def test_too_few_samples_is_an_error() -> None:
    with pytest.raises(ValueError, match="too few samples"):
        judge(_samples()[:50], WARMUP)
