"""The store a URL names (the `bus_url` setting names both the bus and the store)."""

from __future__ import annotations

from mcp_asgi._redis import check_url
from mcp_asgi.store.base import StateStore
from mcp_asgi.store.memory import MemoryStore


def store_from_url(
    url: str | None, *, prefix: str = "mcp_asgi:", timeout: float = 2.0, retry_max: float = 5.0
) -> StateStore:
    """The store a URL names: None for memory, `redis://`, `rediss://` or `unix://` for
    one Redis server, `redis+cluster://` or `rediss+cluster://` for a Redis Cluster (the
    same URL as the bus's `bus_url`; `timeout` and `retry_max`: see `RedisStore`)."""
    if url is None:
        return MemoryStore()
    check_url(url, "a store URL")
    from mcp_asgi.store.redis import RedisStore

    return RedisStore(url, prefix=prefix, timeout=timeout, retry_max=retry_max)
