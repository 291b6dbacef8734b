"""`_loop.interrupt.Interruptible` on asyncio: a wait ended by its time or by `interrupt()`
leaves no cancellation behind, also when the awaited code swallows it; a cancellation
from outside passes through; the waits of a loop share one timer, which ends each at its
own time and holds no loop. (`within`, built on it, is tested through the body read on
both loops: tests/http/test_body.py.)"""

from __future__ import annotations

import asyncio
import gc
import math
import weakref
from typing import Any, cast

import anyio
import anyio.lowlevel
import pytest

from mcp_asgi._loop.current import native_task
from mcp_asgi._loop.interrupt import TIMED_OUT, Interruptible, Waits, within

pytestmark = [pytest.mark.anyio, pytest.mark.fast_paths]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def task() -> asyncio.Task[object]:
    current = native_task()
    assert current is not None
    return current


async def answer() -> str:
    return "done"


def cancelling() -> int:
    return int(cast(Any, task()).cancelling())  # typeshed for 3.10 lacks it


async def test_its_time_ends_the_wait() -> None:
    waits = Interruptible()
    until = asyncio.get_running_loop().time() + 0.02
    assert await waits.run(task(), until, anyio.sleep, 10) is TIMED_OUT
    assert cancelling() == 0


async def test_interrupt_ends_the_wait_and_a_finished_wait_is_left_alone() -> None:
    waits = Interruptible()
    asyncio.get_running_loop().call_later(0.02, waits.interrupt)
    assert await waits.run(task(), math.inf, anyio.sleep, 10) is TIMED_OUT
    assert await waits.run(task(), math.inf, answer) == "done"
    waits.interrupt()  # no wait now: nothing happens
    await anyio.sleep(0.01)
    assert cancelling() == 0


async def test_a_swallowed_interrupt_is_taken_back_all_the_same() -> None:
    async def stubborn() -> str:
        try:
            await anyio.sleep(10)
        except asyncio.CancelledError:
            return "swallowed"
        return "slept"

    waits = Interruptible()
    asyncio.get_running_loop().call_later(0.02, waits.interrupt)
    assert await waits.run(task(), math.inf, stubborn) == "swallowed"
    assert cancelling() == 0
    await anyio.sleep(0.01)  # and nothing is pending


async def test_a_cancellation_from_outside_passes_through_also_with_an_interrupt() -> None:
    waits = Interruptible()
    current = task()

    def both() -> None:
        current.cancel()
        waits.interrupt()

    asyncio.get_running_loop().call_later(0.02, both)
    with pytest.raises(asyncio.CancelledError):
        await waits.run(current, math.inf, anyio.sleep, 10)
    assert cast(Any, current).uncancel() == 0  # exactly the outside one was left


async def test_stopping_waits_whose_task_is_about_to_resume_lets_the_wait_end() -> None:
    """`Waits.interrupt()` when what the task awaits is already done (a server that wakes
    a pending `receive()` as the reply ends): the wait ends with what it waited for, no
    cancellation is thrown or left behind, and later waits end at once."""
    waits = Waits()
    loop = asyncio.get_running_loop()
    came: asyncio.Future[str] = loop.create_future()

    def reply_then_stop() -> None:
        came.set_result("disconnect")
        waits.interrupt()

    loop.call_soon(reply_then_stop)
    assert await waits.run(math.inf, lambda: came) == "disconnect"
    assert cancelling() == 0
    await anyio.sleep(0.01)  # and nothing is pending
    assert cancelling() == 0
    assert await waits.run(math.inf, answer) is TIMED_OUT


async def test_a_task_about_to_resume_that_waits_again_is_stopped_on_a_later_turn() -> None:
    """If the task, resumed, waits again inside the same wait, that wait is ended then."""
    waits = Waits()
    loop = asyncio.get_running_loop()
    woken: asyncio.Future[None] = loop.create_future()

    async def again() -> str:
        await woken
        await anyio.sleep(10)
        return "slept"

    def wake_then_stop() -> None:
        woken.set_result(None)
        waits.interrupt()

    loop.call_soon(wake_then_stop)
    with anyio.fail_after(5):
        assert await waits.run(math.inf, again) is TIMED_OUT
    assert cancelling() == 0


async def test_within_without_a_limit_just_awaits() -> None:
    assert await within(math.inf, answer) == "done"
    assert await within(0.01, anyio.sleep, 10) is TIMED_OUT
    assert cancelling() == 0


async def test_the_waits_of_a_loop_each_end_at_their_own_time() -> None:
    """One timer serves every wait of the loop: a wait added with an earlier limit than the
    timer's is ended first; none is ended before its limit; one that answers is left."""
    loop = asyncio.get_running_loop()
    ended: list[tuple[str, bool]] = []

    async def wait(name: str, seconds: float, fn: Any, *args: object) -> None:
        until = loop.time() + seconds
        outcome = await within(seconds, fn, *args)
        ended.append((name, outcome is TIMED_OUT and loop.time() >= until))

    async with anyio.create_task_group() as tg:
        tg.start_soon(wait, "late", 0.06, anyio.sleep, 10)
        await anyio.lowlevel.checkpoint()  # "late" sets the timer first
        tg.start_soon(wait, "early", 0.02, anyio.sleep, 10)
        tg.start_soon(wait, "answers", 0.01, answer)
    assert ended == [("answers", False), ("early", True), ("late", True)]
    assert cancelling() == 0


def test_the_shared_timer_holds_no_loop() -> None:
    """A loop closed with a wait's timer still pending is freed (the timer is weakly
    held)."""

    async def main() -> None:
        await within(10, answer)
        await within(0.01, anyio.sleep, 10)
        await within(30, answer)  # its limit's timer is still pending at the loop's close

    loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete(main())
    finally:
        loop.close()
    freed = weakref.ref(loop)
    del loop
    gc.collect()
    assert freed() is None
