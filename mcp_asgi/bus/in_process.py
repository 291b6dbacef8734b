"""The notification bus: how "something changed" reaches every listening stream.

`server.notify_tools_changed()` and friends publish a `ChangeEvent`; every
`subscriptions/listen` stream holds a subscription and receives the events it opted into.
The default bus is in-process; a bus shared by several processes or replicas
(`mcp_asgi.bus.redis.RedisBus`) implements the same protocol.

Subscribers live on one event loop. `publish_nowait` may be called from any thread (a
sync route or tool running in a worker thread): the delivery is handed to that loop.
"""

from __future__ import annotations

import math
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from typing import Final, Literal, Protocol

import anyio
import anyio.from_thread
import anyio.lowlevel
from anyio.lowlevel import EventLoopToken

from mcp_asgi._loggers import bus_logger as logger

ChangeKind = Literal[
    "tools_list_changed",
    "prompts_list_changed",
    "resources_list_changed",
    "resource_updated",
    "task_status",
]
CHANGE_KINDS: tuple[ChangeKind, ...] = (
    "tools_list_changed",
    "prompts_list_changed",
    "resources_list_changed",
    "resource_updated",
    "task_status",
)


@dataclass(frozen=True, slots=True)
class ChangeEvent:
    """One change: a list changed, the resource at `uri` was updated, or the status of the
    task whose id is `uri` changed."""

    kind: ChangeKind
    """`tools_list_changed`, `prompts_list_changed`, `resources_list_changed`,
    `resource_updated` or `task_status`."""
    uri: str | None = None
    """The updated resource's URI (`resource_updated`), the task's id (`task_status`)."""
    id: str | None = field(default=None, compare=False)
    """This event's identity across processes (`RedisBus` gives one); not part of what
    the change is, so equal changes still coalesce. A stream handed over between replicas
    drops what it has already replayed by it."""


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


async def settle(bus: NotificationBus) -> None:
    """Return once what this process published before the call has gone out, and what
    anyone published before then has reached this process's subscribers: at once for a
    bus that delivers as it publishes (in process), after a round trip for `RedisBus`
    (its `settle`). Unbounded: the caller bounds it."""
    settling = getattr(bus, "settle", None)
    if settling is not None:
        await settling()


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
    """Fan-out to the subscribers of this process, each through its own `Mailbox`: a burst
    of one change reaches each subscriber as one event, or a few, and publishing never
    blocks. A subscriber more than `buffer` distinct events behind loses the overflow (it
    is logged)."""

    def __init__(self, *, buffer: int = 64) -> None:
        if buffer < 1:
            raise ValueError("buffer must be at least 1")
        self._buffer = buffer
        self._subscribers: set[Mailbox] = set()
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
        for mailbox in self._subscribers:
            if not mailbox.put(event):
                logger.warning(
                    "listener too slow: change event dropped", extra={"kind": event.kind}
                )

    @asynccontextmanager
    async def subscribe(self) -> AsyncIterator[AsyncIterator[ChangeEvent]]:
        """`async with bus.subscribe() as events:` the events published while it is open."""
        self._loop.bind()
        mailbox = Mailbox(self._buffer)
        self._subscribers.add(mailbox)
        try:
            yield mailbox
        finally:
            self._subscribers.discard(mailbox)
            mailbox.close()

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Binds the bus to the running event loop; no background work."""
        self._loop.bind()
        yield


LIST_CHANGED_GAP: Final = 0.1
"""Least seconds between two events of one list-changed kind handed to one subscriber."""


_UNTHROTTLED: Final = frozenset({"resource_updated", "task_status"})
"""Kinds handed out as soon as they come: one event per URI or task, not per kind."""


class Mailbox:
    """One subscriber's pending events, iterated in the order they were first published.

    An event already pending is not added again, so each list-changed kind (and each
    updated URI) is pending at most once: a burst of one change is one event. A
    list-changed kind is also handed out at most once every `LIST_CHANGED_GAP` seconds;
    what comes meanwhile waits as that one pending event. So the last change is always
    followed by an event, and a burst over time becomes a few.

    A task's status event is pending at most once per task (the listener reads the latest
    status when it takes it) and is never dropped for `buffer`: so a task's terminal status
    always reaches a listener; there are at most as many as tasks kept."""

    __slots__ = ("_buffer", "_closed", "_next", "_pending", "_wake")

    def __init__(self, buffer: int) -> None:
        self._buffer = buffer
        self._pending: dict[ChangeEvent, None] = {}  # an ordered set
        self._next: dict[ChangeKind, float] = {}  # when a kind may be handed out again
        self._wake = anyio.Event()
        self._closed = False

    def close(self) -> None:
        """The subscription ended: what is pending is dropped, iterating ends."""
        self._closed = True
        self._pending.clear()
        self._wake.set()

    def receive_nowait(self) -> ChangeEvent:
        """The first pending event, whatever the gap (`anyio.WouldBlock` if none, and
        `anyio.ClosedResourceError` once closed): a stream taking over a subscription
        takes what its predecessor left unread."""
        if self._closed:
            raise anyio.ClosedResourceError
        if not self._pending:
            raise anyio.WouldBlock
        event = next(iter(self._pending))
        del self._pending[event]
        return event

    def put(self, event: ChangeEvent) -> bool:
        """Add `event` unless it is pending; False when `buffer` other events are."""
        if self._closed:
            return True
        if event not in self._pending:
            if len(self._pending) >= self._buffer and event.kind != "task_status":
                return False
            self._pending[event] = None
            self._wake.set()
        return True

    def __aiter__(self) -> Mailbox:
        return self

    async def __anext__(self) -> ChangeEvent:
        while not self._closed:
            now = anyio.current_time()
            due = math.inf
            for event in self._pending:
                at = self._next.get(event.kind, now)
                if at <= now:
                    del self._pending[event]
                    if event.kind not in _UNTHROTTLED:
                        self._next[event.kind] = now + LIST_CHANGED_GAP
                    return event
                due = min(due, at)
            self._wake = anyio.Event()
            with anyio.move_on_after(due - now):
                await self._wake.wait()
        raise StopAsyncIteration
