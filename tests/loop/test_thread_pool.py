"""The worker-thread pool of sync handlers (_loop/threads.py): what a thread sees is what
anyio's own worker threads see, a cancel abandons the call, results come back in batches."""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections.abc import Callable

import anyio
import anyio.from_thread
import anyio.lowlevel
import anyio.to_thread
import pytest
import sniffio

from mcp_asgi._loop import threads
from mcp_asgi._loop.threads import run_in_thread

from ..helpers import eventually

pytestmark = [pytest.mark.anyio, pytest.mark.both_loops]

WHO = contextvars.ContextVar[str]("who")


async def test_the_thread_sees_the_callers_context_and_no_async_library() -> None:
    """contextvars are copied; sniffio reports no async library in the thread."""
    WHO.set("caller")

    def look() -> tuple[str, str | None, bool]:
        try:
            library: str | None = sniffio.current_async_library()
        except sniffio.AsyncLibraryNotFoundError:
            library = None
        return WHO.get(), library, threading.current_thread() is threading.main_thread()

    assert await run_in_thread(look, bounded=True) == ("caller", None, False)


async def test_anyio_from_thread_works_without_a_token() -> None:
    """The thread is an anyio worker thread: `from_thread.run` and `run_sync` reach the loop."""
    seen: list[str] = []

    async def on_loop() -> str:
        await anyio.lowlevel.checkpoint()
        return "ran on the loop"

    def work() -> str:
        anyio.from_thread.run_sync(seen.append, "sync")
        return anyio.from_thread.run(on_loop)

    assert await run_in_thread(work, bounded=True) == "ran on the loop"
    assert seen == ["sync"]


async def test_a_cancel_abandons_the_thread_and_check_cancelled_raises_in_it() -> None:
    """The caller moves on at once; the thread goes on and sees the cancel through anyio."""
    started, release, finished = threading.Event(), threading.Event(), threading.Event()
    outcome: list[str] = []

    def work() -> None:
        started.set()
        release.wait(5)
        try:
            anyio.from_thread.check_cancelled()
            outcome.append("not cancelled")
        except BaseException as exc:  # anyio raises the loop's cancellation exception
            outcome.append(type(exc).__name__)
        finished.set()

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:

            async def call() -> None:
                await run_in_thread(work, bounded=True)
                outcome.append("returned")  # never: the call was cancelled

            tg.start_soon(call)
            await anyio.to_thread.run_sync(started.wait)
            tg.cancel_scope.cancel()
    assert outcome == []  # the caller left while the thread still ran
    release.set()
    await anyio.to_thread.run_sync(finished.wait, 5)
    [seen] = outcome
    assert seen in {"CancelledError", "Cancelled"}  # asyncio's, trio's


async def test_a_call_cancelled_before_it_starts_never_runs() -> None:
    """A cancelled caller starts no thread."""
    ran: list[bool] = []
    with anyio.CancelScope() as scope:
        scope.cancel()
        await run_in_thread(lambda: ran.append(True), bounded=True)
    assert scope.cancelled_caught
    await anyio.sleep(0.05)
    assert ran == []


async def test_keyword_arguments_are_handed_to_the_function() -> None:
    """`kwargs` are `fn`'s, in the pool (bounded, on asyncio) and in anyio's threads."""

    def pair(*, a: int, b: str) -> tuple[int, str]:
        return a, b

    assert await run_in_thread(pair, bounded=True, kwargs={"a": 1, "b": "x"}) == (1, "x")
    assert await run_in_thread(pair, kwargs={"a": 2, "b": "y"}) == (2, "y")


async def test_the_end_of_each_call_is_reported_once() -> None:
    """`over(True)` once, on the loop, when a call returns, raises, or is cancelled before
    its thread started (which then never runs)."""
    reports: list[tuple[bool, bool]] = []

    def over(on_loop: bool) -> None:
        reports.append((on_loop, threading.current_thread() is threading.main_thread()))

    assert await run_in_thread(lambda: "done", over, bounded=True) == "done"
    assert reports == [(True, True)]

    def fails() -> None:
        raise ValueError("from the thread")

    with pytest.raises(ValueError, match="from the thread"):
        await run_in_thread(fails, over, bounded=True)
    assert reports == [(True, True)] * 2

    ran: list[bool] = []
    with anyio.CancelScope() as scope:
        scope.cancel()
        await run_in_thread(lambda: ran.append(True), over, bounded=True)
    assert reports == [(True, True)] * 3
    await anyio.sleep(0.05)
    assert ran == []
    assert reports == [(True, True)] * 3


async def test_an_abandoned_thread_reports_its_end_when_it_returns() -> None:
    """A call cancelled while its thread runs: the caller moves on, and `over(True)` comes
    once the thread returns, on the loop, not before."""
    started, release = threading.Event(), threading.Event()
    reports: list[tuple[bool, bool]] = []

    def over(on_loop: bool) -> None:
        reports.append((on_loop, threading.current_thread() is threading.main_thread()))

    def work() -> None:
        started.set()
        release.wait(5)

    async def call() -> None:
        await run_in_thread(work, over, bounded=True)

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(call)
            await anyio.to_thread.run_sync(started.wait)
            tg.cancel_scope.cancel()
    await anyio.sleep(0.05)
    assert reports == []  # the thread still runs
    release.set()
    await eventually(lambda: bool(reports), what="the thread's end")
    await anyio.sleep(0.05)
    assert reports == [(True, True)]


