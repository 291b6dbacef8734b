"""`RedisStore`: the `StateStore` shared by every process and replica through Redis.

Install with ``pip install 'mcp-asgi[redis]'`` (redis-py >= 5, asyncio API). Keys are
plain strings with `PX` expiry, compare-and-set is a small Lua script (atomic on the
server), streams are Redis Streams (one script: `XADD` with `MAXLEN ~`, then `PEXPIRE`;
`XREAD BLOCK`), channels are pub/sub. Every name is prefixed (`mcp_asgi:` by default).
Connections come from one pool; a blocking read or a subscription holds one connection
while it waits.

On a Redis Cluster (a `redis+cluster://` URL) every operation touches one key, so one hash
slot (`store.base.slot_tag` puts what belongs together in one); channels are sharded
(`SPUBLISH`, `SSUBSCRIBE` on the channel's master: `mcp_asgi._redis`), and `check()` pings
every master.

Every operation is bounded by `timeout` seconds (a blocking read: its wait, plus that),
connecting included; one that cannot reach Redis in time raises `StoreUnavailable` (so
does a cluster that answers CLUSTERDOWN). The outage is then logged once
(`store.outage.Outage`) and, until a probe gets through again (a capped backoff,
`retry_max`), operations raise it at once instead of waiting. On a cluster the outage is
the store's, not a master's: while one master is out of reach and the others answer, a
probe that reaches another one ends it, and the next operation on the lost master begins
another (logged again, at most once per backoff).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any, Final, TypeVar

import anyio

from mcp_asgi._loggers import redacted_url
from mcp_asgi._redis import Channels, SlotMoved, connect, ping, unreachable_errors
from mcp_asgi.store.base import START, Entry, StoreUnavailable
from mcp_asgi.store.outage import Outage

T = TypeVar("T")

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

# XADD and PEXPIRE in one step (a script: atomic on a cluster too, where MULTI is not
# offered; one key, so one slot)
_APPEND: Final = """
local position = redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[1], '*', 'd', ARGV[2])
if ARGV[3] ~= '' then
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
end
return position
"""


class RedisStore:
    """A `StateStore` on the Redis server at `url` (`redis://`, `rediss://`, `unix://`),
    or on the Redis Cluster whose nodes `url` names (`redis+cluster://`,
    `rediss+cluster://`; several separated by commas).

    `timeout`: seconds an operation may take (connecting included) before Redis counts as
    unreachable; `retry_max`: the longest wait between two attempts while it is.
    """

    shared = True

    def __init__(
        self, url: str, *, prefix: str = "mcp_asgi:", timeout: float = 2.0, retry_max: float = 5.0
    ) -> None:
        try:
            from redis.asyncio.retry import Retry
            from redis.backoff import NoBackoff
        except ImportError as exc:  # pragma: no cover - depends on the install
            raise ImportError("RedisStore needs redis-py: pip install 'mcp-asgi[redis]'") from exc
        if timeout <= 0 or retry_max <= 0:
            raise ValueError("timeout and retry_max must be > 0")
        self.url = url
        self.prefix = prefix
        self.timeout = timeout
        """Seconds an operation may take before Redis counts as unreachable."""
        # no socket timeout: each operation has its own deadline (a blocking read's is
        # longer); one retry at once, for a pooled connection Redis closed (a restart)
        options = {"socket_connect_timeout": timeout, "retry": Retry(NoBackoff(), 1)}
        self._client: Any = connect(url, **options)
        self._channels = Channels(self._client, url, **options)
        self._set_if: Any = self._client.register_script(_SET_IF)
        self._append: Any = self._client.register_script(_APPEND)
        self._unreachable = unreachable_errors()
        self._outage = Outage(redacted_url(url), initial=min(0.1, retry_max), cap=retry_max)

    @property
    def reachable(self) -> bool:
        """Whether the last operation reached Redis (no I/O; `check()` asks it)."""
        return not self._outage.down

    # -- keys --------------------------------------------------------------------------

    async def get(self, key: str) -> bytes | None:
        value: bytes | None = await self._call(lambda: self._client.get(self.prefix + key))
        return value

    async def set(self, key: str, value: bytes, *, ttl: float | None = None) -> None:
        await self._call(lambda: self._client.set(self.prefix + key, value, px=_ms(ttl)))

    async def set_if(
        self, key: str, value: bytes, *, expected: bytes | None, ttl: float | None = None
    ) -> bool:
        px = _ms(ttl)
        args = ["1" if expected is None else "0", expected or b"", value, "" if px is None else px]
        return bool(await self._call(lambda: self._set_if(keys=[self.prefix + key], args=args)))

    async def delete(self, key: str) -> None:
        await self._call(lambda: self._client.delete(self.prefix + key))

    # -- streams -----------------------------------------------------------------------

    async def append(
        self, stream: str, data: bytes, *, max_len: int, ttl: float | None = None
    ) -> str:
        args = [max(1, max_len), data, "" if ttl is None else _ms(ttl)]
        keys = [self.prefix + stream]
        position = await self._call(lambda: self._append(keys=keys, args=args))
        return position.decode() if isinstance(position, bytes) else str(position)

    async def read(
        self, stream: str, after: str = START, *, limit: int = 100, wait: float = 0.0
    ) -> list[Entry]:
        block = int(wait * 1000) if wait > 0 else None
        try:
            streams = {self.prefix + stream: after}
            found = await self._call(
                lambda: self._client.xread(streams, count=limit, block=block), wait=wait
            )
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
        await self._call(lambda: self._channels.publish(self.prefix + channel, data))

    @asynccontextmanager
    async def subscribe(self, channel: str) -> AsyncIterator[AsyncIterator[bytes]]:
        listener = self._channels.listener(self.prefix + channel)
        try:
            await self._call(lambda: listener.open(self.timeout))

            async def messages() -> AsyncIterator[bytes]:
                while True:
                    try:
                        message = await listener.get_message(timeout=30)
                    except SlotMoved as moved:  # not an outage: subscribe again
                        raise StoreUnavailable(f"{moved}; subscribe again") from moved
                    except self._unreachable as error:  # Redis closed the connection
                        self._outage.failed(error)
                        raise StoreUnavailable(f"Redis unreachable: {error}") from error
                    if message is not None and message.get("type") == "message":
                        yield message["data"]

            yield messages()
        finally:
            with anyio.CancelScope(shield=True), anyio.move_on_after(self.timeout):
                await listener.aclose()

    # -- health ------------------------------------------------------------------------

    async def check(self) -> bool:
        try:
            await self._call(lambda: ping(self._client))
        except StoreUnavailable:
            return False
        return True

    async def aclose(self) -> None:
        with anyio.move_on_after(self.timeout):
            await self._channels.aclose()
            await self._client.aclose()

    async def _call(self, operation: Callable[[], Awaitable[T]], *, wait: float = 0.0) -> T:
        """Run one operation within the timeout (plus `wait`, a blocking read's); while
        Redis is known to be down, `StoreUnavailable` at once but for a probe now and
        then. An error Redis answered with (a script error, a refused command) is raised
        as it is."""
        if not self._outage.admit():
            raise StoreUnavailable(f"Redis at {redacted_url(self.url)} is unreachable")
        try:
            with anyio.fail_after(self.timeout + wait):
                result = await operation()
        except self._unreachable as error:
            if isinstance(error, TimeoutError) and not str(error):  # our deadline's
                error = TimeoutError(f"no answer within {self.timeout + wait:g}s")
            self._outage.failed(error)
            raise StoreUnavailable(f"Redis unreachable: {error}") from error
        finally:
            self._outage.settled()
        self._outage.succeeded()
        return result


def _ms(ttl: float | None) -> int | None:
    return None if ttl is None else max(1, int(ttl * 1000))
