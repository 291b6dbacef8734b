"""`cheap_scope()`: anyio's asyncio cancel scope, entered and left by steps of its own in
the common case. Each test does the same with anyio's own scope and compares what anyio
sees (the task's current scope, parents and children, what was caught), so a change in
anyio that these steps miss fails here."""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import sys
import threading
from collections.abc import Callable

import anyio
import anyio.lowlevel
import pytest
from anyio._backends._asyncio import _task_states

from mcp_asgi._loop import cancelling, cheap_scope
from mcp_asgi._loop.cheap_scope import CheapScope

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.fast_paths,
    pytest.mark.skipif(sys.version_info < (3, 11), reason="the cheap steps are for 3.11+"),
]

_GROUP: type[BaseException] = getattr(builtins, "BaseExceptionGroup", BaseException)
MAKERS: dict[str, Callable[[], anyio.CancelScope]] = {
    "anyio": anyio.CancelScope,
    "cheap": cheap_scope,
}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def current_scope() -> anyio.CancelScope | None:
    task = asyncio.current_task()
    state = _task_states.get(task) if task is not None else None
    return None if state is None else state.cancel_scope


def links(scope: anyio.CancelScope) -> tuple[object, ...]:
    """What anyio keeps of a scope: its parent, children, tasks, host, activity."""
    return (
        scope._parent_scope,  # type: ignore[attr-defined,unused-ignore]
        frozenset(scope._child_scopes),  # type: ignore[attr-defined,unused-ignore]
        frozenset(scope._tasks),  # type: ignore[attr-defined,unused-ignore]
        scope._host_task,  # type: ignore[attr-defined,unused-ignore]
        scope._active,  # type: ignore[attr-defined,unused-ignore]
    )


async def test_on_asyncio_it_is_anyios_scope_with_the_cheap_steps() -> None:
    scope = cheap_scope()
    assert isinstance(scope, CheapScope)
    assert isinstance(scope, type(anyio.CancelScope()))
    assert scope.deadline == float("inf")
    assert not scope.shield
    assert not scope.cancel_called


@pytest.mark.parametrize("make", MAKERS.values(), ids=MAKERS.keys())
async def test_entered_and_left_in_a_task_with_no_scope(
    make: Callable[[], anyio.CancelScope],
) -> None:
    """A fresh task (as a server's request task): its anyio state is made on entering, the
    scope is current inside and the task's only one, and leaving restores no scope."""

    async def run() -> tuple[object, ...]:
        assert current_scope() is None
        scope = make()
        with scope:
            assert current_scope() is scope
            inside = links(scope)
        assert current_scope() is None
        return inside + links(scope)

    task = asyncio.get_running_loop().create_task(run())
    parent, children, tasks, host, active, *after = await task
    assert (parent, children, tasks, host, active) == (None, frozenset(), {task}, task, True)
    assert after == [None, frozenset(), frozenset(), None, False]


@pytest.mark.parametrize("make", MAKERS.values(), ids=MAKERS.keys())
async def test_nested_in_another_scope_links_and_unlinks_as_anyios(
    make: Callable[[], anyio.CancelScope],
) -> None:
    with anyio.CancelScope() as outer:  # noqa: ASYNC100 - only entered and left
        scope = make()
        with scope:
            assert current_scope() is scope
            assert scope._parent_scope is outer  # type: ignore[attr-defined,unused-ignore]
            assert outer._child_scopes == {scope}
            assert asyncio.current_task() not in outer._tasks  # type: ignore[attr-defined,unused-ignore]
        assert current_scope() is outer
        assert outer._child_scopes == set()  # type: ignore[attr-defined,unused-ignore]
        assert asyncio.current_task() in outer._tasks  # type: ignore[attr-defined,unused-ignore]


@pytest.mark.parametrize("make", MAKERS.values(), ids=MAKERS.keys())
async def test_cancelled_while_in_its_cancellation_is_caught(
    make: Callable[[], anyio.CancelScope],
) -> None:
    scope = make()
    with scope:
        scope.cancel()
        await anyio.sleep(30)
    assert scope.cancelled_caught
    assert current_scope() is None or current_scope() is not scope


@pytest.mark.parametrize("make", MAKERS.values(), ids=MAKERS.keys())
async def test_cancelled_before_it_is_entered(make: Callable[[], anyio.CancelScope]) -> None:
    scope = make()
    scope.cancel()
    with scope:
        await anyio.sleep(30)
    assert scope.cancelled_caught


