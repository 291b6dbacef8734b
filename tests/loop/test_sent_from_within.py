"""`sent_from_within(scope, cancelled)`: whether a cancellation thrown into the running
asyncio task was anyio's delivery for `scope` or a scope entered inside it; a request's
scope tells a cancellation from outside (the server's) from its handler's own this way."""

from __future__ import annotations

import asyncio

import anyio
import pytest

from mcp_asgi._loop import Begun, at_once, new_cancel_scope, sent_from_within

pytestmark = [pytest.mark.anyio, pytest.mark.fast_paths]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class Heard:
    """A `Begun` listener: what it heard, and whether it came from within `scope`."""

    def __init__(self, scope: anyio.CancelScope) -> None:
        self.scope = scope
        self.heard: list[bool] = []

    def thrown(self, exc: BaseException) -> None:
        self.heard.append(sent_from_within(self.scope, exc))


async def sleeps() -> None:
    await asyncio.sleep(30)


async def test_the_scopes_own_cancellation_and_an_inner_ones_are_from_within() -> None:
    outer = new_cancel_scope()
    with outer:
        heard = Heard(outer)
        with anyio.CancelScope() as inner:  # a scope the awaited code entered
            begun = at_once(sleeps())
            assert isinstance(begun, Begun)
            asyncio.get_running_loop().call_soon(inner.cancel)
            await begun.tell(heard)
        outer.cancel()
        begun = at_once(sleeps())
        assert isinstance(begun, Begun)
        await begun.tell(heard)
    assert heard.heard == [True, True]


async def test_a_native_cancel_and_an_outer_scopes_are_not() -> None:
    heard_native: list[bool] = []

    async def waits_in_scope(heard: list[bool], started: anyio.Event) -> None:
        scope = new_cancel_scope()
        with scope:
            listener = Heard(scope)
            listener.heard = heard
            begun = at_once(sleeps())
            assert isinstance(begun, Begun)
            started.set()
            await begun.tell(listener)

    started = anyio.Event()
    task = asyncio.get_running_loop().create_task(waits_in_scope(heard_native, started))
    await started.wait()
    task.cancel()  # what an ASGI server does at its graceful-shutdown timeout
    with pytest.raises(asyncio.CancelledError):
        await task
    assert heard_native == [False]

    heard_outer: list[bool] = []
    started = anyio.Event()
    async with anyio.create_task_group() as tg:  # a scope outside the request's
        tg.start_soon(waits_in_scope, heard_outer, started)
        await started.wait()
        tg.cancel_scope.cancel()
    assert heard_outer == [False]


async def test_what_is_not_a_cancellation_is_passed_on_as_it_is() -> None:
    scope = new_cancel_scope()
    heard = Heard(scope)
    with scope:
        begun = at_once(sleeps())
        assert isinstance(begun, Begun)
        begun.tell(heard)
        awaiting = begun.__await__()
        awaiting.send(None)
        with pytest.raises(KeyError):
            awaiting.throw(KeyError("thrown"))
    assert heard.heard == [False]
