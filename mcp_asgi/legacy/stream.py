"""The GET stream of a 2025-era session: change notifications from the notification bus.

The session's one stream (a newer GET replaces it) carries list changes, and updates of
the resources the session subscribed to, as `event: message` SSE events with ids, logged
first (legacy.resumable); keep-alive comments in between. A new stream of a 2025-11-25
client opens with a priming event (an id, `retry`, empty data), so that even a stream cut
before its first notification can be resumed. A GET whose `Last-Event-ID` names such a
stream gets what the log holds after that event, then the stream goes on live with the
same log.

::

    subscribe to the bus ─► take over what the previous stream left unread, wait until it
    has stopped logging ─► [settle the bus, tell the other replicas, replay the log up to
    where the stream that logged it stopped] ─► live: notifications (but those replayed),
    keep-alives ─►
      the client goes  ─► parked (legacy.parked): its notifications still logged
      session ends, a newer stream replaces this one ─► the log marked stopped ─► end

Nothing is lost between two streams of a session, nor sent twice: on one replica the next
one takes over the unread events of the previous one's subscription at the moment it
subscribes itself; across replicas, see legacy.handover.
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Awaitable, Callable

import anyio
from starlette.types import Receive, Send

from mcp_asgi.bus.in_process import ChangeEvent, NotificationBus
from mcp_asgi.legacy.handover import settled, stop_logging, take_over
from mcp_asgi.legacy.notify import notification, unread
from mcp_asgi.legacy.parked import ParkedStreams
from mcp_asgi.legacy.resumable import EventLog, ResumableWriter
from mcp_asgi.legacy.sessions import LegacySession, StreamTurn

__all__ = ["notification", "serve_stream"]


async def serve_stream(
    session: LegacySession,
    bus: NotificationBus,
    receive: Receive,
    send: Send,
    *,
    keepalive_interval: float,
    log: EventLog,
    replay_after: str | None = None,
    prime: bool = False,
    parked: ParkedStreams | None = None,
    opened: Callable[[], Awaitable[None]] | None = None,
) -> None:
    """Serve one GET stream until the client goes, the session ends or a newer stream
    replaces this one; `replay_after`: first what `log` holds after that position; `prime`:
    open a new stream with the priming event; `parked`: where the stream goes on logging
    once its client is away; `opened`: told once the stream is the session's (the other
    replicas stop logging theirs)."""
    release = session.use()
    if replay_after is None:
        writer = ResumableWriter(send, "sse", log, prime=prime, outlives=False)
    else:
        writer = ResumableWriter.continuing(send, log)
    try:
        async with bus.subscribe() as events:  # before the headers: nothing slips between
            turn, previous = session.open_stream(events)
            left = unread(previous.events) if previous is not None else []
            try:
                if previous is not None:
                    with anyio.move_on_after(5.0):
                        await previous.done.wait()  # its last events are in the log
                if opened is not None:
                    if replay_after is not None:  # our events out before the others stop
                        await settled(bus)
                    await opened()
                if await _run(
                    session,
                    receive,
                    writer,
                    log,
                    replay_after,
                    left,
                    events,
                    turn,
                    keepalive_interval,
                ):
                    writer.abandon()
                    release()  # the session may expire while its client is away
                    if parked is not None:
                        await parked.park(session, bus, log, turn)
            finally:
                if turn.events is events:  # not parked: this stream has stopped logging
                    await stop_logging(session, bus, log, turn, events)
        await writer.close()
    finally:
        release()


async def _run(
    session: LegacySession,
    receive: Receive,
    writer: ResumableWriter,
    log: EventLog,
    replay_after: str | None,
    left: list[ChangeEvent],
    events: AsyncIterator[ChangeEvent],
    turn: StreamTurn,
    keepalive_interval: float,
) -> bool:
    """The stream while its client is there; whether it ended because the client went."""
    if not await writer.keepalive():  # opens the stream
        return True
    if replay_after is not None and not await take_over(
        log, replay_after, writer.replay, turn.told
    ):
        return True
    gone = False
    async with anyio.create_task_group() as tg:

        async def stop_after(wait: Callable[[], Awaitable[object]], client: bool) -> None:
            nonlocal gone
            await wait()
            gone = gone or client
            tg.cancel_scope.cancel()

        tg.start_soon(stop_after, lambda: _disconnect(receive), True)
        tg.start_soon(stop_after, session.closed.wait, False)
        tg.start_soon(stop_after, turn.replaced.wait, False)
        tg.start_soon(stop_after, lambda: _forward(left, events, session, writer, turn), True)
        tg.start_soon(stop_after, lambda: _keepalive(writer, keepalive_interval), True)
    return gone and not session.closed.is_set() and not turn.replaced.is_set()


async def _forward(
    left: list[ChangeEvent],
    events: AsyncIterator[ChangeEvent],
    session: LegacySession,
    writer: ResumableWriter,
    turn: StreamTurn,
) -> None:
    """Write (and log) the notifications, but those the resumed log told already; an
    event received once a newer stream on this replica took over is that stream's (it
    subscribed before), so it is left to it (one on another replica relies on our log)."""
    for event in left:
        if not await _notify(event, session, writer, turn):
            return
    async for event in events:
        if turn.replaced.is_set() and not turn.away:
            return
        if not await _notify(event, session, writer, turn):
            return


async def _notify(
    event: ChangeEvent, session: LegacySession, writer: ResumableWriter, turn: StreamTurn
) -> bool:
    message = notification(event, session)
    if message is None or (event.id is not None and event.id in turn.told):
        return True
    with anyio.CancelScope(shield=True), anyio.move_on_after(5.0):  # taken: never half-done
        return await writer.notify(message, note=event.id)
    return False


async def _keepalive(writer: ResumableWriter, interval: float) -> None:
    while True:
        await anyio.sleep(interval or math.inf)
        if not await writer.keepalive():
            return


async def _disconnect(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
