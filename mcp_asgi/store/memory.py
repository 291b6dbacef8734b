"""`MemoryStore`: the `StateStore` of one process (the default without Redis).

Expiry is checked when a key or stream is touched, and a sweep drops expired ones at most
once a second: no background task. Channels fan out to this process's subscribers only.
"""

from __future__ import annotations

import collections
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import anyio
from anyio.streams.memory import MemoryObjectSendStream

from mcp_asgi.store.base import START, Entry

_BUFFER = 64  # messages a channel subscriber may fall behind before losing some


@dataclass(slots=True)
class _Stream:
    entries: collections.deque[Entry]
    last: int = 0
    expires: float = float("inf")
    changed: anyio.Event = field(default_factory=anyio.Event)


class MemoryStore:
    """Keys, streams and channels in this process's memory."""

    shared = False

    def __init__(self, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._values: dict[str, tuple[bytes, float]] = {}
        self._streams: dict[str, _Stream] = {}
        self._channels: dict[str, set[MemoryObjectSendStream[bytes]]] = {}
        self._next_sweep = clock() + 1.0

    # -- keys --------------------------------------------------------------------------

    async def get(self, key: str) -> bytes | None:
        self._sweep()
        item = self._values.get(key)
        if item is None:
            return None
        if item[1] <= self._clock():
            del self._values[key]
            return None
        return item[0]

    async def set(self, key: str, value: bytes, *, ttl: float | None = None) -> None:
        self._values[key] = (value, self._expiry(ttl))

    async def set_if(
        self, key: str, value: bytes, *, expected: bytes | None, ttl: float | None = None
    ) -> bool:
        if await self.get(key) != expected:  # no await inside get: atomic on the loop
            return False
        self._values[key] = (value, self._expiry(ttl))
        return True

    async def delete(self, key: str) -> None:
        self._values.pop(key, None)
        stream = self._streams.pop(key, None)
        if stream is not None:
            stream.changed.set()

    # -- streams -----------------------------------------------------------------------

    async def append(
        self, stream: str, data: bytes, *, max_len: int, ttl: float | None = None
    ) -> str:
        self._sweep()
        found = self._stream(stream)
        if found is None:
            found = self._streams[stream] = _Stream(collections.deque(maxlen=max(1, max_len)))
        found.last += 1
        position = str(found.last)
        found.entries.append(Entry(position, data))
        found.expires = self._expiry(ttl)
        found.changed.set()
        found.changed = anyio.Event()
        return position

    async def read(
        self, stream: str, after: str = START, *, limit: int = 100, wait: float = 0.0
    ) -> list[Entry]:
        try:
            last = int(after)
        except ValueError:
            return []
        with anyio.move_on_after(wait):
            while True:
                found = self._stream(stream)
                if found is not None:
                    entries = [e for e in found.entries if int(e.position) > last]
                    if entries:
                        return entries[:limit]
                if wait <= 0:
                    return []
                if found is None:
                    await anyio.sleep(0.05)  # nothing to wait on yet: poll for its creation
                else:
                    await found.changed.wait()
        return []

    # -- channels ----------------------------------------------------------------------

    async def publish(self, channel: str, data: bytes) -> None:
        for send in list(self._channels.get(channel, ())):
            try:
                send.send_nowait(data)
            except anyio.WouldBlock:
                pass  # a subscriber that does not read loses what overflows
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                self._channels.get(channel, set()).discard(send)

    @asynccontextmanager
    async def subscribe(self, channel: str) -> AsyncIterator[AsyncIterator[bytes]]:
        send, receive = anyio.create_memory_object_stream[bytes](_BUFFER)
        subscribers = self._channels.setdefault(channel, set())
        subscribers.add(send)
        try:
            yield receive
        finally:
            subscribers.discard(send)
            if not subscribers:
                self._channels.pop(channel, None)
            send.close()
            receive.close()

    async def check(self) -> bool:
        """Always: this process's memory."""
        return True

    async def aclose(self) -> None:
        """Nothing to release."""

    # -- expiry ------------------------------------------------------------------------

    def _expiry(self, ttl: float | None) -> float:
        return float("inf") if ttl is None else self._clock() + ttl

    def _stream(self, name: str) -> _Stream | None:
        found = self._streams.get(name)
        if found is not None and found.expires <= self._clock():
            del self._streams[name]
            found.changed.set()
            return None
        return found

    def _sweep(self) -> None:
        now = self._clock()
        if now < self._next_sweep:
            return
        self._next_sweep = now + 1.0
        for key in [k for k, (_, expires) in self._values.items() if expires <= now]:
            del self._values[key]
        for name in [n for n, s in self._streams.items() if s.expires <= now]:
            self._streams.pop(name).changed.set()
