"""The marks a GET stream's log carries for a hand-over (legacy.handover), on the memory
store: a resuming stream reads up to where the stream that logged stopped, waits while one
still logs, and gives up after its bound, saying so."""

from __future__ import annotations

import logging

import anyio
import pytest

from mcp_asgi.legacy.handover import HANDOVER_WAIT, take_over
from mcp_asgi.legacy.resumable import EventLog, LogSettings
from mcp_asgi.store import MemoryStore


def new_log() -> EventLog:
    return EventLog.new(MemoryStore(), "session", "g", LogSettings())


async def read_all(log: EventLog, after: str, wait: float) -> list[tuple[bytes, str | None]]:
    return [(body, note) async for _, body, note in log.take_over(after, wait=wait)]


async def test_a_resumed_log_is_read_up_to_the_stop_mark_of_its_writer() -> None:
    """What follows the client's event, with the bus events' ids, up to the `stopped`
    mark; then nothing is awaited."""
    log = new_log()
    primed = (await log.start()).partition(":")[2]
    await log.append(b"one", note="p:1")
    await log.append(b"two")  # a message without a bus event's id
    await log.mark_stopped()
    with anyio.fail_after(5):  # (a wait here would be for nobody: the bound is far off)
        assert await read_all(log, primed, wait=30) == [(b"one", "p:1"), (b"two", None)]


async def test_a_log_whose_writer_has_not_stopped_is_awaited() -> None:
    """A stream opened again after a stop (`opened`) logs on: its later events are read,
    up to its own stop mark; without one, the reader gives up after its wait."""
    log = new_log()
    primed = (await log.start()).partition(":")[2]
    await log.append(b"one", note="p:1")
    await log.mark_stopped()
    await log.mark_opened()
    await log.append(b"two", note="p:2")
    with pytest.raises(TimeoutError):
        await read_all(log, primed, wait=0.2)
    found: list[tuple[bytes, str | None]] = []

    async def reader() -> None:
        found.extend(await read_all(log, primed, wait=30))

    async with anyio.create_task_group() as tg:
        tg.start_soon(reader)
        await log.append(b"three", note="p:3")
        await log.mark_stopped()
    assert found == [(b"one", "p:1"), (b"two", "p:2"), (b"three", "p:3")]


async def test_a_writer_that_never_stops_is_given_up_on_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Nobody marks the log stopped (its replica is gone): the resuming stream writes what
    there is, waits `HANDOVER_WAIT` seconds, logs a WARNING, and marks the log its own."""
    log = new_log()
    primed = (await log.start()).partition(":")[2]
    await log.append(b"one", note="p:1")
    written: list[bytes] = []

    async def write(event_id: str, body: bytes) -> bool:
        written.append(body)
        return True

    told: set[str] = set()
    with caplog.at_level(logging.WARNING, "mcp_asgi"), anyio.fail_after(HANDOVER_WAIT + 10):
        assert await take_over(log, primed, write, told)
    assert written == [b"one"]
    assert told == {"p:1"}
    assert [r.getMessage() for r in caplog.records if "without the end" in r.getMessage()]
    with anyio.fail_after(5):  # the log is this stream's now: a later reader waits for it
        with pytest.raises(TimeoutError):
            await read_all(log, primed, wait=0.1)
