"""The notification bus: how "something changed" reaches every listening stream.

`server.notify_tools_changed()` and friends publish a `ChangeEvent`; every
`subscriptions/listen` stream (and every legacy GET stream) holds a `Subscription` and
receives the events it opted into. The default bus is in-process; a bus shared by several
processes or replicas (e.g. Redis pub/sub) implements the same protocol.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from typing import Literal, Protocol

import anyio
from anyio.streams.memory import MemoryObjectSendStream

logger = logging.getLogger("mcp_asgi.bus")

ChangeKind = Literal[
    "tools_list_changed", "prompts_list_changed", "resources_list_changed", "resource_updated"
]


@dataclass(frozen=True, slots=True)
class ChangeEvent:
    """One change: a list changed, or the resource at `uri` was updated."""

    kind: ChangeKind
    uri: str | None = None


class NotificationBus(Protocol):
    """Publishes change events to every subscriber, possibly across processes."""

    async def publish(self, event: ChangeEvent) -> None:
        """Deliver `event` to every current subscriber; never blocks on a slow one."""
        ...

    def subscribe(self) -> AbstractAsyncContextManager[AsyncIterator[ChangeEvent]]:
        """A subscription for as long as the context is open."""
        ...

    def running(self) -> AbstractAsyncContextManager[None]:
        """Background work the bus needs while the app runs (entered around the lifespan)."""
        ...


class InProcessBus:
    """Fan-out to the subscribers of this process. A subscriber that falls more than
    `buffer` events behind loses the overflow (it is logged), so publishing never blocks."""

    def __init__(self, *, buffer: int = 64) -> None:
        if buffer < 1:
            raise ValueError("buffer must be at least 1")
        self._buffer = buffer
        self._subscribers: set[MemoryObjectSendStream[ChangeEvent]] = set()

    @property
    def subscriber_count(self) -> int:
        """How many subscriptions are open."""
        return len(self._subscribers)

    async def publish(self, event: ChangeEvent) -> None:
        self.deliver(event)

    def deliver(self, event: ChangeEvent) -> None:
        """Hand `event` to every local subscriber without waiting."""
        for stream in list(self._subscribers):
            try:
                stream.send_nowait(event)
            except anyio.WouldBlock:
                logger.warning(
                    "listener too slow: change event dropped", extra={"kind": event.kind}
                )
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                self._subscribers.discard(stream)

    @asynccontextmanager
    async def subscribe(self) -> AsyncIterator[AsyncIterator[ChangeEvent]]:
        send, receive = anyio.create_memory_object_stream[ChangeEvent](self._buffer)
        self._subscribers.add(send)
        try:
            yield receive
        finally:
            self._subscribers.discard(send)
            send.close()
            receive.close()

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        yield
