"""`within_after_first_step`: `await coro` with a time limit that only a coroutine that
waits gets: its value, its exception (from the first step or later), `TIMED_OUT` once the
limit has passed since it first waited, and a cancellation from outside passed through. On
asyncio, trio and the plain-anyio path."""

from __future__ import annotations

import anyio
import anyio.lowlevel
import pytest

from mcp_asgi._loop import TIMED_OUT, within_after_first_step

pytestmark = pytest.mark.both_loops


async def at_once() -> str:
    return "at once"


async def after_waits(turns: int) -> str:
    for _ in range(turns):
        await anyio.lowlevel.checkpoint()
    return f"after {turns} waits"


async def fails(turns: int) -> str:
    for _ in range(turns):
        await anyio.lowlevel.checkpoint()
    raise ValueError(f"failed after {turns} waits")


async def blocked(notes: list[str]) -> str:
    """Waits until cancelled, noting that it stopped."""
    try:
        await anyio.sleep_forever()
    finally:
        notes.append("stopped")
    return "never"


async def test_a_coroutine_that_never_waits_gives_its_value() -> None:
    assert await within_after_first_step(10, at_once()) == "at once"


async def test_a_coroutine_that_waits_gives_its_value() -> None:
    assert await within_after_first_step(10, after_waits(3)) == "after 3 waits"


@pytest.mark.parametrize("turns", [0, 2])
async def test_its_exception_is_raised(turns: int) -> None:
    with pytest.raises(ValueError, match=f"after {turns} waits"):
        await within_after_first_step(10, fails(turns))


async def test_a_coroutine_that_waits_too_long_is_given_up() -> None:
    notes: list[str] = []
    assert await within_after_first_step(0.02, blocked(notes)) is TIMED_OUT
    assert notes == ["stopped"]
    await anyio.lowlevel.checkpoint()  # and no cancellation is left pending


async def test_a_cancellation_from_outside_passes_through() -> None:
    notes: list[str] = []

    async def waiter() -> None:
        await within_after_first_step(10, blocked(notes))
        notes.append("returned")

    async with anyio.create_task_group() as tg:
        tg.start_soon(waiter)
        await anyio.wait_all_tasks_blocked()
        tg.cancel_scope.cancel()
    assert notes == ["stopped"]


async def test_a_coroutine_that_waits_in_a_cancel_scope_of_its_own_is_given_up() -> None:
    """Its first step enters the scope (on trio and the plain path the limit's scope must
    be entered before it, to nest)."""

    async def in_a_scope() -> str:
        with anyio.move_on_after(100):
            await anyio.sleep_forever()
        return "its own scope ended"

    assert await within_after_first_step(0.02, in_a_scope()) is TIMED_OUT
