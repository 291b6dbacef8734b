"""The GET stream of a 2025-era session: change notifications from the notification bus.

The session's one stream (a newer GET replaces it) carries list changes, and updates of
the resources the session subscribed to, as `event: message` SSE events with ids, logged
first (legacy.resumable); keep-alive comments in between. A GET whose `Last-Event-ID` names
such a stream gets what the log holds after that event, then the stream goes on live with
the same log. It ends when the client goes, the session ends, or a newer stream replaces
it.
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Final

import anyio
from starlette.types import Receive, Send

from mcp_asgi.bus.in_process import ChangeEvent, ChangeKind, NotificationBus
from mcp_asgi.legacy.resumable import EventLog, ResumableWriter
from mcp_asgi.legacy.sessions import LegacySession
from mcp_asgi.protocol import jsonrpc
from mcp_asgi.protocol.jsonrpc import JsonObject

_METHODS: Final[dict[ChangeKind, str]] = {
    "tools_list_changed": "notifications/tools/list_changed",
    "prompts_list_changed": "notifications/prompts/list_changed",
    "resources_list_changed": "notifications/resources/list_changed",
    "resource_updated": "notifications/resources/updated",
}


async def serve_stream(
    session: LegacySession,
    bus: NotificationBus,
    receive: Receive,
    send: Send,
    *,
    keepalive_interval: float,
    log: EventLog,
    replay_after: str | None = None,
) -> None:
    """Serve one GET stream until the client goes, the session ends or a newer stream
    replaces this one; `replay_after`: first what `log` holds after that position."""
    replaced = session.open_stream()
    release = session.use()
    if replay_after is None:
        writer = ResumableWriter(send, "sse", log, prime=False, outlives=False)
    else:
        writer = ResumableWriter.continuing(send, log)
    try:
        async with bus.subscribe() as events:  # before the headers: nothing slips between
            if not await writer.keepalive():  # opens the stream
                return
            if replay_after is not None and not await _replay(log, replay_after, writer):
                return
            async with anyio.create_task_group() as tg:

                async def stop_after(wait: Callable[[], Awaitable[object]]) -> None:
                    await wait()
                    tg.cancel_scope.cancel()

                tg.start_soon(stop_after, lambda: _disconnect(receive))
                tg.start_soon(stop_after, session.closed.wait)
                tg.start_soon(stop_after, replaced.wait)
                tg.start_soon(stop_after, lambda: _forward(events, session, writer))
                tg.start_soon(stop_after, lambda: _keepalive(writer, keepalive_interval))
        await writer.close()
    finally:
        release()


def notification(event: ChangeEvent, session: LegacySession) -> JsonObject | None:
    """The notification for `event` on this session's stream; None when it did not ask."""
    if event.kind == "resource_updated":
        if event.uri is None or event.uri not in session.subscriptions:
            return None
        return jsonrpc.notification(_METHODS[event.kind], {"uri": event.uri})
    return jsonrpc.notification(_METHODS[event.kind], {})


async def _forward(
    events: AsyncIterator[ChangeEvent], session: LegacySession, writer: ResumableWriter
) -> None:
    async for event in events:
        message = notification(event, session)
        if message is not None and not await writer.notify(message):
            return


async def _replay(log: EventLog, after: str, writer: ResumableWriter) -> bool:
    async for event_id, body, _ in log.follow(after, wait=0):
        if body is None:
            return True  # caught up
        if body and not await writer.replay(event_id, body):
            return False
    return True


async def _keepalive(writer: ResumableWriter, interval: float) -> None:
    while True:
        await anyio.sleep(interval or math.inf)
        if not await writer.keepalive():
            return


async def _disconnect(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
