"""2025-era sessions cannot hold unbounded memory or lock new clients out (live uvicorn;
memory measured in-process with tracemalloc)."""

from __future__ import annotations

import sys
import tracemalloc
from typing import Any

import anyio
import pytest

from mcp_asgi.legacy.sessions import URI_OVERHEAD, LegacySession, SessionBounds, SessionStore
from mcp_asgi.limits import ClientLimits
from mcp_asgi.testing import McpResponse, serve

from ..helpers import Clock, Probe, eventually, wait_for
from ..servers import LATEST, LegacyClient, legacy_app

pytestmark = pytest.mark.anyio

UNLIMITED: dict[str, Any] = {
    "rate_limit": None,
    "max_requests_per_client": None,
    "max_sessions_per_client": None,
}


def capabilities_of(size: int) -> dict[str, Any]:
    """Capabilities of about `size` bytes of JSON, as many small keys (the costly shape)."""
    return {"experimental": {f"k{n:07d}": n for n in range(size // 19)}}


async def initialize(client: LegacyClient, capabilities: dict[str, Any]) -> McpResponse:
    body = client.body("initialize", {"protocolVersion": LATEST, "capabilities": capabilities})
    response = await client.post(body, {"content-type": "application/json"})
    if response.status == 200:
        client.session_id = response.headers["mcp-session-id"]
    return response


async def test_oversized_client_info_is_refused() -> None:
    """initialize with 200 KB of capabilities is 400 -32602 (session_limit), and no
    session is held."""
    app = legacy_app(Probe(), **UNLIMITED)
    with serve(app) as live:
        client = LegacyClient(live.url + "/mcp")
        response = await initialize(client, capabilities_of(200_000))
        assert app._legacy is not None
        assert len(app._legacy.sessions) == 0
    assert response.status == 400
    assert response.final["error"]["code"] == -32602
    assert response.final["error"]["data"]["reason"] == "session_limit"


async def test_session_memory_stays_under_its_bound() -> None:
    """10 sessions with the largest client info allowed, each then subscribed up to its
    byte bound: the process grows by less than 10 x (max_session_bytes + 64 KiB), the
    bound docs/deployment.md gives; subscriptions past the bounds are refused in-band."""
    max_bytes = 256 * 1024
    app = legacy_app(Probe(), max_session_bytes=max_bytes, **UNLIMITED)
    with serve(app) as live:
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            for n in range(10):
                client = LegacyClient(live.url + "/mcp")
                assert (await initialize(client, capabilities_of(4_000))).status == 200
                refused = None
                for m in range(1_000):
                    response = await client.call(
                        "resources/subscribe", {"uri": f"note://{n}-{m}-" + "x" * 16_000}
                    )
                    if "error" in response.final:
                        refused = response
                        break
                assert refused is not None
                assert refused.status == 200
                assert refused.final["error"]["data"]["reason"] == "session_limit"
            grown = tracemalloc.get_traced_memory()[0] - before
        finally:
            tracemalloc.stop()
        assert app._legacy is not None
        sessions = list(app._legacy.sessions)
    assert len(sessions) == 10
    assert all(s.stored_bytes <= max_bytes for s in sessions)
    assert grown < 10 * (max_bytes + 64 * 1024), grown


async def test_subscriptions_are_capped_per_session() -> None:
    """max_subscriptions=50: the 51st URI is refused; unsubscribing makes room."""
    with serve(legacy_app(Probe(), max_subscriptions=50, **UNLIMITED)) as live:
        client = LegacyClient(live.url + "/mcp")
        await client.initialize()
        for m in range(50):
            assert "result" in (await client.call("resources/subscribe", {"uri": f"n://{m}"})).final
        refused = await client.call("resources/subscribe", {"uri": "n://extra"})
        await client.call("resources/unsubscribe", {"uri": "n://0"})
        again = await client.call("resources/subscribe", {"uri": "n://extra"})
    assert refused.final["error"]["code"] == -32602
    assert "result" in again.final


async def test_a_flood_of_initialize_cannot_lock_new_clients_out() -> None:
    """max_sessions=200 filled by bare initialize calls: a real client still gets a
    session (a fresh one is evicted), and its session survives the rest of the flood."""
    app = legacy_app(Probe(), max_sessions=200, **UNLIMITED)
    with serve(app) as live:
        flood = LegacyClient(live.url + "/mcp")
        for _ in range(200):
            assert (await initialize(flood, {})).status == 200
        real = LegacyClient(live.url + "/mcp")
        await real.initialize()
        assert (await real.call("tools/list")).status == 200  # in use from now on
        for _ in range(300):
            assert (await initialize(flood, {})).status == 200
        assert (await real.call("tools/list")).status == 200


async def test_a_full_table_of_idle_sessions_does_not_lock_new_clients_out() -> None:
    """max_sessions=20 held by clients that each made one request and went idle (no
    initialize is fresh): a new client gets a session all the same, in the place of the
    least recently used one, whose next request is 404 as for an expired session; the
    others live on."""
    app = legacy_app(Probe(), max_sessions=20, **UNLIMITED)
    with serve(app) as live:
        idle = [LegacyClient(live.url + "/mcp") for _ in range(20)]
        for client in idle:
            await client.initialize()
            assert (await client.call("tools/list")).status == 200
        assert (await idle[0].call("tools/list")).status == 200  # used again: not the oldest
        newcomer = LegacyClient(live.url + "/mcp")
        await newcomer.initialize()
        assert (await newcomer.call("tools/list")).status == 200
        evicted = await idle[1].call("tools/list")
        kept = [(await client.call("tools/list")).status for client in (idle[0], *idle[2:])]
        assert app._legacy is not None
        assert len(app._legacy.sessions) == 20
    assert evicted.status == 404
    assert "unknown or expired session" in evicted.final["error"]["message"]
    assert kept == [200] * 19


async def test_a_full_table_of_sessions_in_use_is_503_with_retry_after() -> None:
    """max_sessions=2, both sessions holding their GET stream open: initialize is 503 with
    Retry-After; once one stream has closed, that session makes room."""
    with serve(legacy_app(Probe(), max_sessions=2, **UNLIMITED)) as live:
        first, second, third = (LegacyClient(live.url + "/mcp") for _ in range(3))
        await first.initialize()
        await second.initialize()
        async with second.get_stream():
            async with first.get_stream() as stream:
                refused = await initialize(third, {})
                await stream.drop()
            with anyio.fail_after(5):
                while (await initialize(third, {})).status != 200:  # noqa: ASYNC110
                    await anyio.sleep(0.01)  # the server has yet to see the stream close
            still = await second.call("tools/list")
        gone = await first.call("tools/list")
    assert refused.status == 503
    assert refused.headers["retry-after"] == "5"
    assert refused.final["error"]["data"]["reason"] == "sessions_full"
    assert still.status == 200
    assert gone.status == 404


async def test_a_session_whose_request_runs_on_without_its_client_is_not_evicted() -> None:
    """legacy_disconnect_cancels=False, max_sessions=1: the client of a slow call hangs up
    and the call runs on; its session is not idle, so initialize is 503 and the call is
    not cancelled. Once the call is done, the session makes room."""
    probe = Probe()
    app = legacy_app(probe, max_sessions=1, legacy_disconnect_cancels=False, **UNLIMITED)
    with serve(app) as live:
        client, newcomer = LegacyClient(live.url + "/mcp"), LegacyClient(live.url + "/mcp")
        await client.initialize()
        async with client.open("tools/call", {"name": "slow"}) as stream:
            await wait_for(probe.started)
            await stream.drop()
        assert app._legacy is not None
        (session,) = app._legacy.sessions
        await eventually(lambda: not session._open, what="the server to see the hang-up")
        refused = await initialize(newcomer, {})
        probe.release.set()
        await wait_for(probe.exited)
        await eventually(lambda: session.idle, what="the call to end")
        admitted = await initialize(newcomer, {})
    assert refused.status == 503
    assert probe.reason is None
    assert probe.notes == ["finished"]
    assert admitted.status == 200


def test_the_least_recently_used_idle_session_is_evicted_and_closed() -> None:
    """Full table: a fresh idle session goes first, then the session idle the longest
    (its last exchange closed first); one with an exchange open never goes. The evicted
    session is closed and its client's hold given back."""
    limits = ClientLimits(rate=None, burst=1, requests=None, listen_streams=None, sessions=9)
    store = SessionStore(ttl=1800, max_sessions=3, clock=Clock(0.0))

    def create(proven: bool = True) -> LegacySession | None:
        session = store.create(
            protocol_version=LATEST,
            capabilities={},
            client_info=None,
            hold=limits.hold("sessions", "c"),
        )
        if session is not None and proven:
            store.prove(session)
        return session

    a, b, busy = create(), create(), create()
    assert a is not None
    assert b is not None
    assert busy is not None
    busy.use()  # a GET stream open, say
    a.use()()  # a request came and went: b is now the least recently used
    fresh = create()  # room made by b
    assert fresh is not None
    assert store.get(b.id) is None
    assert b.closed.is_set()
    store.prove(fresh)
    fresh.use()()  # a used since, fresh more recently: a goes next
    assert create(proven=False) is not None
    assert store.get(a.id) is None
    assert a.closed.is_set()
    last = create()  # the unproven (fresh) one went first
    assert last is not None
    assert [s.id for s in store] == [busy.id, fresh.id, last.id]
    assert limits.held("sessions", "c") == 3


def test_a_full_table_of_sessions_in_use_refuses_at_once() -> None:
    """With every session in real use, initialize is refused without a scan: the clock
    (read once per session looked at) is read as often with 10,000 sessions as with 10."""

    def clock_reads_per_refusal(count: int) -> int:
        clock = CountingClock()
        store = SessionStore(ttl=1800, max_sessions=count, clock=clock)
        for _ in range(count):
            session = store.create(protocol_version=LATEST, capabilities={}, client_info=None)
            assert session is not None
            store.prove(session)
            session.use()  # an exchange open: not idle
        clock.reads = 0
        assert store.create(protocol_version=LATEST, capabilities={}, client_info=None) is None
        return clock.reads

    assert clock_reads_per_refusal(10_000) == clock_reads_per_refusal(10) <= 3


class CountingClock:
    """A clock that stands still and counts how often it is read."""

    def __init__(self) -> None:
        self.reads = 0

    def __call__(self) -> float:
        self.reads += 1
        return 100.0


def test_fresh_sessions_expire_after_the_idle_ttl() -> None:
    """A session with no request since initialize expires after idle_ttl; one in use
    lives for ttl."""
    clock = Clock(0.0)
    store = SessionStore(ttl=1800, max_sessions=10, idle_ttl=60, clock=clock)
    fresh = store.create(protocol_version=LATEST, capabilities={}, client_info=None)
    used = store.create(protocol_version=LATEST, capabilities={}, client_info=None)
    assert fresh is not None
    assert used is not None
    store.prove(used)
    clock.now += 61
    assert store.get(fresh.id) is None
    assert store.get(used.id) is used
    clock.now += 1800
    assert store.get(used.id) is None


def test_stored_bytes_follow_subscriptions() -> None:
    """Each URI costs its str plus URI_OVERHEAD (4 bytes a character next to an emoji);
    unsubscribing gives it back."""
    store = SessionStore(ttl=10, max_sessions=1, bounds=SessionBounds(max_bytes=10_000))
    session = store.create(
        protocol_version=LATEST, capabilities={}, client_info=None, info_bytes=500
    )
    assert session is not None
    session.subscribe("a://1")
    session.subscribe("a://1")
    assert session.stored_bytes == 500 + sys.getsizeof("a://1") + URI_OVERHEAD
    session.subscribe("a://\U0001f600" + "x" * 1000)
    assert session.stored_bytes > 500 + 4 * 1000 + 2 * URI_OVERHEAD
    session.unsubscribe("a://1")
    session.unsubscribe("a://\U0001f600" + "x" * 1000)
    assert session.stored_bytes == 500


async def test_anyio_is_used() -> None:
    """(keeps the anyio marker honest for the sync tests above)"""
    await anyio.lowlevel.checkpoint()
