"""`Unclaimed`: a cancellation with no message, thrown into a handler that waits in the
request's own task (asyncio, Python 3.11+), not yet known to be the server's.

A server that cancels the request's task at shutdown without a message (Hypercorn,
Daphne) cannot be told from asyncio's own tools in the handler (`asyncio.timeout`, a
`TaskGroup` aborting, `wait_for`) when the cancellation is thrown in. Those take theirs
back (`Task.uncancel()`) once they have turned it into their own outcome; a server never
does. So it is the server's while the task still counts it as pending, or while the
handler is handling that very exception (anyio 4's task groups can take one back too many:
a cancellation they sent a child task, counted by a scope in it, is taken back from the
group's own task). The request's scope decides what follows (`RequestScope.thrown`).
"""

from __future__ import annotations

import asyncio
import sys
import weakref

from mcp_asgi._loop import cancelling


class Unclaimed:
    """One message-less cancellation on its way through the handler: its task, the task's
    count of pending cancellations with it, the exception (weakly) and when it came."""

    __slots__ = ("_count", "_exc", "_task", "since")

    def __init__(self, task: asyncio.Task[object], exc: BaseException, since: float) -> None:
        self._task = task
        self._count = cancelling(task)
        self._exc = weakref.ref(exc)
        self.since = since
        """When it was thrown in (on the request's clock)."""

    def pending(self) -> bool:
        """Whether it is still on its way: not taken back by whoever sent it from within
        the handler, or the very exception the caller is handling now."""
        if cancelling(self._task) >= self._count:
            return True
        handling = sys.exc_info()[1]
        return handling is not None and handling is self._exc()


def without_message(exc: BaseException | None) -> bool:
    """Whether `exc` is a cancellation that does not say who sent it."""
    return isinstance(exc, asyncio.CancelledError) and (not exc.args or exc.args[0] is None)
