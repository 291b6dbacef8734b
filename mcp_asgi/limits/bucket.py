"""A token bucket per client, in a table that forgets clients whose bucket is full again."""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

_SWEEP_ABOVE: Final = 4096  # clients remembered before full buckets are forgotten


class Buckets:
    """`rate` tokens a second, at most `burst` saved, one bucket per client key.

    A bucket is kept as the one time at which it will be full again (a client not in the
    table has a full bucket): taking a token moves that time on by 1/`rate`, and the
    bucket holds `burst - (full_at - now) * rate` tokens. One float a client, written in
    place, where tokens and the time they were counted would be a new pair each request.
    """

    def __init__(self, *, rate: float, burst: int, clock: Callable[[], float]) -> None:
        if rate <= 0 or burst < 1:
            raise ValueError("a bucket needs a positive rate and a burst of at least 1")
        self._rate = rate
        self._burst = float(burst)
        self._interval = 1.0 / rate  # the time one token takes to come back
        self._slack = (burst - 1) / rate  # how far ahead full_at may be and a token be left
        self._clock = clock
        self._full_at: dict[str, float] = {}  # key -> when its bucket is full again
        self._next_sweep = 0.0

    def __len__(self) -> int:
        return len(self._full_at)

    def take(self, key: str) -> float:
        """Take one token for `key`: 0.0 when there was one, else the seconds until
        there will be (nothing is taken then)."""
        now = self._clock()
        full_at = self._full_at.get(key)
        if full_at is None:  # a full bucket: a burst of at least 1 has a token
            full_at = self._room(now)
        elif full_at < now:
            full_at = now
        elif full_at - self._slack > now:  # less than one token left
            return full_at - self._slack - now
        self._full_at[key] = full_at + self._interval
        return 0.0

    def level(self, key: str) -> float:
        """The tokens in `key`'s bucket now (nothing is taken)."""
        now = self._clock()
        full_at = self._full_at.get(key, now)
        return self._burst - max(0.0, full_at - now) * self._rate

    def charge(self, key: str, tokens: float) -> None:
        """Take `tokens` from `key`'s bucket whatever it holds (it may go below empty: the
        client then waits until the rate has filled it back above one token)."""
        now = self._clock()
        full_at = self._full_at.get(key)
        if full_at is None:
            full_at = self._room(now)
        self._full_at[key] = max(now, full_at) + tokens / self._rate

    def _room(self, now: float) -> float:
        """Room for a client not in the table (its full bucket's time, `now`): the table
        swept first when it is large. (The sweep makes a new table: the key goes in that.)"""
        if len(self._full_at) >= _SWEEP_ABOVE and now >= self._next_sweep:
            self._sweep(now)
        return now

    def _sweep(self, now: float) -> None:
        """Forget the clients whose bucket has filled up again (they are as if new);
        at most once a second, so the cost is spread over many requests."""
        self._next_sweep = now + 1.0
        self._full_at = {key: full_at for key, full_at in self._full_at.items() if full_at > now}
