"""The watcher on its own (fake clock): one cancel scope per quiet period serves the
deadline, `stop()` and the next keep-alive; it reports why it stopped and nothing else."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import anyio
import anyio.lowlevel
import pytest
from starlette.types import Message
from trio.testing import MockClock

from mcp_asgi._loop.current import uncancel
from mcp_asgi.lifecycle.watcher import WatchEnd, Watcher

pytestmark = [pytest.mark.anyio, pytest.mark.fake_clock]


class Connection:
    """A `receive()` that waits until the test disconnects it; keep-alives it records."""

    def __init__(self, *, keepalive_ok: bool = True) -> None:
        self.gone = anyio.Event()
        self.keepalives: list[float] = []
        self.keepalive_ok = keepalive_ok

    async def receive(self) -> Message:
        await self.gone.wait()
        return {"type": "http.disconnect"}

    async def keepalive(self) -> bool:
        self.keepalives.append(anyio.current_time())
        return self.keepalive_ok


async def test_keepalives_each_quiet_interval_until_the_deadline(fake_clock: MockClock) -> None:
    """A keep-alive every interval; the deadline ends the watch as DEADLINE, on time."""
    start = anyio.current_time()
    conn = Connection()
    watcher = Watcher(deadline=start + 10, keepalive=conn.keepalive, keepalive_interval=3)
    assert await watcher.watch(conn.receive) is WatchEnd.DEADLINE
    assert [round(t - start, 6) for t in conn.keepalives] == [3, 6, 9]
    assert anyio.current_time() - start == pytest.approx(10)


async def test_a_failed_keepalive_is_the_client_gone(fake_clock: MockClock) -> None:
    """A keep-alive that cannot be written ends the watch as CLIENT_GONE."""
    conn = Connection(keepalive_ok=False)
    watcher = Watcher(
        deadline=anyio.current_time() + 10, keepalive=conn.keepalive, keepalive_interval=3
    )
    assert await watcher.watch(conn.receive) is WatchEnd.CLIENT_GONE
    assert len(conn.keepalives) == 1


async def test_a_disconnect_and_a_stop(fake_clock: MockClock) -> None:
    """A disconnect between keep-alives is CLIENT_GONE; `stop()` is STOPPED, also before
    the watch begins."""
    conn = Connection()
    watcher = Watcher(
        deadline=anyio.current_time() + 100, keepalive=conn.keepalive, keepalive_interval=3
    )
    async with anyio.create_task_group() as tg:
        tg.start_soon(_later, 4, conn.gone.set)
        assert await watcher.watch(conn.receive) is WatchEnd.CLIENT_GONE
    assert len(conn.keepalives) == 1

    conn = Connection()
    watcher = Watcher(deadline=anyio.current_time() + 100, keepalive=None, keepalive_interval=3)
    async with anyio.create_task_group() as tg:
        tg.start_soon(_later, 50, watcher.stop)
        assert await watcher.watch(conn.receive) is WatchEnd.STOPPED
    assert conn.keepalives == []  # no keep-alives without a writer that can send them
    assert await watcher.until_deadline() is WatchEnd.STOPPED


async def test_messages_other_than_a_disconnect_are_read_past(fake_clock: MockClock) -> None:
    """Whatever `receive()` gives before the disconnect is read and dropped; the
    disconnect, after them, is CLIENT_GONE, and no keep-alive came in between."""
    conn = Connection()
    extra: list[Message] = [{"type": "http.request", "body": b"", "more_body": False}] * 3

    async def receive() -> Message:
        if extra:
            return extra.pop()
        return await conn.receive()

    watcher = Watcher(
        deadline=anyio.current_time() + 100, keepalive=conn.keepalive, keepalive_interval=3
    )
    async with anyio.create_task_group() as tg:
        tg.start_soon(_later, 1, conn.gone.set)
        assert await watcher.watch(receive) is WatchEnd.CLIENT_GONE
    assert extra == []
    assert conn.keepalives == []


async def _later(seconds: float, fn: object) -> None:
    await anyio.sleep(seconds)
    assert callable(fn)
    fn()


# -- on asyncio: a loop timer and the task's own cancellation, taken back ----------------


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
class TestOnAsyncio:
    """The same outcomes on asyncio (real time, short intervals; no timing asserted), and
    the watcher's own cancellations never leak: the task goes on uncancelled after each
    wait, and a cancellation from outside passes through, also when it comes with ours."""

    pytestmark = [pytest.mark.anyio]

    async def test_keepalives_then_the_deadline(self) -> None:
        start = anyio.current_time()
        conn = Connection()
        watcher = Watcher(deadline=start + 0.35, keepalive=conn.keepalive, keepalive_interval=0.1)
        assert await watcher.watch(conn.receive) is WatchEnd.DEADLINE
        assert conn.keepalives
        assert all(t < start + 0.35 for t in conn.keepalives)
        assert anyio.current_time() >= start + 0.35  # never before the deadline
        assert _uncancelled()
        await anyio.lowlevel.checkpoint()  # nothing is left pending on the task

    async def test_a_failed_keepalive_is_the_client_gone(self) -> None:
        conn = Connection(keepalive_ok=False)
        watcher = Watcher(
            deadline=anyio.current_time() + 10, keepalive=conn.keepalive, keepalive_interval=0.05
        )
        assert await watcher.watch(conn.receive) is WatchEnd.CLIENT_GONE
        assert len(conn.keepalives) == 1

    async def test_a_disconnect_a_stop_and_a_stop_before(self) -> None:
        conn = Connection()
        watcher = Watcher(deadline=anyio.current_time() + 10, keepalive=None, keepalive_interval=3)
        async with anyio.create_task_group() as tg:
            tg.start_soon(_later, 0.05, conn.gone.set)
            assert await watcher.watch(conn.receive) is WatchEnd.CLIENT_GONE

        conn = Connection()
        watcher = Watcher(deadline=anyio.current_time() + 10, keepalive=None, keepalive_interval=3)
        async with anyio.create_task_group() as tg:
            tg.start_soon(_later, 0.05, watcher.stop)
            assert await watcher.watch(conn.receive) is WatchEnd.STOPPED
        assert _uncancelled()
        assert await watcher.until_deadline() is WatchEnd.STOPPED  # stopped before it began
        await anyio.sleep(0.01)

    async def test_until_the_deadline_without_reading(self) -> None:
        watcher = Watcher(
            deadline=anyio.current_time() + 0.05, keepalive=None, keepalive_interval=0
        )
        assert await watcher.until_deadline() is WatchEnd.DEADLINE
        assert _uncancelled()

    async def test_a_stop_while_a_keepalive_is_written(self) -> None:
        """`stop()` during a slow keep-alive ends the watch as STOPPED, not CLIENT_GONE."""
        writing = anyio.Event()

        async def slow_keepalive() -> bool:
            writing.set()
            await anyio.sleep(10)
            return True

        conn = Connection()
        watcher = Watcher(
            deadline=anyio.current_time() + 60, keepalive=slow_keepalive, keepalive_interval=0.01
        )
        async with anyio.create_task_group() as tg:

            async def stop_when_writing() -> None:
                await writing.wait()
                watcher.stop()

            tg.start_soon(stop_when_writing)
            assert await watcher.watch(conn.receive) is WatchEnd.STOPPED
        assert _uncancelled()

    async def test_a_cancellation_from_outside_passes_through(self) -> None:
        conn = Connection()
        watcher = Watcher(deadline=anyio.current_time() + 10, keepalive=None, keepalive_interval=0)
        with anyio.move_on_after(0.05) as outer:
            await watcher.watch(conn.receive)
        assert outer.cancelled_caught
        assert _uncancelled()

    async def test_an_outside_cancellation_with_a_stop_still_passes_through(self) -> None:
        """The outside cancellation and `stop()` land together: the watch does not swallow
        the outside one as its own."""
        conn = Connection()
        watcher = Watcher(deadline=anyio.current_time() + 10, keepalive=None, keepalive_interval=0)
        task = asyncio.current_task()
        assert task is not None

        def both() -> None:
            task.cancel()
            watcher.stop()

        asyncio.get_running_loop().call_later(0.05, both)
        with pytest.raises(asyncio.CancelledError):
            await watcher.watch(conn.receive)
        assert uncancel(task) == 0  # exactly the outside one was left pending


def _uncancelled() -> bool:
    task = asyncio.current_task()
    return task is not None and cast(Any, task).cancelling() == 0  # typeshed 3.10 lacks it
