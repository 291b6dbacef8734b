"""What a task may take in this process beyond its running: the bytes of ended tasks.

    server_busy(...)             503 with Retry-After: the process is at one of its limits
    KeptBytes.add(client, size, expires)
                                 an ended task's record (`size` bytes) is kept until then
    KeptBytes.check(client, now) 429 when the client keeps `per_client` bytes already, 503
                                 when the process keeps `total`; Retry-After: until the
                                 oldest of them expires

A heap orders what is kept by expiry (a task may end long after later ones were created),
so a check first drops what has expired: no background task, a log-time cost per task.
"""

from __future__ import annotations

import heapq
import math
from typing import Final

from mcp_asgi.limits import TooManyRequests
from mcp_asgi.protocol.jsonrpc import INTERNAL_ERROR, ProtocolError

_LONGEST_RETRY: Final = 3600.0  # Retry-After never says more (a TTL may be unlimited)


def server_busy(detail: str, limit: str, retry_after: float = 1.0) -> ProtocolError:
    """503 with Retry-After: the process holds its limit `limit` (a setting's name) of
    something; another replica may serve the request."""
    seconds = max(1, math.ceil(min(retry_after, _LONGEST_RETRY)))
    return ProtocolError(
        503,
        INTERNAL_ERROR,
        f"Service Unavailable: {detail} ({limit})",
        {"reason": "server_busy", "limit": limit, "retryAfter": seconds},
        headers=[(b"retry-after", str(seconds).encode())],
    )


class KeptBytes:
    """Bytes kept by ended tasks, per client and in all; a limit of None is off."""

    def __init__(self, *, per_client: int | None, total: int | None) -> None:
        self._per_client = per_client
        self._total = total
        self._heap: list[tuple[float, int, str, int]] = []  # (expires, order, client, size)
        self._order = 0
        self._bytes: dict[str, int] = {}
        self._expiries: dict[str, list[float]] = {}  # per client, a heap
        self.kept = 0
        """Bytes kept now, all clients together (as of the last check)."""

    def held(self, client: str) -> int:
        """Bytes `client`'s ended tasks keep (as of the last check)."""
        return self._bytes.get(client, 0)

    def add(self, client: str, size: int, expires: float | None) -> None:
        """An ended task of `client` keeps `size` bytes until `expires` (None: forever)."""
        if self._per_client is None and self._total is None:
            return
        when = math.inf if expires is None else expires
        self._order += 1
        heapq.heappush(self._heap, (when, self._order, client, size))
        heapq.heappush(self._expiries.setdefault(client, []), when)
        self._bytes[client] = self.held(client) + size
        self.kept += size

    def check(self, client: str, now: float) -> None:
        """Refuse a new task while `client`, or the process, keeps its limit of bytes."""
        self._expire(now)
        held = self.held(client)
        if self._per_client is not None and held >= self._per_client:
            raise TooManyRequests(
                f"this client's ended tasks keep {held} bytes until they expire, at most "
                f"{self._per_client}",
                min(self._expiries[client][0] - now, _LONGEST_RETRY),
                "max_kept_task_bytes_per_client",
            )
        if self._total is not None and self.kept >= self._total:
            raise server_busy(
                f"ended tasks keep {self.kept} bytes on this server until they expire, at "
                f"most {self._total}",
                "max_kept_task_bytes",
                self._heap[0][0] - now,
            )

    def _expire(self, now: float) -> None:
        heap = self._heap
        while heap and heap[0][0] <= now:
            _, _, client, size = heapq.heappop(heap)
            self.kept -= size
            expiries = self._expiries[client]
            heapq.heappop(expiries)  # the client's oldest: this one (or one as old)
            if expiries:
                self._bytes[client] -= size
            else:
                del self._bytes[client], self._expiries[client]
