"""`RedisBus`: change notifications shared by every process and replica through Redis pub/sub.

Install with ``pip install 'mcp-asgi[redis]'`` (redis-py ≥ 5, asyncio API).

Per process: one background task holds one subscription to the channel and fans incoming
events out to the local listen streams (an `InProcessBus`), and one publisher connection
sends this process's events. A publish is delivered to the local streams at once and put
in a bounded outbox; it never waits on Redis, so a request path never blocks on it.

Every command waits at most `timeout` seconds (connecting included), and the subscription
must be confirmed within it: a Redis that is down, restarting or paused (SIGSTOP) counts as
lost once that passes, or once a PING sent after `ping_interval` seconds of silence is not
answered within it. When Redis goes away, the listen streams stay open. The outage is
logged (WARNING once, INFO on recovery) and counted (`mcp_asgi.bus.outages`); the task
reconnects with exponential backoff and resubscribes; the outbox keeps what was published
meanwhile (the oldest events are dropped past `outbox` entries, counted in
`mcp_asgi.bus.dropped`) and sends it on reconnection. Events from other processes
published during the outage arrive when those processes flush their own outboxes; nothing
is replayed beyond that.

On a Redis Cluster (a `redis+cluster://` URL) the channel is sharded: events are published
with SPUBLISH and heard with SSUBSCRIBE on the master that owns the channel's hash slot
only, instead of crossing the cluster bus to every node. When that slot moves (a failover,
a resharding), Redis ends the subscription; that counts as an outage like any other, and
the bus subscribes again on the new owner.

Each event carries an id (`ChangeEvent.id`: this process's `origin` and a count), and
`settle()` publishes a marker through the outbox and waits for it to come back: one channel
is delivered in order, so by then this process's earlier events are out and everyone's
earlier events are in (a 2025-era GET stream handed over between replicas relies on both).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import itertools
import json
import random
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, Final

import anyio
from opentelemetry import metrics

from mcp_asgi._loggers import bus_logger as logger
from mcp_asgi._loggers import redacted_url
from mcp_asgi._redis import Channels, Listener, check_url, connect
from mcp_asgi._version import __version__
from mcp_asgi.bus.in_process import CHANGE_KINDS, ChangeEvent, InProcessBus, LoopBinding
from mcp_asgi.telemetry import names as a

DEFAULT_CHANNEL: Final = "mcp_asgi:changes"


class RedisBus:
    """A `NotificationBus` over Redis pub/sub (`redis://`, `rediss://` or `unix://` URL),
    or sharded pub/sub on a Redis Cluster (`redis+cluster://`, `rediss+cluster://`).

    - `url`: the Redis server, or nodes of the cluster (`host:port` separated by commas,
      the first that answers is asked); `channel`: the pub/sub channel every process
      shares.
    - `buffer`: how many events a local listen stream may fall behind before it loses some.
    - `outbox`: how many events to keep for Redis during an outage (the oldest are dropped
      beyond, counted in `mcp_asgi.bus.dropped`).
    - `reconnect_initial`, `reconnect_max`: the bounds (seconds) of the exponential backoff
      between reconnection attempts.
    - `ping_interval`: seconds of silence after which the subscription connection is
      pinged.
    - `timeout`: seconds a command, a connection, a subscription's confirmation or the
      answer to a PING may take before Redis counts as lost.
    - `meter_provider`: for the bus metrics; default: the global one.

    Raises `ImportError` when redis-py is not installed (`mcp-asgi[redis]`).
    """

    def __init__(
        self,
        url: str = "redis://127.0.0.1:6379/0",
        *,
        channel: str = DEFAULT_CHANNEL,
        buffer: int = 64,
        outbox: int = 1000,
        reconnect_initial: float = 0.1,
        reconnect_max: float = 5.0,
        ping_interval: float = 15.0,
        timeout: float = 2.0,
        meter_provider: metrics.MeterProvider | None = None,
    ) -> None:
        try:
            import redis.asyncio  # noqa: F401
        except ImportError as exc:  # pragma: no cover - depends on the install
            raise ImportError("RedisBus needs redis-py: pip install 'mcp-asgi[redis]'") from exc
        if not channel:
            raise ValueError("channel must not be empty")
        if outbox < 1 or reconnect_initial <= 0 or reconnect_max < reconnect_initial:
            raise ValueError("outbox must be ≥ 1 and 0 < reconnect_initial ≤ reconnect_max")
        if timeout <= 0:
            raise ValueError("timeout must be > 0")
        self.url = url
        """The Redis URL."""
        self.channel = channel
        """The pub/sub channel."""
        self.origin = uuid.uuid4().hex
        """This process's id on the channel (it skips its own events coming back)."""
        self._local = InProcessBus(buffer=buffer)
        self._loop = LoopBinding()
        self._outbox: collections.deque[bytes] = collections.deque(maxlen=outbox)
        self._count = itertools.count(1)  # the events' and markers' ids
        self._settling: dict[int, anyio.Event] = {}
        self._wake: anyio.Event | None = None
        self._initial = reconnect_initial
        self._max = reconnect_max
        self._ping = ping_interval
        self.timeout = timeout
        """Seconds a command may take before Redis counts as lost."""
        self._outage_since: float | None = None
        self._running = 0
        self._lazy_task: asyncio.Task[None] | None = None
        self.connected = False
        """Whether the subscription connection to Redis is up right now."""
        meter = metrics.get_meter("mcp_asgi", __version__, meter_provider, schema_url=a.SCHEMA_URL)
        self._outages = meter.create_counter(
            a.BUS_OUTAGES, unit="{outage}", description="Lost connections to the bus broker."
        )
        self._dropped = meter.create_counter(
            a.BUS_DROPPED, unit="{event}", description="Change events dropped from a full outbox."
        )

    @property
    def subscriber_count(self) -> int:
        """How many local subscriptions are open."""
        return self._local.subscriber_count

    # -- NotificationBus -----------------------------------------------------------------

    async def publish(self, event: ChangeEvent) -> None:
        """Deliver `event` to this process's subscribers at once and queue it for Redis;
        never waits on the network."""
        self._ensure_running()
        self._loop.call(lambda: self._publish(event))

    def publish_nowait(self, event: ChangeEvent) -> None:
        """`publish` for sync code, from any thread; a no-op before the bus has an event
        loop."""
        self._loop.call(lambda: self._publish(event))

    @asynccontextmanager
    async def subscribe(self) -> AsyncIterator[AsyncIterator[ChangeEvent]]:
        """`async with bus.subscribe() as events:` the events of every process (this one's
        included) published while it is open."""
        self._ensure_running()
        async with self._local.subscribe() as events:
            yield events

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """The background task (subscription, outbox, reconnection) for as long as the
        context is open; the middleware enters it around the app's lifespan. Without a
        lifespan, the task is started lazily (asyncio only) and `aclose()` stops it."""
        self._loop.bind()
        self._running += 1
        try:
            if self._running > 1 or self._lazy_task is not None:
                yield
                return
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(self._run)
                try:
                    yield
                finally:
                    tasks.cancel_scope.cancel()
        finally:
            self._running -= 1

    async def settle(self) -> None:
        """Return once this process's events published before the call have been sent to
        Redis and every event published on the channel before then has been delivered
        here (a marker sent through the outbox came back). Waits through an outage:
        the caller bounds it."""
        self._ensure_running()
        mark = next(self._count)
        back = self._settling[mark] = anyio.Event()
        self._queue({"o": self.origin, "b": mark})
        try:
            await back.wait()
        finally:
            del self._settling[mark]

    async def aclose(self) -> None:
        """Stop a listener that was started lazily (`running()` stops its own)."""
        task, self._lazy_task = self._lazy_task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    # -- internals -----------------------------------------------------------------------

    def _publish(self, event: ChangeEvent) -> None:
        if event.id is None:
            event = dataclasses.replace(event, id=f"{self.origin}:{next(self._count)}")
        self._local.deliver(event)
        self._queue({"o": self.origin, "k": event.kind, "u": event.uri, "i": event.id})

    def _queue(self, message: dict[str, Any]) -> None:
        if len(self._outbox) == self._outbox.maxlen:
            self._dropped.add(1)
            logger.warning("bus outbox full: oldest change event dropped")
        self._outbox.append(json.dumps(message, separators=(",", ":")).encode())
        if self._wake is not None:
            self._wake.set()

    def _ensure_running(self) -> None:
        """Without `running()` (no lifespan), start the background task lazily (asyncio)."""
        self._loop.bind()
        if self._running or self._lazy_task is not None:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            raise RuntimeError(
                "RedisBus needs a home for its listener: enter `bus.running()` (the "
                "middleware does so around the app's lifespan)"
            ) from None
        self._lazy_task = loop.create_task(self._run())

    async def _run(self) -> None:
        delay = self._initial
        while True:
            try:
                await self._session()
            except Exception as exc:
                if self.connected:
                    delay = self._initial
                self.connected = False
                if self._outage_since is None:
                    self._outage_since = anyio.current_time()
                    self._outages.add(1)
                    cause = _leaf(exc)
                    logger.warning(
                        "bus: lost Redis at %s (%s: %s); change notifications from other "
                        "processes are paused, reconnecting",
                        redacted_url(self.url),
                        type(cause).__name__,
                        cause,
                        extra={"bus_origin": self.origin},
                    )
                else:
                    logger.debug("bus: Redis still unreachable", exc_info=True)
                await anyio.sleep(delay * random.uniform(0.5, 1.0))
                delay = min(delay * 2, self._max)
            else:  # pragma: no cover - _session only returns by raising
                return

    async def _session(self) -> None:
        from redis.asyncio.retry import Retry
        from redis.backoff import NoBackoff

        options = {
            "retry": Retry(NoBackoff(), 0),
            "socket_timeout": self.timeout,
            "socket_connect_timeout": self.timeout,
        }
        client = connect(self.url, **options)
        channels = Channels(client, self.url, **options)
        listener = channels.listener(self.channel)
        try:
            with anyio.fail_after(self.timeout):
                await listener.open(self.timeout)
            self._connected()
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(self._send_outbox, channels)
                await self._receive(listener)
        finally:
            with anyio.CancelScope(shield=True), anyio.move_on_after(1):
                await listener.aclose()
                await channels.aclose()
                await client.aclose()

    def _connected(self) -> None:
        self.connected = True
        if self._outage_since is not None:
            logger.info(
                "bus: Redis reachable again after %.1fs; resubscribed",
                anyio.current_time() - self._outage_since,
                extra={"bus_origin": self.origin},
            )
            self._outage_since = None

    async def _receive(self, listener: Listener) -> None:
        pinged = False
        while True:
            wait = self.timeout if pinged else self._ping
            message = await listener.get_message(timeout=wait)
            if message is None:
                if pinged:
                    raise TimeoutError(f"no answer to PING within {self.timeout:g}s")
                await listener.ping()
                pinged = True
                continue
            pinged = False
            if message.get("type") != "message":
                continue
            event = self._decode(message.get("data"))
            if event is not None:
                self._local.deliver(event)

    async def _send_outbox(self, channels: Channels) -> None:
        while True:
            self._wake = anyio.Event()
            while self._outbox:
                item = self._outbox[0]
                await channels.publish(self.channel, item)
                if self._outbox and self._outbox[0] is item:
                    self._outbox.popleft()
            await self._wake.wait()

    def _decode(self, data: Any) -> ChangeEvent | None:
        try:
            message = json.loads(data)
            if message["o"] == self.origin:
                back = self._settling.get(message.get("b"))  # our marker: settled
                if back is not None:
                    back.set()
                return None
            if "b" in message:
                return None  # another process's marker
            if message["k"] not in CHANGE_KINDS:
                raise ValueError(message["k"])
            uri, id_ = message.get("u"), message.get("i")
            return ChangeEvent(
                message["k"],
                uri if isinstance(uri, str) else None,
                id=id_ if isinstance(id_, str) else None,
            )
        except (ValueError, KeyError, TypeError):
            logger.warning("bus: ignored a malformed message on %s", self.channel)
            return None


def _leaf(exc: BaseException) -> BaseException:
    """The first real error inside (nested) exception groups."""
    while isinstance(getattr(exc, "exceptions", None), tuple) and exc.exceptions:  # type: ignore[attr-defined]
        exc = exc.exceptions[0]  # type: ignore[attr-defined]
    return exc


def bus_from_url(
    url: str,
    *,
    channel: str = DEFAULT_CHANNEL,
    timeout: float = 2.0,
    reconnect_max: float = 5.0,
    meter_provider: metrics.MeterProvider | None = None,
) -> RedisBus:
    """The bus named by `McpSettings.bus_url` (`timeout`, `reconnect_max`: its
    `redis_timeout`, `redis_retry_max`). `ValueError` for a URL that names no Redis: one
    of `redis://`, `rediss://`, `unix://`, `redis+cluster://`, `rediss+cluster://` (a
    cluster's names nodes, and database 0 or none)."""
    check_url(url, "bus_url")
    return RedisBus(
        url,
        channel=channel,
        timeout=timeout,
        reconnect_max=reconnect_max,
        meter_provider=meter_provider,
    )
