"""`_loop.eager.at_once`: an awaitable's first step taken at once. What ends there gives
its value (or raises) at once; what waits is a `Begun` that goes on with the same
awaitable when awaited, passing on what the task sends and throws in (a cancellation
reaches the awaited code, and its clean-up runs). Used on asyncio only (a first step that
enters a cancel scope would leave it outside scopes entered later: trio refuses that)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Generator
from typing import Any, cast

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


class BareAwaitable:
    """An awaitable whose `__await__` is a bare iterator (`__next__` only, no `send`,
    `throw` or `close`), as Granian's `receive()` gives: it waits on `future` once."""

    def __init__(self, future: asyncio.Future[str]) -> None:
        self._future = future
        self._yielded = False

    def __await__(self) -> BareAwaitable:
        return self

    def __iter__(self) -> BareAwaitable:
        return self

    def __next__(self) -> asyncio.Future[str]:
        if not self._future.done() and not self._yielded:
            self._yielded = True
            self._future._asyncio_future_blocking = True  # as a future's own __await__ does
            return self._future
        raise StopIteration(self._future.result())


def bare(future: asyncio.Future[str]) -> Awaitable[str]:
    return cast(Awaitable[str], BareAwaitable(future))


async def test_a_bare_iterator_ends_at_once_or_goes_on() -> None:
    done: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    done.set_result("ready")
    assert at_once(bare(done)) == "ready"

    later: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    begun = at_once(bare(later))
    assert isinstance(begun, Begun)
    asyncio.get_running_loop().call_later(0.005, later.set_result, "later")
    assert await begun == "later"


async def test_a_cancellation_passes_a_bare_iterator_by() -> None:
    never: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    begun = at_once(bare(never))
    assert isinstance(begun, Begun)
    with anyio.move_on_after(0.005) as scope:
        await begun
    assert scope.cancelled_caught
