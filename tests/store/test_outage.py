"""RedisStore when Redis fails (a real redis-server, paused with SIGSTOP or restarted): every
operation ends within its timeout with `StoreUnavailable`, the outage is one WARNING however
many operations fail, `check()` says so, and the store works again once Redis is back."""

from __future__ import annotations

import logging

import anyio
import pytest

from mcp_asgi.store import StoreUnavailable
from mcp_asgi.store.outage import Outage
from mcp_asgi.store.redis import RedisStore

from ..helpers import Clock
from ..servers import RedisServer

TIMEOUT = 0.3


def store_records(caplog: pytest.LogCaptureFixture, level: int, text: str) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "mcp_asgi.store" and r.levelno == level and text in r.getMessage()
    ]


async def outcomes(store: RedisStore, count: int) -> list[str]:
    """`count` operations at once (reads, writes, a blocking read, a publish): what each
    ended with. Bounded: none may still be pending after a generous delay."""
    ended: list[str] = []

    async def one(i: int) -> None:
        try:
            if i % 4 == 0:
                await store.get(f"k{i}")
            elif i % 4 == 1:
                await store.set(f"k{i}", b"v", ttl=10)
            elif i % 4 == 2:
                await store.read("stream", wait=0.2)
            else:
                await store.publish("channel", b"x")
            ended.append("ok")
        except StoreUnavailable:
            ended.append("unavailable")

    with anyio.fail_after(5 * TIMEOUT + 5):  # far more than any operation's bound
        async with anyio.create_task_group() as tg:
            for i in range(count):
                tg.start_soon(one, i)
    return ended


async def recovered(store: RedisStore) -> None:
    """Wait (10 s at most) until the store reaches Redis again."""
    for _ in range(200):
        if await store.check():
            return
        await anyio.sleep(0.05)
    raise AssertionError("the store did not reach Redis again")


async def test_a_paused_redis_fails_operations_in_time_and_once_in_the_log(
    redis_server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    """SIGSTOP: 20 operations at once each end with StoreUnavailable (none waits past its
    timeout), later ones fail at once; one WARNING; check() False; after SIGCONT: True,
    one INFO, and the store reads what was written before."""
    caplog.set_level(logging.DEBUG, logger="mcp_asgi.store")
    store = RedisStore(redis_server.url, prefix="outage:", timeout=TIMEOUT, retry_max=0.5)
    try:
        await store.set("kept", b"before", ttl=60)
        redis_server.pause()
        try:
            assert await outcomes(store, 20) == ["unavailable"] * 20
            assert await outcomes(store, 20) == ["unavailable"] * 20
            assert not await store.check()
            assert not store.reachable
        finally:
            redis_server.resume()
        await recovered(store)
        assert await store.get("kept") == b"before"
        assert set(await outcomes(store, 8)) == {"ok"}
    finally:
        await store.aclose()
    assert len(store_records(caplog, logging.WARNING, "lost Redis")) == 1
    assert len(store_records(caplog, logging.INFO, "reachable again")) == 1


async def test_a_restarted_redis_is_reached_again(
    redis_server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    """Redis killed, then started on the same port: operations and a subscription fail
    with StoreUnavailable meanwhile; then a new subscription hears a publish again."""
    caplog.set_level(logging.INFO, logger="mcp_asgi.store")
    store = RedisStore(redis_server.url, prefix="restart:", timeout=TIMEOUT, retry_max=0.5)
    try:
        async with store.subscribe("ch") as messages:
            await anyio.to_thread.run_sync(redis_server.stop)
            with pytest.raises(StoreUnavailable), anyio.fail_after(5):
                await messages.__anext__()  # the subscription's connection closed
        assert await outcomes(store, 12) == ["unavailable"] * 12
        await anyio.to_thread.run_sync(redis_server.start)
        await recovered(store)
        async with store.subscribe("ch") as messages:
            await store.publish("ch", b"again")
            with anyio.fail_after(5):
                assert await messages.__anext__() == b"again"
    finally:
        await store.aclose()
    assert len(store_records(caplog, logging.WARNING, "lost Redis")) == 1
    assert len(store_records(caplog, logging.INFO, "reachable again")) == 1


def test_retries_back_off_to_their_cap_one_probe_at_a_time(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """While Redis is down, an attempt is admitted only once the backoff has passed (from
    `initial`, doubling, jittered down to half, never past `cap`), and one at a time; the
    outage is one WARNING and its end one INFO, whatever the number of attempts."""
    caplog.set_level(logging.DEBUG, logger="mcp_asgi.store")
    clock = Clock(100.0)
    outage = Outage("redis://host:6379/0", initial=0.1, cap=0.4, clock=clock)
    assert outage.admit()
    outage.failed(OSError("refused"))
    outage.settled()
    waits: list[float] = []
    for _ in range(5):
        began = clock.now
        while not outage.admit():
            clock.now += 0.01
        waits.append(clock.now - began)
        assert not outage.admit()  # the probe is out: nobody else tries
        outage.failed(OSError("refused"))
        outage.settled()
    for wait, delay in zip(waits, [0.1, 0.2, 0.4, 0.4, 0.4], strict=True):
        assert delay / 2 - 0.011 <= wait <= delay + 0.011
    clock.now += 1
    assert outage.admit()
    outage.succeeded()
    outage.settled()
    assert not outage.down
    assert all(outage.admit() for _ in range(3))  # up: everyone tries
    assert len(store_records(caplog, logging.WARNING, "lost Redis")) == 1
    assert len(store_records(caplog, logging.INFO, "reachable again after")) == 1
