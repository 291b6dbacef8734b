"""GET streams whose client is away: their notifications are still logged, so that the
client's GET with `Last-Event-ID` replays them.

::

    GET stream live ─► the client goes (a cut, a closed socket) ─► ParkedStreams.park:
        a task of the app's lifespan subscribes to the bus, takes over what the stream's
        subscription had not read yet, and appends every notification meant for the
        session to the stream's log, until
          - a newer GET stream of the session opens (here, or on another replica: the
            `stream` message of the control channel): it takes over what is unread,
          - the session ends, or
          - `legacy_resume_ttl` has passed since the client went (the log then expires
            `legacy_resume_ttl` after its last event);
        then it marks the log stopped (legacy.handover: a stream on another replica first
        gets what the bus still brings).

The tasks live in the app's lifespan (`LegacyEndpoint.running`), never in the GET's own
ASGI call: a server waiting for its connections' tasks at shutdown is not held up by a
client that went away. Without a lifespan nothing is parked (a GET stream's notifications
reach only a connected client, as before).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
from anyio.abc import TaskGroup, TaskStatus

from mcp_asgi._loggers import sessions_logger as logger
from mcp_asgi.bus.in_process import ChangeEvent, NotificationBus
from mcp_asgi.http.reply import dump
from mcp_asgi.legacy.handover import stop_logging
from mcp_asgi.legacy.notify import notification, unread
from mcp_asgi.legacy.resumable import EventLog
from mcp_asgi.legacy.sessions import LegacySession, StreamTurn


class ParkedStreams:
    """The GET streams of this process whose client is away (see the module)."""

    def __init__(self, *, park_for: float) -> None:
        self._park_for = park_for
        self._tasks: TaskGroup | None = None

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Park streams while open (the app's lifespan); their tasks end with it."""
        async with anyio.create_task_group() as tg:
            self._tasks = tg
            try:
                yield
            finally:
                self._tasks = None
                tg.cancel_scope.cancel()

    async def park(
        self, session: LegacySession, bus: NotificationBus, log: EventLog, turn: StreamTurn
    ) -> bool:
        """Go on logging the notifications of the stream whose turn is `turn` (its client
        went away) from now on; False when nothing can (no lifespan, or the stream is over).
        Returns once the stream's unread events are taken over."""
        tasks = self._tasks
        if tasks is None or self._park_for <= 0 or session.closed.is_set():
            return False
        if turn.replaced.is_set():
            return False
        await tasks.start(self._logging, session, bus, log, turn)
        return True

    async def _logging(
        self,
        session: LegacySession,
        bus: NotificationBus,
        log: EventLog,
        turn: StreamTurn,
        *,
        task_status: TaskStatus[None],
    ) -> None:
        async with bus.subscribe() as events:  # no suspension before the take-over
            left = unread(turn.events)
            turn.events = events  # the next stream takes over from this subscription
            task_status.started()
            try:
                with anyio.move_on_after(self._park_for):
                    async with anyio.create_task_group() as tg:

                        async def stop_on(event: anyio.Event) -> None:
                            await event.wait()
                            tg.cancel_scope.cancel()

                        tg.start_soon(stop_on, session.closed)
                        tg.start_soon(stop_on, turn.replaced)
                        for event in left:
                            await _log(session, log, event, turn)
                        async for event in events:
                            if turn.replaced.is_set() and not turn.away:
                                break  # the newer stream subscribed before: it has this one
                            await _log(session, log, event, turn)
                        tg.cancel_scope.cancel()
            except Exception as error:  # the store is down: the client will miss these
                logger.warning("notifications of a parked stream lost: %s", type(error).__name__)
            finally:
                await stop_logging(session, bus, log, turn, events)


async def _log(session: LegacySession, log: EventLog, event: ChangeEvent, turn: StreamTurn) -> None:
    message = notification(event, session)
    if message is None or (event.id is not None and event.id in turn.told):
        return
    with anyio.CancelScope(shield=True), anyio.move_on_after(5.0):  # taken: never half-done
        await log.append(dump(message), note=event.id)
