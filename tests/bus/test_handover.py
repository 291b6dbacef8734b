"""The hand-over of a 2025-era session's GET stream between two replicas, driven step by
step in one process: each replica its own `RedisBus`, `RedisStore`, `SharedSessions` and
`ParkedStreams`, on a real redis-server; replica A's bus reaches Redis through a proxy
that holds what Redis sends it, so that a change reaches A only after A was told to stop.

The race (legacy.handover): a change published before B's GET stream subscribed, which
reaches B's process before then and A's only after B's `stream` control message. Without
the hand-over's settling, A stopped logging at the message and never logged the change, and
B, which had it before subscribing, never sent it: lost. The other side: a change published
once B subscribed, which A logs before it hears B (its store connection held): B has it
twice, replays it from A's log and drops its own copy."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from typing import Any

import anyio
import pytest

from mcp_asgi.bus.in_process import ChangeEvent
from mcp_asgi.bus.redis import RedisBus
from mcp_asgi.legacy.parked import ParkedStreams
from mcp_asgi.legacy.resumable import EventLog, LogSettings
from mcp_asgi.legacy.sessions import LegacySession, SessionStore
from mcp_asgi.legacy.shared import CONTROL, SharedSessions
from mcp_asgi.legacy.stream import serve_stream
from mcp_asgi.store.redis import RedisStore

from ..cut_proxy import CutProxy
from ..servers import RedisServer, wait_ready

pytestmark = pytest.mark.timeout(30)
SESSION = "handover-session"
SETTINGS = LogSettings(max_events=100, ttl=60.0, retry_ms=100)


@dataclass
class Replica:
    bus: RedisBus
    store: RedisStore
    session: LegacySession
    shared: SharedSessions
    parked: ParkedStreams

    async def get(
        self,
        log: EventLog,
        after: str | None,
        send: Callable[[Any], Awaitable[None]],
        gone: anyio.Event,
    ) -> None:
        """The session's GET stream here, until `gone` (the client went)."""

        async def receive() -> dict[str, Any]:
            await gone.wait()
            return {"type": "http.disconnect"}

        await serve_stream(
            self.session,
            self.bus,
            receive,
            send,
            keepalive_interval=0,
            log=log,
            replay_after=after,
            prime=after is None,
            parked=self.parked,
            opened=lambda: self.shared.stream_opened(self.session),
        )


@asynccontextmanager
async def replica(
    url: str, channel: str, *, bus_url: str | None = None, store_url: str | None = None
) -> AsyncIterator[Replica]:
    bus = RedisBus(bus_url or url, channel=channel, timeout=5.0)
    store = RedisStore(store_url or url)
    sessions = SessionStore(ttl=60, max_sessions=10)
    session = sessions.create(
        protocol_version="2025-11-25", capabilities={}, client_info=None, session_id=SESSION
    )
    assert session is not None
    shared, parked = SharedSessions(store, sessions), ParkedStreams(park_for=30)
    try:
        async with bus.running(), shared.running(), parked.running():
            yield Replica(bus, store, session, shared, parked)
    finally:
        await store.aclose()


class Sse:
    """What an ASGI GET stream sent: its SSE events (id, data)."""

    def __init__(self) -> None:
        self.text = ""
        self.changed = anyio.Event()

    async def send(self, message: Any) -> None:
        if message["type"] == "http.response.body":
            self.text += message.get("body", b"").decode().replace("\r\n", "\n")
            self.changed.set()
            self.changed = anyio.Event()

    def events(self) -> list[dict[str, str]]:
        found = []
        for block in self.text.split("\n\n"):
            fields = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
            if "id" in fields or "data" in fields:
                found.append(fields)
        return found

    def methods(self) -> list[str]:
        return [json.loads(e["data"])["method"] for e in self.events() if e.get("data")]

    async def until(self, method: str) -> None:
        with anyio.fail_after(15):
            while method not in self.methods():
                await self.changed.wait()