@pytest.mark.parametrize("make", MAKERS.values(), ids=MAKERS.keys())
async def test_a_shield_inside_holds_its_cancellation_back(
    make: Callable[[], anyio.CancelScope],
) -> None:
    scope = make()
    finished = False
    with scope:
        with anyio.CancelScope(shield=True):
            scope.cancel()
            await anyio.sleep(0.01)
            finished = True
        await anyio.sleep(30)
    assert finished
    assert scope.cancelled_caught


@pytest.mark.parametrize("make", MAKERS.values(), ids=MAKERS.keys())
async def test_a_parent_cancelled_while_it_is_in_reaches_the_task_after_it(
    make: Callable[[], anyio.CancelScope],
) -> None:
    """The parent's cancellation, held back by a shield under the scope, is delivered once
    the scope is left (anyio restarts it in the parent)."""
    reached = False
    with anyio.CancelScope() as outer:
        with make():
            with anyio.CancelScope(shield=True):
                outer.cancel()
                await anyio.sleep(0.01)
        reached = True
        await anyio.sleep(30)
    assert reached
    assert outer.cancelled_caught


@pytest.mark.parametrize("make", MAKERS.values(), ids=MAKERS.keys())
async def test_a_task_group_inside_is_cancelled_with_it(
    make: Callable[[], anyio.CancelScope],
) -> None:
    stopped: list[bool] = []

    async def child() -> None:
        try:
            await anyio.sleep(30)
        finally:
            stopped.append(True)

    scope = make()
    with scope:
        async with anyio.create_task_group() as group:
            group.start_soon(child)
            await anyio.sleep(0.01)
            scope.cancel()
    assert stopped == [True]
    assert scope.cancelled_caught


@pytest.mark.parametrize("make", MAKERS.values(), ids=MAKERS.keys())
async def test_left_out_of_order_is_anyios_error(make: Callable[[], anyio.CancelScope]) -> None:
    scope = make()
    inner = anyio.CancelScope()
    scope.__enter__()
    inner.__enter__()
    with pytest.raises(RuntimeError, match="current cancel scope"):
        scope.__exit__(None, None, None)
    inner.__exit__(None, None, None)
    scope.__exit__(None, None, None)
    assert current_scope() is None or current_scope() is not scope


@pytest.mark.parametrize("make", MAKERS.values(), ids=MAKERS.keys())
async def test_a_native_cancellation_passes_through(make: Callable[[], anyio.CancelScope]) -> None:
    """`task.cancel()` from outside is not the scope's: it is not swallowed."""

    async def run() -> None:
        with make():
            await anyio.sleep(30)

    task = asyncio.get_running_loop().create_task(run())
    await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


@pytest.mark.parametrize("make", MAKERS.values(), ids=MAKERS.keys())
async def test_entered_while_in_is_anyios_error(make: Callable[[], anyio.CancelScope]) -> None:
    scope = make()
    with scope, pytest.raises(RuntimeError, match="single 'with' block"):
        scope.__enter__()


@pytest.mark.parametrize("make", MAKERS.values(), ids=MAKERS.keys())
async def test_a_deadline_set_before_it_is_entered_is_kept(
    make: Callable[[], anyio.CancelScope],
) -> None:
    scope = make()
    scope.deadline = anyio.current_time() + 0.01
    with scope:
        await anyio.sleep(30)
    assert scope.cancelled_caught


# -- cancelled from outside its task (the client leaving), and left with it -------------


async def _cancelled_from(where: str, scope: anyio.CancelScope) -> None:
    """Cancel `scope` from a loop callback (the client leaving), or from another task."""
    if where == "callback":
        asyncio.get_running_loop().call_soon(scope.cancel)
    else:
        await asyncio.sleep(0)
        scope.cancel()


@pytest.mark.parametrize("where", ["callback", "task"])
@pytest.mark.parametrize("make", MAKERS.values(), ids=MAKERS.keys())
async def test_cancelled_from_outside_while_it_waits(
    make: Callable[[], anyio.CancelScope], where: str
) -> None:
    """The scope's task is cancelled with anyio's message for the scope, the cancellation
    is caught on leaving, and the task has nothing left to take back."""
    seen: list[str] = []

    async def run() -> tuple[bool, int]:
        scope = make()
        with scope:
            asyncio.get_running_loop().create_task(_cancelled_from(where, scope))
            try:
                await asyncio.sleep(30)
            except asyncio.CancelledError as cancelled:
                seen.append(str(cancelled.args[0]))
                raise
        task = asyncio.current_task()
        assert task is not None
        return scope.cancelled_caught, cancelling(task)

    assert await asyncio.get_running_loop().create_task(run()) == (True, 0)
    assert len(seen) == 1
    assert seen[0].startswith("Cancelled via cancel scope ")


