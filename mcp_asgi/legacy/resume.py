"""A GET with `Last-Event-ID` naming a request's stream: what followed that event, then the
rest as it comes, until the request's response.

::

    GET  Last-Event-ID: r3f9…:5  ─► events after 5 from the store (on any replica), in
                                    order, each with its id ─► follow the log (blocking
                                    reads, keep-alives between) ─► the response: end

The request's handler runs wherever it was POSTed; this connection only reads its log, so
closing it cancels nothing. It ends at the request's response (or the end of a cancelled
request), when the client goes, when the session ends here, or when the store is out of
reach (the client resumes again later, from the last event it got).
"""

from __future__ import annotations

import contextlib

import anyio
from starlette.types import Receive, Send

from mcp_asgi.legacy.resumable import EventLog, ResumableWriter
from mcp_asgi.legacy.sessions import LegacySession
from mcp_asgi.store import StoreUnavailable


async def serve_resumed(
    session: LegacySession,
    log: EventLog,
    after: str,
    receive: Receive,
    send: Send,
    *,
    keepalive_interval: float,
) -> None:
    """Replay then follow one request's stream until its response (see the module)."""
    release = session.use()
    writer = ResumableWriter.reader(send, log)
    wait = keepalive_interval if keepalive_interval > 0 else 15.0
    try:
        async with anyio.create_task_group() as tg:

            async def stop_on_disconnect() -> None:
                while (await receive())["type"] != "http.disconnect":
                    pass
                tg.cancel_scope.cancel()

            async def stop_on_close() -> None:
                await session.closed.wait()
                tg.cancel_scope.cancel()

            tg.start_soon(stop_on_disconnect)
            tg.start_soon(stop_on_close)
            if await writer.keepalive():  # the headers, at once
                with contextlib.suppress(StoreUnavailable):  # logged once by the store
                    async for event_id, body, last in log.follow(after, wait=wait):
                        if body is None:
                            ok = await writer.keepalive()
                        elif last and not body:  # the request ended without a response
                            break
                        else:
                            ok = await writer.replay(event_id, body, final=last)
                        if not ok or last:
                            break
            tg.cancel_scope.cancel()
        await writer.end()
    finally:
        release()
