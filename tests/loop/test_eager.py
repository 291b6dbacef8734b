"""`_loop.eager.at_once`: an awaitable's first step taken at once. What ends there gives
its value (or raises) at once; what waits is a `Begun` that goes on with the same
awaitable when awaited, passing on what the task sends and throws in (a cancellation
reaches the awaited code, and its clean-up runs). Used on asyncio only (a first step that
enters a cancel scope would leave it outside scopes entered later: trio refuses that)."""

from __future__ import annotations

import asyncio
from collections.abc import Generator
from typing import Any

import anyio
import pytest

from mcp_asgi._loop import Begun, at_once

pytestmark = [pytest.mark.anyio]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def at_once_value() -> str:
    return "now"


async def fails() -> str:
    raise KeyError("at once")


async def waits(log: list[str]) -> str:
    log.append("first step")
    try:
        await asyncio.sleep(0.01)
        log.append("woke")
        await asyncio.sleep(0.01)
        return "later"
    finally:
        log.append("cleaned up")


class NotACoroutine:
    """An awaitable that is not a coroutine: a plain `__await__` generator."""

    def __await__(self) -> Generator[Any, Any, str]:
        return at_once_value().__await__()


async def test_what_ends_in_its_first_step_gives_its_value() -> None:
    assert at_once(at_once_value()) == "now"
    assert at_once(NotACoroutine()) == "now"


async def test_what_fails_in_its_first_step_raises_at_once() -> None:
    with pytest.raises(KeyError):
        at_once(fails())


async def test_what_waits_goes_on_when_awaited() -> None:
    log: list[str] = []
    begun = at_once(waits(log))
    assert isinstance(begun, Begun)
    assert log == ["first step"]  # taken now, in this task
    assert await begun == "later"
    assert log == ["first step", "woke", "cleaned up"]


async def test_a_cancellation_while_it_waits_reaches_it() -> None:
    log: list[str] = []
    begun = at_once(waits(log))
    assert isinstance(begun, Begun)
    with anyio.move_on_after(0.005) as scope:
        await begun
    assert scope.cancelled_caught
    assert log == ["first step", "cleaned up"]


async def test_closing_what_awaits_it_closes_it_with_its_clean_up() -> None:
    log: list[str] = []
    begun = at_once(waits(log))
    assert isinstance(begun, Begun)

    async def awaiting() -> str:
        return await begun

    outer = awaiting()
    outer.send(None)  # it waits, in the begun sleep
    outer.close()  # as when a coroutine is dropped unfinished
    assert log == ["first step", "cleaned up"]
