"""A token bucket per client, in a table that forgets clients whose bucket is full again."""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

_SWEEP_ABOVE: Final = 4096  # clients remembered before full buckets are forgotten


class Buckets:
    """`rate` tokens a second, at most `burst` saved, one bucket per client key."""

    def __init__(self, *, rate: float, burst: int, clock: Callable[[], float]) -> None:
        self._rate = rate
        self._burst = float(burst)
        self._clock = clock
        self._buckets: dict[str, tuple[float, float]] = {}  # key -> (tokens, at)
        self._next_sweep = 0.0

    def __len__(self) -> int:
        return len(self._buckets)

    def take(self, key: str) -> float:
        """Take one token for `key`: 0.0 when there was one, else the seconds until
        there will be (nothing is taken then)."""
        now = self._clock()
        buckets = self._buckets
        # `_level`, inline (this runs for every request)
        saved = buckets.get(key)
        if saved is None:
            tokens = self._burst
        else:
            tokens = saved[0] + (now - saved[1]) * self._rate
            if tokens > self._burst:
                tokens = self._burst
        if tokens < 1.0:
            buckets[key] = (tokens, now)
            return (1.0 - tokens) / self._rate
        buckets[key] = (tokens - 1.0, now)
        if len(buckets) > _SWEEP_ABOVE and now >= self._next_sweep:
            self._sweep(now)
        return 0.0

    def level(self, key: str) -> float:
        """The tokens in `key`'s bucket now (nothing is taken)."""
        return self._level(key, self._clock())

    def charge(self, key: str, tokens: float) -> None:
        """Take `tokens` from `key`'s bucket whatever it holds (it may go below empty: the
        client then waits until the rate has filled it back above one token)."""
        now = self._clock()
        self._buckets[key] = (self._level(key, now) - tokens, now)
        if len(self._buckets) > _SWEEP_ABOVE and now >= self._next_sweep:
            self._sweep(now)

    def _level(self, key: str, now: float) -> float:
        """The tokens in `key`'s bucket at `now` (full for a client not seen)."""
        tokens, at = self._buckets.get(key, (self._burst, now))
        return min(self._burst, tokens + (now - at) * self._rate)

    def _sweep(self, now: float) -> None:
        """Forget the clients whose bucket has filled up again (they are as if new);
        at most once a second, so the cost is spread over many requests."""
        self._next_sweep = now + 1.0
        full = self._burst
        self._buckets = {
            key: (tokens, at)
            for key, (tokens, at) in self._buckets.items()
            if tokens + (now - at) * self._rate < full
        }
