"""RedisBus against a real redis-server: across worker processes, and through a restart."""

from __future__ import annotations

import logging
from typing import Any

import anyio
import pytest

from mcp_asgi.bus import ChangeEvent
from mcp_asgi.bus.redis import RedisBus, bus_from_url
from mcp_asgi.legacy.notify import unread
from mcp_asgi.testing import McpStream, McpTestClient

from ..helpers import Otel, eventually, next_message, trigger
from ..servers import RedisServer, Worker, wait_ready

LISTEN = {"notifications": {"toolsListChanged": True, "promptsListChanged": True}}


async def until_method(stream: McpStream, method: str) -> dict[str, Any]:
    """Read notifications until one with `method` arrives."""
    while True:
        message = await next_message(stream)
        if message.get("method") == method:
            return message


@pytest.mark.parametrize("workers", ["redis", "cluster"], indirect=True)
async def test_a_change_on_one_worker_reaches_a_listener_on_another(
    workers: tuple[Worker, Worker, str],
) -> None:
    """notify_tools_changed() and a runtime registration on A reach a listen stream on B."""
    a, b, _ = workers
    client = McpTestClient(b.url + "/mcp")
    async with client.stream("subscriptions/listen", LISTEN, id="cross") as stream:
        await next_message(stream)
        await trigger(a.url, "POST", "/notify/tools")
        first = await next_message(stream)
        await trigger(a.url, "PUT", "/tools/added")
        second = await next_message(stream)
    for message in (first, second):
        assert message["method"] == "notifications/tools/list_changed"
        assert message["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == "cross"


async def test_listeners_survive_a_redis_restart(
    redis_server: RedisServer, workers: tuple[Worker, Worker, str]
) -> None:
    """Redis goes away and comes back: the stream stays open and later events arrive."""
    a, b, channel = workers
    client = McpTestClient(b.url + "/mcp")
    async with client.stream("subscriptions/listen", LISTEN) as stream:
        await next_message(stream)
        await anyio.to_thread.run_sync(redis_server.stop)
        await trigger(a.url, "POST", "/notify/prompts")  # answered during the outage
        await anyio.to_thread.run_sync(redis_server.start)
        await anyio.to_thread.run_sync(
            lambda: wait_ready(lambda: redis_server.subscribers(channel) == 2, "resubscribed")
        )
        await trigger(a.url, "POST", "/notify/tools")
        message = await until_method(stream, "notifications/tools/list_changed")
    assert message["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"]


async def test_outage_is_logged_counted_and_recovered(
    redis_server: RedisServer, otel: Otel, caplog: pytest.LogCaptureFixture
) -> None:
    """The outage is one WARNING and one count; local delivery and publishing never block;
    what was published meanwhile is sent on reconnection."""
    caplog.set_level(logging.INFO, logger="mcp_asgi.bus")
    channel = f"outage:{redis_server.port}"
    bus = RedisBus(
        redis_server.url, channel=channel, reconnect_max=0.2, meter_provider=otel.meter_provider
    )
    other = RedisBus(redis_server.url, channel=channel, reconnect_max=0.2)
    async with bus.running(), bus.subscribe() as events:
        async with other.running():
            await eventually(lambda: bus.connected and other.connected)
            await anyio.to_thread.run_sync(redis_server.stop)
            await eventually(lambda: not bus.connected)
            await bus.publish(ChangeEvent("prompts_list_changed"))  # local delivery still works
            assert await events.__anext__() == ChangeEvent("prompts_list_changed")
            await other.publish(ChangeEvent("resource_updated", "res://x"))  # into the outbox
        await anyio.to_thread.run_sync(redis_server.start)
        await eventually(lambda: bus.connected and redis_server.subscribers(channel) == 1)
        async with other.running():  # `other` comes back after `bus` resubscribed
            received = await events.__anext__()
    assert received == ChangeEvent("resource_updated", "res://x")
    outages = otel.points("mcp_asgi.bus.outages")
    assert sum(p.value for p in outages) == 1  # type: ignore[attr-defined]
    mine = [r for r in caplog.records if getattr(r, "bus_origin", None) == bus.origin]
    messages = [r.getMessage() for r in mine]
    assert sum("lost Redis" in m for m in messages) == 1
    assert "ConnectionError" in messages[0]
    assert any("reachable again" in m for m in messages)


async def test_own_events_are_not_delivered_twice(redis_server: RedisServer) -> None:
    """A process delivers its own event locally once, not again when Redis echoes it."""
    bus = RedisBus(redis_server.url, channel=f"echo:{redis_server.port}")
    other = RedisBus(redis_server.url, channel=f"echo:{redis_server.port}")
    async with bus.running(), other.running(), bus.subscribe() as events:
        await eventually(lambda: bus.connected and other.connected)
        await bus.publish(ChangeEvent("tools_list_changed"))
        await other.publish(ChangeEvent("prompts_list_changed"))
        first = await events.__anext__()
        second = await events.__anext__()
    assert [first.kind, second.kind] == ["tools_list_changed", "prompts_list_changed"]


async def test_settling_brings_every_earlier_event_with_its_id(redis_server: RedisServer) -> None:
    """`settle()` on the publisher (its event is out), then on another process (what was out
    is in): the event is there at once, with the id its publisher gave it; the markers
    themselves are no events."""
    channel = f"settle:{redis_server.port}"
    bus, other = (
        RedisBus(redis_server.url, channel=channel),
        RedisBus(redis_server.url, channel=channel),
    )
    async with (
        bus.running(),
        other.running(),
        bus.subscribe() as mine,
        other.subscribe() as theirs,
    ):
        await eventually(lambda: redis_server.subscribers(channel) == 2, what="both subscribed")
        await other.publish(ChangeEvent("tools_list_changed"))
        with anyio.fail_after(10):
            await other.settle()
            await bus.settle()
        published = unread(theirs)
        arrived = unread(mine)
    assert published == arrived == [ChangeEvent("tools_list_changed")]
    assert arrived[0].id is not None
    assert arrived[0].id == published[0].id
    assert arrived[0].id.startswith(other.origin)


async def test_without_a_lifespan_the_bus_starts_on_first_use(redis_server: RedisServer) -> None:
    """A RedisBus whose running() was never entered starts its listener lazily."""
    channel = f"lazy:{redis_server.port}"
    bus = RedisBus(redis_server.url, channel=channel)
    other = RedisBus(redis_server.url, channel=channel)
    try:
        async with bus.subscribe() as events, other.running():
            await eventually(lambda: bus.connected and redis_server.subscribers(channel) == 2)
            await other.publish(ChangeEvent("tools_list_changed"))
            assert await events.__anext__() == ChangeEvent("tools_list_changed")
    finally:
        await bus.aclose()


def test_bus_url_must_be_redis() -> None:
    """McpSettings.bus_url accepts redis://, rediss:// and unix:// URLs only."""
    assert bus_from_url("redis://127.0.0.1:1/0").channel == "mcp_asgi:changes"
    with pytest.raises(ValueError, match="redis://"):
        bus_from_url("http://example.com")