async def test_a_change_that_reaches_the_old_replica_after_the_take_over_is_not_lost(
    redis_server: RedisServer,
) -> None:
    """A's client goes (A parks its stream); a tools/list_changed reaches B's process,
    then B's GET stream resumes A's log; A hears B's `stream` message before the change.
    B's client still gets the change, once, before what comes later."""
    channel = "mcp_asgi:test:handover"
    async with AsyncExitStack() as stack:
        proxy = await stack.enter_async_context(CutProxy.running(redis_server.port))
        a = await stack.enter_async_context(
            replica(redis_server.url, channel, bus_url=f"redis://127.0.0.1:{proxy.port}/0")
        )
        b = await stack.enter_async_context(replica(redis_server.url, channel))
        other = await stack.enter_async_context(replica(redis_server.url, channel))
        await anyio.to_thread.run_sync(
            wait_ready,
            lambda: (
                redis_server.subscribers(channel) == 3
                and redis_server.subscribers("mcp_asgi:" + CONTROL) == 3
            ),
            "the replicas listening",
        )

        # A: the client opens its GET stream, gets the priming event, and goes
        log = EventLog.new(a.store, SESSION, "g", SETTINGS)
        first, gone = Sse(), anyio.Event()
        gone.set()  # the client goes after the priming event: the stream parks on A
        await a.get(log, None, first.send, gone)
        primed = first.events()[0]["id"]
        turn_a = a.session.stream
        assert turn_a is not None
        assert not turn_a.done.is_set()  # parked: A logs

        # the change: B's process has it before its GET stream subscribes; A's will later
        proxy.hold()
        async with b.bus.subscribe() as heard:
            await other.bus.publish(ChangeEvent("tools_list_changed"))
            with anyio.fail_after(10):
                assert (await anext(heard)).kind == "tools_list_changed"

        # B: the client's GET resumes A's log; A is told to stop before the change reaches it
        resumed = EventLog.of(b.store, SESSION, primed, SETTINGS)
        assert resumed is not None
        second, stay = Sse(), anyio.Event()
        async with anyio.create_task_group() as tg:
            tg.start_soon(b.get, resumed[0], resumed[1], second.send, stay)
            with anyio.fail_after(10):
                await turn_a.replaced.wait()
            proxy.release()
            await other.bus.publish(ChangeEvent("prompts_list_changed"))
            await second.until("notifications/prompts/list_changed")
            stay.set()
    assert second.methods() == [
        "notifications/tools/list_changed",
        "notifications/prompts/list_changed",
    ]
    ids = [e["id"] for e in second.events() if e.get("data")]
    assert len(set(ids)) == 2


async def test_a_change_both_replicas_have_during_the_take_over_is_sent_once(
    redis_server: RedisServer,
) -> None:
    """B's GET stream has subscribed and told the others; A, which hears that late (its
    store connection held), logs a tools/list_changed meanwhile, which B's subscription got
    as well. B's client gets it once."""
    channel = "mcp_asgi:test:handover-twice"
    async with AsyncExitStack() as stack:
        proxy = await stack.enter_async_context(CutProxy.running(redis_server.port))
        a = await stack.enter_async_context(
            replica(redis_server.url, channel, store_url=f"redis://127.0.0.1:{proxy.port}/0")
        )
        b = await stack.enter_async_context(replica(redis_server.url, channel))
        other = await stack.enter_async_context(replica(redis_server.url, channel))
        await anyio.to_thread.run_sync(
            wait_ready,
            lambda: (
                redis_server.subscribers(channel) == 3
                and redis_server.subscribers("mcp_asgi:" + CONTROL) == 3
            ),
            "the replicas listening",
        )
        log = EventLog.new(a.store, SESSION, "g", SETTINGS)
        first, gone = Sse(), anyio.Event()
        gone.set()
        await a.get(log, None, first.send, gone)
        primed = first.events()[0]["id"]
        turn_a = a.session.stream
        assert turn_a is not None

        proxy.hold()  # A hears nothing from its store: neither B's message nor its appends' OK
        resumed = EventLog.of(b.store, SESSION, primed, SETTINGS)
        assert resumed is not None
        second, stay = Sse(), anyio.Event()
        async with other.store.subscribe(CONTROL) as control, anyio.create_task_group() as tg:
            tg.start_soon(b.get, resumed[0], resumed[1], second.send, stay)
            with anyio.fail_after(10):
                assert b"stream" in await anext(control)  # B subscribed, then told
            await other.bus.publish(ChangeEvent("tools_list_changed"))
            logged = EventLog.of(other.store, SESSION, primed, SETTINGS)
            assert logged is not None

            async def in_the_log() -> bool:
                found = await other.store.read(log_name(logged[0]), logged[1])
                return any(b"tools/list_changed" in entry.data for entry in found)

            with anyio.fail_after(10):
                while not await in_the_log():  # noqa: ASYNC110 - A logged it (its OK held in the proxy)
                    await anyio.sleep(0.01)
            assert not turn_a.replaced.is_set()  # A has not heard B yet
            proxy.release()
            await other.bus.publish(ChangeEvent("prompts_list_changed"))
            await second.until("notifications/prompts/list_changed")
            stay.set()
    assert second.methods() == [
        "notifications/tools/list_changed",
        "notifications/prompts/list_changed",
    ]


def log_name(log: EventLog) -> str:
    """The name of a log in the store (what `EventLog` reads and appends to)."""
    return f"events:{{{SESSION}}}:{log.stream_id}"