async def test_many_calls_at_once_each_get_their_own_result() -> None:
    """Results handed back in batches reach the right callers; errors are raised."""
    results: dict[int, int] = {}

    async def one(n: int) -> None:
        results[n] = await run_in_thread(lambda: n * n, bounded=True)

    async with anyio.create_task_group() as tg:
        for n in range(200):
            tg.start_soon(one, n)
    assert results == {n: n * n for n in range(200)}

    def fails() -> None:
        raise ValueError("from the thread")

    with pytest.raises(ValueError, match="from the thread"):
        await run_in_thread(fails, bounded=True)

    def stops() -> None:
        raise StopIteration

    with pytest.raises(RuntimeError, match="StopIteration"):
        await run_in_thread(stops, bounded=True)


@pytest.mark.fast_paths  # the pool itself
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_idle_threads_end(monkeypatch: pytest.MonkeyPatch) -> None:
    """A thread idle for IDLE_SECONDS ends; the next call starts another."""
    monkeypatch.setattr(threads, "IDLE_SECONDS", 0.05)
    used: set[threading.Thread] = set()

    def this() -> threading.Thread:
        return threading.current_thread()

    async def one() -> None:
        used.add(await run_in_thread(this, bounded=True))

    async with anyio.create_task_group() as tg:
        for _ in range(8):
            tg.start_soon(one)
    assert {t.name for t in used} == {"mcp_asgi worker"}
    for thread in used:
        await anyio.to_thread.run_sync(thread.join, 5)
        assert not thread.is_alive()
    assert await run_in_thread(this, bounded=True) not in used


@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # trio runs them in its system nursery
async def test_a_cancel_reaches_the_tasks_the_thread_runs_on_the_loop() -> None:
    """While the caller waits, the thread's `from_thread.run` tasks are in a scope inside
    the caller's, as with anyio's own threads on asyncio: cancelling the caller cancels
    them (the thread's call raises)."""
    running, finished = threading.Event(), threading.Event()
    outcome: list[str] = []

    async def forever() -> None:
        running.set()
        await anyio.sleep_forever()

    def work() -> None:
        try:
            anyio.from_thread.run(forever)
            outcome.append("returned")
        except BaseException as exc:  # the loop's cancellation, as a thread sees it
            outcome.append(type(exc).__name__)
        finished.set()

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(_bounded, work)
            await anyio.to_thread.run_sync(running.wait)
            tg.cancel_scope.cancel()
        await anyio.to_thread.run_sync(finished.wait, 5)
    assert outcome == ["CancelledError"]


async def test_the_next_call_is_cancelled_by_its_own_caller_only() -> None:
    """A call that returned leaves nothing of its caller's behind (the pool reuses the
    thread's scope): the next call, under another caller, sees that caller's cancel, and
    a third, in a cancel scope not cancelled, sees none."""

    def cancelled() -> bool:
        try:
            anyio.from_thread.check_cancelled()
        except BaseException:
            return True
        return False

    seen: list[bool] = []
    with anyio.CancelScope() as first:
        seen.append(await run_in_thread(cancelled, bounded=True))
    started, release = threading.Event(), threading.Event()

    def waits() -> None:
        started.set()
        release.wait(5)
        seen.append(cancelled())

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(_bounded, waits)
            await anyio.to_thread.run_sync(started.wait)
            tg.cancel_scope.cancel()
        release.set()
        await eventually(lambda: len(seen) == 2, what="the second thread's look")
    first.cancel()  # the first caller's scope, cancelled after its call
    with anyio.CancelScope():
        seen.append(await run_in_thread(cancelled, bounded=True))
    assert seen == [False, True, False]


@pytest.mark.fast_paths  # the pool itself
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_a_task_in_no_anyio_scope_gets_a_scope_for_its_thread() -> None:
    """A plain asyncio task (no anyio cancel scope entered): its thread still reaches the
    loop with `from_thread.run`, and `check_cancelled` finds nothing cancelled, also with
    a scope reused from a call whose caller was cancelled since."""

    async def on_loop() -> str:
        return "ran on the loop"

    def work() -> tuple[str, bool]:
        try:
            anyio.from_thread.check_cancelled()
        except BaseException:
            return "", True
        return anyio.from_thread.run(on_loop), False

    with anyio.CancelScope() as earlier:
        assert await run_in_thread(work, bounded=True) == ("ran on the loop", False)
    earlier.cancel()

    async def plain() -> tuple[str, bool]:
        return await run_in_thread(work, bounded=True)

    loop = asyncio.get_running_loop()
    assert await loop.create_task(plain()) == ("ran on the loop", False)


async def _bounded(fn: Callable[[], object]) -> None:
    await run_in_thread(fn, bounded=True)
