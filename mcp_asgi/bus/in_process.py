"""The notification bus: how "something changed" reaches every listening stream.

`server.notify_tools_changed()` and friends publish a `ChangeEvent`; every
`subscriptions/listen` stream holds a subscription and receives the events it opted into.
The default bus is in-process; a bus shared by several processes or replicas
(`mcp_asgi.redis_bus.RedisBus`) implements the same protocol.

Subscribers live on one event loop. `publish_nowait` may be called from any thread (a
sync route or tool running in a worker thread): the delivery is handed to that loop.
"""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from typing import Literal, Protocol

import anyio
import anyio.from_thread
import anyio.lowlevel
from anyio.lowlevel import EventLoopToken
from anyio.streams.memory import MemoryObjectSendStream

from mcp_asgi._loggers import bus_logger as logger

ChangeKind = Literal[
    "tools_list_changed", "prompts_list_changed", "resources_list_changed", "resource_updated"
]
CHANGE_KINDS: tuple[ChangeKind, ...] = (
    "tools_list_changed",
    "prompts_list_changed",
    "resources_list_changed",
    "resource_updated",
)


@dataclass(frozen=True, slots=True)
class ChangeEvent:
    """One change: a list changed, or the resource at `uri` was updated."""

    kind: ChangeKind
    """`tools_list_changed`, `prompts_list_changed`, `resources_list_changed` or
    `resource_updated`."""
    uri: str | None = None
    """The updated resource's URI (`resource_updated` only)."""


class NotificationBus(Protocol):
    """Publishes change events to every subscriber, possibly across processes."""

    async def publish(self, event: ChangeEvent) -> None:
        """Deliver `event` to every current subscriber; never waits on a slow subscriber
        or on the network."""
        ...

    def publish_nowait(self, event: ChangeEvent) -> None:
        """`publish` for sync code, from any thread; a no-op before the bus has an event
        loop (nothing can be listening yet)."""
        ...

    def subscribe(self) -> AbstractAsyncContextManager[AsyncIterator[ChangeEvent]]:
        """A subscription for as long as the context is open."""
        ...

    def running(self) -> AbstractAsyncContextManager[None]:
        """Background work the bus needs while the app runs (entered around the lifespan)."""
        ...


class LoopBinding:
    """The event loop a bus's subscribers live on, so other threads can reach it."""

    __slots__ = ("_thread", "_token")

    def __init__(self) -> None:
        self._token: EventLoopToken | None = None
        self._thread: int | None = None

    @property
    def bound(self) -> bool:
        return self._token is not None

    def bind(self) -> None:
        """Remember the current event loop (call from async code); the first one wins."""
        if self._token is None:
            self._token = anyio.lowlevel.current_token()
            self._thread = threading.get_ident()

    def call(self, fn: Callable[[], None]) -> None:
        """Run `fn` on the bound loop: directly from its thread, handed over from others."""
        if self._token is None:
            return
        if threading.get_ident() == self._thread:
            fn()
            return
        try:
            anyio.from_thread.run_sync(fn, token=self._token)
        except RuntimeError:
            logger.debug("event loop gone: change event dropped", exc_info=True)


class InProcessBus:
    """Fan-out to the subscribers of this process. A subscriber that falls more than
    `buffer` events behind loses the overflow (it is logged), so publishing never blocks."""

    def __init__(self, *, buffer: int = 64) -> None:
        if buffer < 1:
            raise ValueError("buffer must be at least 1")
        self._buffer = buffer
        self._subscribers: set[MemoryObjectSendStream[ChangeEvent]] = set()
        self._loop = LoopBinding()

    @property
    def subscriber_count(self) -> int:
        """How many subscriptions are open."""
        return len(self._subscribers)

    async def publish(self, event: ChangeEvent) -> None:
        """Deliver `event` to every subscriber of this process without waiting."""
        self._loop.call(lambda: self.deliver(event))  # unbound: nobody subscribed yet

    def publish_nowait(self, event: ChangeEvent) -> None:
        """`publish` for sync code, from any thread; a no-op until something subscribed."""
        self._loop.call(lambda: self.deliver(event))

    def deliver(self, event: ChangeEvent) -> None:
        """Hand `event` to every local subscriber without waiting (on the loop's thread)."""
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
        """`async with bus.subscribe() as events:` the events published while it is open."""
        self._loop.bind()
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
        """Binds the bus to the running event loop; no background work."""
        self._loop.bind()
        yield
