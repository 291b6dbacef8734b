"""RedisBus on a Redis Cluster of three masters: sharded pub/sub on the channel's master,
the outage of that master (paused) logged once and recovered from, and the channel's slot
moving to another master (the bus subscribes there). The cluster URL is
checked when the bus and the store are made."""

from __future__ import annotations

import logging

import pytest
import redis

from mcp_asgi.bus import ChangeEvent
from mcp_asgi.bus.redis import RedisBus, bus_from_url
from mcp_asgi.store import store_from_url

from ..helpers import eventually
from ..servers import RedisCluster


async def test_events_cross_on_the_channels_master_only(redis_cluster: RedisCluster) -> None:
    """Two processes' buses subscribe with SSUBSCRIBE on the master owning the channel's
    slot (no plain subscriber anywhere) and hear each other there."""
    channel = "cluster:crossing"
    bus = RedisBus(redis_cluster.url, channel=channel)
    other = RedisBus(redis_cluster.url, channel=channel)
    async with bus.running(), other.running(), bus.subscribe() as events:
        await eventually(lambda: redis_cluster.subscribers(channel) == 2, what="subscribed")
        for node in redis_cluster.nodes:
            with redis.Redis(port=node.port) as client:
                assert dict(client.pubsub_numsub(channel))[channel.encode()] == 0
        await other.publish(ChangeEvent("resource_updated", "res://x"))
        assert await events.__anext__() == ChangeEvent("resource_updated", "res://x")


async def test_a_paused_master_is_one_outage(
    redis_cluster: RedisCluster, caplog: pytest.LogCaptureFixture
) -> None:
    """The channel's master stops answering (SIGSTOP): the bus counts Redis lost once its
    PING goes unanswered, logs it once, keeps what is published meanwhile, and resubscribes
    and sends it once the master answers again."""
    caplog.set_level(logging.INFO, logger="mcp_asgi.bus")
    channel = "cluster:paused"
    master = redis_cluster.owner(channel)

    def quick() -> RedisBus:
        url = redis_cluster.url
        return RedisBus(url, channel=channel, timeout=0.5, ping_interval=0.2, reconnect_max=0.2)

    bus, other = quick(), quick()
    async with bus.running(), bus.subscribe() as events:
        async with other.running():
            await eventually(lambda: bus.connected and other.connected)
            master.pause()
            try:
                await eventually(lambda: not bus.connected, what="the outage seen")
                await other.publish(ChangeEvent("tools_list_changed"))  # into the outbox
            finally:
                master.resume()
        await eventually(lambda: bus.connected and redis_cluster.subscribers(channel) == 1)
        async with other.running():  # `other` comes back after `bus` resubscribed
            assert await events.__anext__() == ChangeEvent("tools_list_changed")
    mine = [r.getMessage() for r in caplog.records if getattr(r, "bus_origin", 0) == bus.origin]
    assert sum("lost Redis" in m for m in mine) == 1
    assert sum("reachable again" in m for m in mine) == 1


async def test_the_bus_follows_its_channels_slot(redis_cluster: RedisCluster) -> None:
    """The channel's slot moves (a resharding): Redis ends the subscription, and the bus
    subscribes on the new owner, where the other process's events reach it."""
    channel = "cluster:moving"
    first = redis_cluster.owner(channel)
    second = next(node for node in redis_cluster.nodes if node is not first)
    bus = RedisBus(redis_cluster.url, channel=channel, reconnect_max=0.2)
    other = RedisBus(redis_cluster.url, channel=channel, reconnect_max=0.2)
    try:
        async with bus.running(), other.running(), bus.subscribe() as events:
            await eventually(lambda: redis_cluster.subscribers(channel) == 2)
            redis_cluster.move(channel, second)
            await eventually(lambda: redis_cluster.subscribers(channel) == 2, what="moved")
            await other.publish(ChangeEvent("tools_list_changed"))
            assert await events.__anext__() == ChangeEvent("tools_list_changed")
    finally:
        redis_cluster.move(channel, first)


@pytest.mark.parametrize(
    ("url", "error"),
    [
        ("redis+cluster://127.0.0.1:7000/1", "database 0 only"),
        ("redis+cluster:///tmp/redis.sock", "names one or more of its nodes"),
        ("redis+cluster://a:7000,:7001", "names one or more of its nodes"),
        ("redis+cluster://:secret@a:7000,b:port", "host:port"),
        ("cluster://127.0.0.1:7000", r"redis\+cluster://"),
    ],
)
def test_a_cluster_url_is_checked_when_the_bus_and_store_are_made(url: str, error: str) -> None:
    """A cluster URL names nodes, and database 0 or none; the error says what is wrong,
    never the password."""
    with pytest.raises(ValueError, match=error) as refused:
        bus_from_url(url)
    assert "secret" not in str(refused.value)
    with pytest.raises(ValueError, match=error):
        store_from_url(url)
    assert bus_from_url("rediss+cluster://:secret@a.example:7000,b.example").url.endswith("ple")
