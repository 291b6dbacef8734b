"""`LazyEvent`: a one-shot event whose `anyio.Event` is made only when someone waits.

Every request has events that almost nobody waits for (its work becoming idle, its end);
an `anyio.Event` costs more to make than the rest of what they need.
"""

from __future__ import annotations

import anyio
import anyio.lowlevel


class LazyEvent:
    """Like `anyio.Event` (set once, waited for by any number of tasks); on the event loop."""

    __slots__ = ("_event", "_set")

    def __init__(self) -> None:
        self._set = False
        self._event: anyio.Event | None = None

    def is_set(self) -> bool:
        return self._set

    def set(self) -> None:
        self._set = True
        if self._event is not None:
            self._event.set()

    async def wait(self) -> None:
        if self._set:
            await anyio.lowlevel.checkpoint()
            return
        if self._event is None:
            self._event = anyio.Event()
        await self._event.wait()
