"""`RedisStore`: the `StateStore` shared by every process and replica through Redis.

Install with ``pip install 'mcp-asgi[redis]'`` (redis-py >= 5, asyncio API). Keys are
plain strings with `PX` expiry, compare-and-set is a small Lua script (atomic on the
server), streams are Redis Streams (`XADD` with `MAXLEN ~`, `PEXPIRE` after each append,
`XREAD BLOCK`), channels are pub/sub. Every name is prefixed (`mcp_asgi:` by default).
Connections come from one pool; a blocking read or a subscription holds one connection
while it waits.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, Final

from mcp_asgi.store.base import START, Entry

_SET_IF: Final = """
local current = redis.call('GET', KEYS[1])
if (ARGV[1] == '1' and current ~= false) or (ARGV[1] == '0' and current ~= ARGV[2]) then
  return 0
end
if ARGV[4] == '' then
  redis.call('SET', KEYS[1], ARGV[3])
else
  redis.call('SET', KEYS[1], ARGV[3], 'PX', ARGV[4])
end
return 1
"""


class RedisStore:
    """A `StateStore` on the Redis server at `url` (`redis://`, `rediss://`, `unix://`)."""

    shared = True

    def __init__(self, url: str, *, prefix: str = "mcp_asgi:") -> None:
        try:
            import redis.asyncio as aioredis
        except ImportError as exc:  # pragma: no cover - depends on the install
            raise ImportError("RedisStore needs redis-py: pip install 'mcp-asgi[redis]'") from exc
        self.url = url
        self.prefix = prefix
        self._client: Any = aioredis.Redis.from_url(url)
        self._set_if: Any = self._client.register_script(_SET_IF)

    # -- keys --------------------------------------------------------------------------

    async def get(self, key: str) -> bytes | None:
        value: bytes | None = await self._client.get(self.prefix + key)
        return value

    async def set(self, key: str, value: bytes, *, ttl: float | None = None) -> None:
        await self._client.set(self.prefix + key, value, px=_ms(ttl))

    async def set_if(
        self, key: str, value: bytes, *, expected: bytes | None, ttl: float | None = None
    ) -> bool:
        px = _ms(ttl)
        args = ["1" if expected is None else "0", expected or b"", value, "" if px is None else px]
        return bool(await self._set_if(keys=[self.prefix + key], args=args))

    async def delete(self, key: str) -> None:
        await self._client.delete(self.prefix + key)

    # -- streams -----------------------------------------------------------------------

    async def append(
        self, stream: str, data: bytes, *, max_len: int, ttl: float | None = None
    ) -> str:
        name = self.prefix + stream
        async with self._client.pipeline(transaction=True) as pipe:
            pipe.xadd(name, {"d": data}, maxlen=max(1, max_len), approximate=True)
            if ttl is not None:
                pipe.pexpire(name, _ms(ttl))
            position, *_ = await pipe.execute()
        return position.decode() if isinstance(position, bytes) else str(position)

    async def read(
        self, stream: str, after: str = START, *, limit: int = 100, wait: float = 0.0
    ) -> list[Entry]:
        block = int(wait * 1000) if wait > 0 else None
        try:
            streams = {self.prefix + stream: after}
            found = await self._client.xread(streams, count=limit, block=block)
        except Exception as exc:  # an invalid position given by a client
            if "Invalid stream ID" in str(exc):
                return []
            raise
        entries: list[Entry] = []
        for _, items in found or ():
            for position, fields in items:
                pos = position.decode() if isinstance(position, bytes) else str(position)
                entries.append(Entry(pos, fields[b"d"]))
        return entries

    # -- channels ----------------------------------------------------------------------

    async def publish(self, channel: str, data: bytes) -> None:
        await self._client.publish(self.prefix + channel, data)

    @asynccontextmanager
    async def subscribe(self, channel: str) -> AsyncIterator[AsyncIterator[bytes]]:
        pubsub = self._client.pubsub()
        try:
            await pubsub.subscribe(self.prefix + channel)

            async def messages() -> AsyncIterator[bytes]:
                while True:
                    message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=30)
                    if message is not None and message.get("type") == "message":
                        yield message["data"]

            yield messages()
        finally:
            await pubsub.aclose()

    async def aclose(self) -> None:
        await self._client.aclose()


def _ms(ttl: float | None) -> int | None:
    return None if ttl is None else max(1, int(ttl * 1000))
