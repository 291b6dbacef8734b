"""RedisStore on a Redis Cluster when one master stops answering (SIGSTOP): `check()` asks
every master, so it says the store is out of reach though the others answer; an operation
on a name of the lost master's slots is `StoreUnavailable` within its timeout; all is well
again once the master answers. When a channel's slot moves to another master, its
subscription ends (no outage), and subscribing again reaches the new owner."""

from __future__ import annotations

import logging

import anyio
import pytest

from mcp_asgi.store import StoreUnavailable
from mcp_asgi.store.redis import RedisStore

from ..servers import RedisCluster, free_port
from .test_outage import TIMEOUT, recovered


async def test_a_paused_master_is_an_outage(redis_cluster: RedisCluster) -> None:
    """A master other than the one the URL names stops answering."""
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


async def test_a_subscription_whose_slot_moves_ends_and_is_made_again(
    redis_cluster: RedisCluster, caplog: pytest.LogCaptureFixture
) -> None:
    """The subscription ends with `StoreUnavailable` saying to subscribe again, logged as
    no outage; the next one, made from a slot map out of date (MOVED), reaches the new
    owner."""
    channel = "moving"
    store = RedisStore(redis_cluster.url, prefix="slots:", timeout=TIMEOUT)
    first = redis_cluster.owner("slots:" + channel)
    second = next(node for node in redis_cluster.nodes if node is not first)
    try:
        async with store.subscribe(channel) as messages:
            redis_cluster.move("slots:" + channel, second)
            with anyio.fail_after(5), pytest.raises(StoreUnavailable, match="subscribe again"):
                await messages.__anext__()
        assert store.reachable  # not an outage
        async with store.subscribe(channel) as messages:  # the slot map was out of date
            await store.publish(channel, b"here")
            with anyio.fail_after(5):
                assert await messages.__anext__() == b"here"
    finally:
        await store.aclose()
        redis_cluster.move("slots:" + channel, first)
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


async def test_the_first_node_named_that_answers_is_the_one_asked(
    redis_cluster: RedisCluster,
) -> None:
    """A URL naming several nodes: the first is down (nothing listens there), the second
    answers, and the store finds the cluster through it."""
    second = redis_cluster.nodes[1].port
    store = RedisStore(f"redis+cluster://127.0.0.1:{free_port()},127.0.0.1:{second}")
    try:
        await store.set("seeds", b"found", ttl=5)
        assert await store.get("seeds") == b"found"
    finally:
        await store.aclose()
