"""A 2025-era session's GET stream handed over from one replica to another, with no
notification lost and none sent twice.

Replica A logs the notifications of the session's stream (live, or parked while its client
is away); the client's GET with `Last-Event-ID` reaches replica B::

    B: subscribe to the bus (what comes now waits there) ─► settle the bus (B's own
       earlier events are out) ─► `stream` on the control channel
    A: told ─► settle the bus (every event published before B subscribed has reached A)
       ─► log what its subscription holds ─► mark the log stopped (`x`)
    B: replay the log up to A's mark (at most `HANDOVER_WAIT` seconds, then a warning)
       ─► mark it opened (`o`) ─► the waiting events, but those the log already told
       (by their bus event's id), then live

An event published before B subscribed reaches A before A's settle returns (one bus
channel is delivered in order), so A logs it; one published after is in B's
subscription. An event in both (published meanwhile) is in the log with its id, and B
drops its own copy. On one replica the same holds without the bus: the new stream takes
over the old one's unread events and waits until it is done (its mark is in the log).
A stream that stops logging for any other reason (its parking ends, no lifespan to park
it) marks the log too, so resuming it later waits for nobody. A replica that is gone (or
a store out of reach) leaves no mark: B waits `HANDOVER_WAIT` seconds, says so once, and
goes on; what that replica logged later is not replayed.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Final

import anyio

from mcp_asgi._loggers import sessions_logger as logger
from mcp_asgi.bus.in_process import ChangeEvent, NotificationBus, settle
from mcp_asgi.http.reply import dump
from mcp_asgi.legacy.notify import notification, unread
from mcp_asgi.legacy.resumable import EventLog
from mcp_asgi.legacy.sessions import LegacySession, StreamTurn
from mcp_asgi.store import StoreUnavailable

HANDOVER_WAIT: Final = 5.0
"""Seconds a stream resuming a log waits for the stream that logged there to stop."""
SETTLE_WAIT: Final = 2.0
"""Seconds a replica waits for the bus to settle (`RedisBus.settle`) during a hand-over."""


async def settled(bus: NotificationBus) -> bool:
    """Settle the bus, within `SETTLE_WAIT`; whether it did."""
    with anyio.move_on_after(SETTLE_WAIT):
        await settle(bus)
        return True
    logger.info("stream hand-over: the bus did not settle within %gs", SETTLE_WAIT)
    return False


async def stop_logging(
    session: LegacySession,
    bus: NotificationBus,
    log: EventLog,
    turn: StreamTurn,
    events: AsyncIterator[ChangeEvent],
) -> None:
    """The end of a stream's turn (`events`: its subscription): when a stream on another
    replica took over, settle the bus and log what `events` holds; then mark `log`
    stopped (also when the session ends here, at shutdown say: it may go on elsewhere),
    and the turn done. Never raises (a store out of reach is logged once by it)."""
    try:
        with (
            anyio.CancelScope(shield=True),
            anyio.move_on_after(SETTLE_WAIT + 2.0),
            contextlib.suppress(StoreUnavailable),
        ):
            if turn.away and not session.closed.is_set() and await settled(bus):
                for event in unread(events):
                    if event.id is not None and event.id in turn.told:
                        continue
                    message = notification(event, session)
                    if message is not None:
                        await log.append(dump(message), note=event.id)
            await log.mark_stopped()
    finally:
        turn.done.set()


async def take_over(
    log: EventLog, after: str, write: Callable[[str, bytes], Awaitable[bool]], told: set[str]
) -> bool:
    """`write` what `log` holds after `after`, up to the mark of the stream that logged
    there (`EventLog.take_over`), adding the ids of their bus events to `told`; then mark
    the log opened (this stream logs there now, its client there or not). Whether every
    write succeeded (the client is there). Waiting longer than `HANDOVER_WAIT` is
    logged, and what came so far is all."""
    there = True
    with contextlib.suppress(StoreUnavailable):  # logged once by the store
        try:
            async with contextlib.aclosing(log.take_over(after, wait=HANDOVER_WAIT)) as found:
                async for event_id, body, note in found:
                    there = there and (not body or await write(event_id, body))
                    if note is not None:
                        told.add(note)
        except TimeoutError:
            logger.warning(
                "GET stream resumed without the end of its log: the stream that logged it "
                "(on another replica?) did not stop within %gs; what it logs later is not "
                "replayed",
                HANDOVER_WAIT,
            )
        await log.mark_opened()
    return there
