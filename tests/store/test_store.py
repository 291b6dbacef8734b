"""The StateStore primitives behave the same in memory and in Redis."""

from __future__ import annotations

import anyio
import pytest

from mcp_asgi.store import MemoryStore, StateStore, store_from_url
from mcp_asgi.store.base import START

pytestmark = pytest.mark.anyio


async def test_keys_expire_and_compare_and_set(store: StateStore) -> None:
    """set/get/delete, expiry, and compare-and-set both ways (absent, a given value)."""
    assert await store.get("k") is None
    await store.set("k", b"1")
    assert await store.get("k") == b"1"
    assert not await store.set_if("k", b"2", expected=None)  # exists: not created
    assert not await store.set_if("k", b"2", expected=b"0")  # changed meanwhile
    assert await store.set_if("k", b"2", expected=b"1")
    assert await store.get("k") == b"2"
    assert await store.set_if("new", b"x", expected=None, ttl=0.05)
    await store.delete("k")
    assert await store.get("k") is None
    await anyio.sleep(0.1)
    assert await store.get("new") is None


async def test_a_stream_is_read_in_order_exactly_once(store: StateStore) -> None:
    """Positions increase; a reader passing its last position sees every entry once."""
    first = await store.append("s", b"a", max_len=100, ttl=60)
    await store.append("s", b"b", max_len=100, ttl=60)
    entries = await store.read("s", START)
    assert [e.data for e in entries] == [b"a", b"b"]
    assert entries[0].position == first
    assert [e.data for e in await store.read("s", first)] == [b"b"]
    assert await store.read("s", entries[-1].position) == []
    assert await store.read("s", "not-a-position") == []
    assert await store.read("missing") == []


async def test_a_blocking_read_wakes_on_append(store: StateStore) -> None:
    """`read(wait=...)` returns as soon as an entry is appended."""
    last = await store.append("w", b"0", max_len=10)
    got: list[bytes] = []

    async def reader() -> None:
        got.extend(e.data for e in await store.read("w", last, wait=10))

    async with anyio.create_task_group() as tg:
        tg.start_soon(reader)
        await anyio.sleep(0.05)
        await store.append("w", b"1", max_len=10)
    assert got == [b"1"]


async def test_channels_reach_current_subscribers(store: StateStore) -> None:
    """A message reaches a subscriber that was subscribed before it was published."""
    await store.publish("c", b"nobody hears this")
    async with store.subscribe("c") as messages:
        await store.publish("c", b"hello")
        with anyio.fail_after(5):
            async for data in messages:
                assert data == b"hello"
                break


async def test_a_stream_keeps_its_last_entries() -> None:
    """`max_len` bounds a stream (exactly in memory; Redis trims approximately)."""
    store = MemoryStore()
    for i in range(5):
        await store.append("s", str(i).encode(), max_len=3)
    assert [e.data for e in await store.read("s")] == [b"2", b"3", b"4"]


def test_store_from_url() -> None:
    """None is memory; anything but a Redis URL is a ValueError."""
    assert isinstance(store_from_url(None), MemoryStore)
    with pytest.raises(ValueError, match="redis://"):
        store_from_url("http://example.com")
