"""ThreadSlots (lifecycle/work.py): how many worker threads an endpoint's sync handlers may
run at once. A free slot is taken at once; otherwise calls wait in line, first come first
served; a wait can be cancelled, and a slot handed to a wait cancelled at that moment is
passed on, never lost."""

from __future__ import annotations

import anyio
import anyio.lowlevel
import pytest

from mcp_asgi.lifecycle.work import ThreadSlots

from ..helpers import eventually

pytestmark = [pytest.mark.anyio, pytest.mark.both_loops]


async def _in_line(slots: ThreadSlots, count: int) -> None:
    await eventually(lambda: slots.waiting == count, what=f"{count} calls in line")


async def test_free_slots_are_taken_at_once_and_the_rest_wait_in_turn() -> None:
    """Two slots: two calls take one each at once; the next three wait and get the slots
    given back in the order they came; once nobody waits, a slot given back is free."""
    slots = ThreadSlots(2)
    assert slots.take()
    assert slots.take()
    assert not slots.take()
    served: list[int] = []

    async def waits(n: int) -> None:
        await slots.wait_in_line()
        served.append(n)

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            for n in range(3):
                tg.start_soon(waits, n)
                await _in_line(slots, n + 1)
            for _ in range(3):
                slots.release()
                assert not slots.take()  # the slot went to the line, not to a newcomer
                await anyio.lowlevel.checkpoint()
    assert served == [0, 1, 2]
    assert (slots.in_use, slots.waiting) == (2, 0)
    slots.release()
    slots.release()
    assert (slots.in_use, slots.waiting) == (0, 0)
    assert slots.take()


async def test_a_cancelled_wait_leaves_the_line() -> None:
    """A call whose wait is cancelled is out of the line: the slot given back is free."""
    slots = ThreadSlots(1)
    assert slots.take()
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(slots.wait_in_line)
            await _in_line(slots, 1)
            tg.cancel_scope.cancel()
    assert (slots.in_use, slots.waiting) == (1, 0)
    slots.release()
    assert slots.in_use == 0


async def test_a_slot_handed_to_a_cancelled_wait_goes_to_the_next_in_line() -> None:
    """The first in line is cancelled and, before it runs again, a slot is given back to
    it: it passes the slot on to the next call in line."""
    slots = ThreadSlots(1)
    assert slots.take()
    served: list[str] = []
    first_scope = anyio.CancelScope()

    async def waits(name: str) -> None:
        await slots.wait_in_line()
        served.append(name)

    async def first() -> None:
        with first_scope:
            await waits("first")

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(first)
            await _in_line(slots, 1)
            tg.start_soon(waits, "second")
            await _in_line(slots, 2)
            first_scope.cancel()
            slots.release()  # handed to the first, whose cancellation has not run yet
    assert first_scope.cancelled_caught
    assert served == ["second"]
    assert (slots.in_use, slots.waiting) == (1, 0)