@pytest.mark.parametrize("make", MAKERS.values(), ids=MAKERS.keys())
async def test_a_swallowed_cancellation_comes_again_at_the_next_wait(
    make: Callable[[], anyio.CancelScope],
) -> None:
    """anyio's level cancellation: a task that swallows its scope's cancellation and waits
    again is cancelled again (its retry), and again, until it leaves the scope."""
    swallowed = 0

    async def run() -> bool:
        nonlocal swallowed
        scope = make()
        with scope:
            asyncio.get_running_loop().call_soon(scope.cancel)
            for _ in range(3):
                try:
                    await asyncio.sleep(30)
                except asyncio.CancelledError:
                    swallowed += 1
            await asyncio.sleep(30)
        return scope.cancelled_caught

    assert await asyncio.wait_for(asyncio.get_running_loop().create_task(run()), 5)
    assert swallowed == 3


@pytest.mark.parametrize("make", MAKERS.values(), ids=MAKERS.keys())
async def test_a_native_cancel_in_the_same_turn_is_not_swallowed(
    make: Callable[[], anyio.CancelScope],
) -> None:
    """The task's own `cancel()` (a server's) landing with the scope's: asyncio folds the
    two into one `CancelledError` with the scope's message, which the scope must let
    through (anyio #1214)."""

    async def run() -> None:
        with make():
            await asyncio.sleep(30)

    task = asyncio.get_running_loop().create_task(run())
    await asyncio.sleep(0)
    scope = _task_states[task].cancel_scope
    assert scope is not None

    def both() -> None:
        scope.cancel()
        task.cancel()

    asyncio.get_running_loop().call_soon(both)
    with pytest.raises(asyncio.CancelledError):
        await task


@pytest.mark.parametrize("make", MAKERS.values(), ids=MAKERS.keys())
async def test_left_with_an_exception_group_of_its_cancellation(
    make: Callable[[], anyio.CancelScope],
) -> None:
    """Cancelled from outside, left with a group holding its cancellation and an error:
    the error comes out, as anyio's own scope lets it."""

    async def run() -> None:
        scope = make()
        with scope:
            asyncio.get_running_loop().call_soon(scope.cancel)
            try:
                await asyncio.sleep(30)
            except asyncio.CancelledError as cancelled:
                raise _GROUP("both", [cancelled, ValueError("x")]) from None

    with pytest.raises(_GROUP) as raised:
        await asyncio.get_running_loop().create_task(run())
    left = getattr(raised.value, "exceptions", ())
    assert [type(e) for e in left] == [ValueError]


@pytest.mark.parametrize("make", MAKERS.values(), ids=MAKERS.keys())
async def test_cancelled_from_outside_in_another_scope_is_anyios_delivery(
    make: Callable[[], anyio.CancelScope],
) -> None:
    """With a parent scope, or a task group inside, the cancellation is anyio's own: every
    task in the scope stops, and the parent sees nothing caught."""
    stopped: list[str] = []

    async def child() -> None:
        try:
            await asyncio.sleep(30)
        finally:
            stopped.append("child")

    async def run() -> tuple[bool, bool]:
        with anyio.CancelScope() as outer:
            scope = make()
            with scope:
                async with anyio.create_task_group() as group:
                    group.start_soon(child)
                    asyncio.get_running_loop().call_later(0.01, scope.cancel)
                    await asyncio.sleep(30)
        return scope.cancelled_caught, outer.cancelled_caught

    assert await asyncio.get_running_loop().create_task(run()) == (True, False)
    assert stopped == ["child"]


async def test_the_retries_of_a_turn_share_one_loop_callback() -> None:
    """What the batch is for: 50 scopes cancelled in one turn add one callback to the
    loop's queue for their retries, not 50 (anyio's own scopes add one each)."""
    loop = asyncio.get_running_loop()
    entered = asyncio.Event()
    scopes: list[anyio.CancelScope] = []

    async def run() -> None:
        scope = cheap_scope()
        with scope:
            scopes.append(scope)
            if len(scopes) == 50:
                entered.set()
            await asyncio.sleep(30)

    tasks = [loop.create_task(run()) for _ in range(50)]
    await entered.wait()
    queued: list[int] = []

    def waiting() -> int:  # the loop's queue and its timers
        return len(loop._ready) + len(loop._scheduled)  # type: ignore[attr-defined]

    def cancel_all() -> None:
        before = waiting()
        for scope in scopes:
            scope.cancel()
        queued.append(waiting() - before)

    loop.call_soon(cancel_all)
    await asyncio.gather(*tasks)
    assert queued == [50 + 1]  # each task's wake-up, and one callback for the retries
    assert all(scope.cancelled_caught for scope in scopes)


