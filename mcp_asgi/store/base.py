"""`StateStore`: what a shared-state store offers, in memory or in Redis.

Three primitives, each enough for one job and all safe to use from several replicas:

keys with a time to live (the record of a session, of a task)::

    await store.set("session:abc", record, ttl=1800)      # None: no expiry
    await store.get("session:abc")                         # bytes, or None once expired
    await store.set_if("task:42", new, expected=old)       # compare-and-set: False if changed
    await store.set_if("lock:x", b"me", expected=None)     # create only if absent
    await store.delete("session:abc")

streams: append-only logs with increasing positions, bounded and expiring (the events a
client resumes from with `Last-Event-ID`)::

    position = await store.append("events:abc:1", data, max_len=1000, ttl=1800)
    entries = await store.read("events:abc:1", after=START, wait=5.0)  # [Entry], in order

A position is an opaque string (the store's own order); `START` ("0") is before the first
entry. `read` returns the entries after `after`, at most `limit`, waiting up to `wait`
seconds for the first one when there is none yet: a reader that keeps passing the last
position it got sees every entry exactly once, in order.

channels: fire-and-forget messages to whoever listens now (the answer to a server-to-client
request, reaching the replica whose handler waits for it)::

    async with store.subscribe("reply:abc:7") as messages:   # subscribed when entered
        ...                                                  # then ask the client
        async for data in messages: ...
    await store.publish("reply:abc:7", data)                 # to current subscribers only

A store that cannot be reached (Redis down, paused, too slow) raises `StoreUnavailable`
from any of these, within its timeout: the caller falls back or answers an error, never
waits longer; `await store.check()` says whether it answers now (a health check).

Values are bytes; what they mean is the caller's. Keys, streams and channels share one
namespace per store (`prefix`), so name them by owner (`session:`, `events:`, `task:`).
Names that hold `slot_tag(owner)` live together: on a Redis Cluster, in one hash slot, so
on one master, moved together and reachable by one script or transaction (a session's
record, its event streams and its reply channels); names without one spread over the
masters.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager
from typing import Final, NamedTuple, Protocol

START: Final = "0"
"""The position before the first entry of any stream."""


def slot_tag(owner: str) -> str:
    """`owner` as a Redis Cluster hash tag (`{owner}`): the names that hold it, first of
    their braces, share one hash slot. `owner` must not hold braces itself."""
    if "{" in owner or "}" in owner:
        raise ValueError(f"a hash tag's owner holds no braces: {owner!r}")
    return "{" + owner + "}"


class StoreUnavailable(Exception):
    """The store cannot be reached now (within its timeout, or while it is known to be
    down): the operation may not have happened. Logged once per outage by the store."""


class Entry(NamedTuple):
    """One entry of a stream: its position and its data."""

    position: str
    data: bytes


class StateStore(Protocol):
    """Keys with a time to live, streams with positions, and channels (see the module)."""

    @property
    def shared(self) -> bool:
        """Whether other processes see this store (Redis) or only this one (memory)."""
        ...

    async def get(self, key: str) -> bytes | None:
        """The value of `key`, or None when absent or expired."""
        ...

    async def set(self, key: str, value: bytes, *, ttl: float | None = None) -> None:
        """Write `key`, expiring after `ttl` seconds (None: never)."""
        ...

    async def set_if(
        self, key: str, value: bytes, *, expected: bytes | None, ttl: float | None = None
    ) -> bool:
        """Write `key` only if its value is `expected` now (None: only if absent), atomically;
        whether it was written."""
        ...

    async def delete(self, key: str) -> None:
        """Remove `key` (a stream too); nothing if absent."""
        ...

    async def append(
        self, stream: str, data: bytes, *, max_len: int, ttl: float | None = None
    ) -> str:
        """Add an entry at the end of `stream` and return its position. The stream keeps
        about its last `max_len` entries and expires `ttl` seconds after the last append."""
        ...

    async def read(
        self, stream: str, after: str = START, *, limit: int = 100, wait: float = 0.0
    ) -> list[Entry]:
        """The entries after position `after`, oldest first, at most `limit`; when there is
        none, wait up to `wait` seconds for one (0: do not wait)."""
        ...

    async def publish(self, channel: str, data: bytes) -> None:
        """Send `data` to the current subscribers of `channel` (none: it is dropped)."""
        ...

    def subscribe(self, channel: str) -> AbstractAsyncContextManager[AsyncIterator[bytes]]:
        """The messages published on `channel` while the context is open (subscribed once
        entered, so nothing published after that is missed)."""
        ...

    async def check(self) -> bool:
        """Whether the store answers now (a health check; bounded by its timeout)."""
        ...

    async def aclose(self) -> None:
        """Release the store's connections."""
        ...
