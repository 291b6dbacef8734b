"""InProcessBus: fan-out, overflow, delivery from other threads, and unsubscribing."""

from __future__ import annotations

import logging
import threading
from collections.abc import AsyncIterator

import anyio
import anyio.lowlevel
import pytest

from mcp_asgi.bus import ChangeEvent, InProcessBus

TOOLS = ChangeEvent("tools_list_changed")
PROMPTS = ChangeEvent("prompts_list_changed")
BURST = 2000


async def test_every_subscriber_gets_every_event_in_order() -> None:
    """Two subscriptions each receive the events in publish order; leaving unsubscribes."""
    bus = InProcessBus()
    await bus.publish(TOOLS)  # nobody listens yet: nothing to deliver, nothing raised
    async with bus.subscribe() as first, bus.subscribe() as second:
        assert bus.subscriber_count == 2
        await bus.publish(TOOLS)
        bus.publish_nowait(PROMPTS)
        got = [await first.__anext__(), await first.__anext__(), await second.__anext__()]
    assert got == [TOOLS, PROMPTS, TOOLS]
    assert bus.subscriber_count == 0


async def test_a_slow_subscriber_loses_the_overflow(caplog: pytest.LogCaptureFixture) -> None:
    """Past `buffer` unread events, new ones are dropped for that subscriber (logged)."""
    bus = InProcessBus(buffer=1)
    with caplog.at_level(logging.WARNING, logger="mcp_asgi.bus"):
        async with bus.subscribe() as events:
            await bus.publish(TOOLS)
            await bus.publish(PROMPTS)
            assert await events.__anext__() == TOOLS
    assert any("too slow" in r.getMessage() for r in caplog.records)


async def test_a_task_status_is_never_lost_to_the_overflow() -> None:
    """A task's status event is kept past `buffer` (so its terminal status arrives), once
    per task however often it is published."""
    bus = InProcessBus(buffer=1)
    task = ChangeEvent("task_status", "t1")
    async with bus.subscribe() as events:
        await bus.publish(TOOLS)
        await bus.publish(task)
        await bus.publish(task)
        await bus.publish(PROMPTS)  # the overflow (dropped)
        got = [await events.__anext__(), await events.__anext__()]
        with pytest.raises(anyio.WouldBlock):
            events.receive_nowait()  # type: ignore[attr-defined]
    assert got == [TOOLS, task]


async def test_publish_nowait_from_another_thread_is_handed_to_the_loop() -> None:
    """A registration in a worker thread reaches subscribers on the event loop."""
    bus = InProcessBus()
    done = threading.Event()

    def from_thread() -> None:
        bus.publish_nowait(TOOLS)
        done.set()

    async with bus.subscribe() as events:
        await anyio.to_thread.run_sync(from_thread)
        assert done.is_set()
        assert await events.__anext__() == TOOLS


def test_publish_nowait_before_any_loop_is_a_no_op() -> None:
    """Registrations at import time announce nothing (nobody can be listening)."""
    InProcessBus().publish_nowait(TOOLS)


def test_buffer_must_be_positive() -> None:
    """A zero buffer is a configuration error."""
    with pytest.raises(ValueError, match="buffer"):
        InProcessBus(buffer=0)


async def test_a_burst_of_one_change_is_one_pending_event() -> None:
    """A change published many times before the subscriber reads is pending once."""
    bus = InProcessBus()
    async with bus.subscribe() as events:
        for _ in range(1000):
            bus.publish_nowait(TOOLS)
            bus.publish_nowait(PROMPTS)
        assert [await events.__anext__(), await events.__anext__()] == [TOOLS, PROMPTS]
        with pytest.raises(anyio.WouldBlock):
            events.receive_nowait()  # type: ignore[attr-defined]


async def test_a_burst_read_as_it_comes_is_a_few_events_and_the_last_follows_it() -> None:
    """BURST changes, the subscriber free to read between any two: it gets a few events,
    not one per change, and one after the last change."""
    bus = InProcessBus()
    published = 0
    seen: list[int] = []  # how many changes were published when each event was read
    after_last = anyio.Event()

    async def read(events: AsyncIterator[ChangeEvent]) -> None:
        async for _ in events:
            seen.append(published)
            if published == BURST:
                after_last.set()

    async with bus.subscribe() as events, anyio.create_task_group() as tg:
        tg.start_soon(read, events)
        for _ in range(BURST):
            await bus.publish(TOOLS)
            published += 1
            await anyio.lowlevel.checkpoint()
        with anyio.fail_after(10):
            await after_last.wait()
        tg.cancel_scope.cancel()
    assert len(seen) <= BURST // 20