@pytest.mark.parametrize("make", MAKERS.values(), ids=MAKERS.keys())
async def test_a_swallowed_cancellation_comes_again_at_the_next_checkpoint(
    make: Callable[[], anyio.CancelScope],
) -> None:
    """The retry comes on the turn after the task ran, as anyio's: a task that swallows its
    scope's cancellation is cancelled at its very next checkpoint, not one later."""
    passed: list[int] = []

    async def run() -> bool:
        scope = make()
        with scope:
            asyncio.get_running_loop().call_soon(scope.cancel)
            with contextlib.suppress(asyncio.CancelledError):  # swallowed
                await asyncio.sleep(30)
            for i in range(3):
                await anyio.lowlevel.checkpoint()
                passed.append(i)
        return scope.cancelled_caught

    assert await asyncio.get_running_loop().create_task(run())
    assert passed == []


@pytest.mark.parametrize("make", MAKERS.values(), ids=MAKERS.keys())
async def test_cancelled_as_its_wait_ends_it_stops_at_the_next_checkpoint(
    make: Callable[[], anyio.CancelScope],
) -> None:
    """Cancelled in the turn its wait ended (the task woken, not yet run: not cancelled
    then), the task gets its wait's value and is cancelled at its next checkpoint."""
    seen: list[object] = []

    async def run(scope: anyio.CancelScope, future: asyncio.Future[int]) -> bool:
        with scope:
            seen.append(await future)
            await anyio.lowlevel.checkpoint()
            seen.append("passed")
        return scope.cancelled_caught

    loop = asyncio.get_running_loop()
    scope, future = make(), loop.create_future()
    task = loop.create_task(run(scope, future))
    await asyncio.sleep(0)

    def both() -> None:
        future.set_result(1)
        scope.cancel()

    loop.call_soon(both)
    assert await task
    assert seen == [1]


def test_a_loop_run_by_another_thread_keeps_its_retries() -> None:
    """A loop stopped with a retry pending and run on by another thread, then again by the
    first: a scope cancelled then is still cancelled again at each of its waits."""
    loop = asyncio.new_event_loop()
    held: list[asyncio.Task[None]] = []

    async def cancel_then_stop() -> None:
        scope = cheap_scope()

        async def host() -> None:
            with scope:
                await asyncio.sleep(10)

        held.append(loop.create_task(host()))
        await asyncio.sleep(0)
        scope.cancel()  # its retry goes in this thread's batch
        loop.stop()  # before the retry's callback runs

    async def turns() -> None:
        for _ in range(5):
            await asyncio.sleep(0)

    async def swallowing() -> list[str]:
        scope, log = cheap_scope(), []

        async def host() -> None:
            with scope:
                for _ in range(3):
                    try:
                        await asyncio.sleep(0.2)
                        log.append("not cancelled")
                    except asyncio.CancelledError:
                        log.append("cancelled")

        task = loop.create_task(host())
        await asyncio.sleep(0)
        scope.cancel()
        await task
        return log

    try:
        held.append(loop.create_task(cancel_then_stop()))
        loop.run_forever()
        other = threading.Thread(target=lambda: loop.run_until_complete(turns()))
        other.start()
        other.join()
        assert loop.run_until_complete(swallowing()) == ["cancelled"] * 3
    finally:
        for task in asyncio.all_tasks(loop):
            task.cancel()
        loop.run_until_complete(asyncio.sleep(0.01))
        loop.close()


@pytest.mark.parametrize("maker", MAKERS)
async def test_left_in_another_task_it_raises_as_anyio_does(maker: str) -> None:
    """Left by a task other than the one that entered it (on the same loop: the entering
    task is not its loop's running one then), it refuses as anyio's own scope does."""
    scope = MAKERS[maker]()
    scope.__enter__()
    try:

        async def leave() -> None:
            scope.__exit__(None, None, None)

        with pytest.raises(RuntimeError, match="different task"):
            await asyncio.get_running_loop().create_task(leave())
    finally:
        scope.__exit__(None, None, None)
    assert current_scope() is None
