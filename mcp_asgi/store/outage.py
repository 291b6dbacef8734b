"""`Outage`: a store's Redis out of reach, logged once and retried with a capped backoff.

::

    up ──► an operation fails to reach Redis ──► down: WARNING (once), `StoreUnavailable`
    down ──► every operation fails at once, except one probe at a time, after a backoff
             (`initial` seconds, doubling up to `cap`) ──► a probe that answers: up, INFO

So while Redis is away a request waits at most one timeout (the probe's), most wait none,
and the log says when the outage began and ended, never once per request.
"""

from __future__ import annotations

import random
from collections.abc import Callable

import anyio

from mcp_asgi._loggers import store_logger as logger


class Outage:
    """Whether a store's Redis is reachable, and when to try it again while it is not."""

    def __init__(
        self,
        where: str,
        *,
        initial: float = 0.1,
        cap: float = 5.0,
        clock: Callable[[], float] = anyio.current_time,
    ) -> None:
        self._where = where  # the redacted URL, for the log
        self._initial = initial
        self._cap = cap
        self._clock = clock
        self._since: float | None = None
        self._delay = initial
        self._next_try = 0.0
        self._probing = False

    @property
    def down(self) -> bool:
        """Whether the last attempt failed to reach Redis."""
        return self._since is not None

    def admit(self) -> bool:
        """Whether an operation may try Redis now: always while up; while down, one probe
        at a time once the backoff has passed (call `settled` after it)."""
        if self._since is None:
            return True
        if self._probing or self._clock() < self._next_try:
            return False
        self._probing = True
        return True

    def failed(self, error: BaseException) -> None:
        """An attempt could not reach Redis."""
        now = self._clock()
        if self._since is None:
            self._since = now
            self._delay = self._initial
            logger.warning(
                "store: lost Redis at %s (%s: %s); serving without it, retrying every %gs at most",
                self._where,
                type(error).__name__,
                error,
                self._cap,
            )
        elif self._probing:
            logger.debug("store: Redis still unreachable (%s)", type(error).__name__)
            self._delay = min(self._delay * 2, self._cap)
        else:
            return  # an attempt started before the outage was known: no probe of ours
        self._next_try = now + self._delay * random.uniform(0.5, 1.0)

    def succeeded(self) -> None:
        """An attempt reached Redis."""
        if self._since is not None:
            logger.info(
                "store: Redis at %s reachable again after %.1fs",
                self._where,
                self._clock() - self._since,
            )
            self._since = None

    def settled(self) -> None:
        """An admitted attempt is over (whatever its outcome)."""
        self._probing = False
