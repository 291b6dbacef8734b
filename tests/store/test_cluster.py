"""RedisStore on a Redis Cluster when one master stops answering (SIGSTOP): `check()` asks
every master, so it says the store is out of reach though the others answer; an operation
on a name of the lost master's slots is `StoreUnavailable` within its timeout; all is well
again once the master answers."""

from __future__ import annotations

import anyio
import pytest

from mcp_asgi.store import StoreUnavailable
from mcp_asgi.store.redis import RedisStore

from ..servers import RedisCluster
from .test_outage import TIMEOUT, recovered


async def test_a_paused_master_is_an_outage(redis_cluster: RedisCluster) -> None:
    master = redis_cluster.nodes[2]  # not the node the URL names
    store = RedisStore(redis_cluster.url, prefix="paused:", timeout=TIMEOUT, retry_max=0.2)
    name = next(f"k{i}" for i in range(1000) if redis_cluster.owner(f"paused:k{i}") is master)
    try:
        await store.set(name, b"v")
        assert await store.check()
        master.pause()
        try:
            assert not await store.check()
            with anyio.fail_after(5 * TIMEOUT + 5), pytest.raises(StoreUnavailable):
                await store.get(name)
        finally:
            master.resume()
        await recovered(store)
        assert await store.get(name) == b"v"
    finally:
        await store.aclose()
