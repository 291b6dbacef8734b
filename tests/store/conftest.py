"""A store of each kind: in memory, and on a real redis-server."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from mcp_asgi.store import MemoryStore, StateStore
from mcp_asgi.store.redis import RedisStore

from ..bus.conftest import redis_server  # noqa: F401 (a fixture)
from ..servers import RedisServer


@pytest.fixture(params=["memory", "redis"])
async def store(request: pytest.FixtureRequest) -> AsyncIterator[StateStore]:
    """A MemoryStore, or a RedisStore on a fresh redis-server."""
    if request.param == "memory":
        yield MemoryStore()
        return
    server: RedisServer = request.getfixturevalue("redis_server")
    redis_store = RedisStore(server.url, prefix="test:")
    try:
        yield redis_store
    finally:
        await redis_store.aclose()
