"""A store of each kind: in memory, on a real redis-server, and on a Redis Cluster."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from mcp_asgi.store import MemoryStore, StateStore
from mcp_asgi.store.redis import RedisStore

from ..bus.conftest import redis_server  # noqa: F401 (a fixture)
from ..servers import RedisCluster, RedisServer


@pytest.fixture(params=["memory", "redis", "cluster"])
async def store(request: pytest.FixtureRequest) -> AsyncIterator[StateStore]:
    """A MemoryStore, a RedisStore on a fresh redis-server, or one on the session's
    cluster (its names prefixed by the test's)."""
    if request.param == "memory":
        yield MemoryStore()
        return
    if request.param == "cluster":
        cluster: RedisCluster = request.getfixturevalue("redis_cluster")
        url, prefix = cluster.url, f"test:{request.node.name}:"
    else:
        server: RedisServer = request.getfixturevalue("redis_server")
        url, prefix = server.url, "test:"
    redis_store = RedisStore(url, prefix=prefix)
    try:
        yield redis_store
    finally:
        await redis_store.aclose()
