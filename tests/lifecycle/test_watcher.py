"""The watcher on its own (fake clock): one cancel scope per quiet period serves the
deadline, `stop()` and the next keep-alive; it reports why it stopped and nothing else."""

from __future__ import annotations

import anyio
import pytest
from starlette.types import Message
from trio.testing import MockClock

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


async def _later(seconds: float, fn: object) -> None:
    await anyio.sleep(seconds)
    assert callable(fn)
    fn()
