"""SessionStore and LegacySession on a fake clock: expiry after last use, the limit, ids."""

from __future__ import annotations

import gc
import sys

import pytest

from mcp_asgi.legacy import SessionStore
from mcp_asgi.legacy.era import is_session_request, negotiate_version
from mcp_asgi.legacy.shared import SharedSessions
from mcp_asgi.protocol.headers import RequestHeaders
from mcp_asgi.store import MemoryStore

from ..helpers import Clock


def make_store(clock: Clock, *, ttl: float = 10.0, max_sessions: int = 3) -> SessionStore:
    return SessionStore(ttl=ttl, max_sessions=max_sessions, clock=clock)


def open_session(store: SessionStore, *, used: bool = True) -> str:
    """A new session; `used`: it has made a request since initialize (not fresh)."""
    session = store.create(protocol_version="2025-11-25", capabilities={}, client_info=None)
    assert session is not None
    if used:
        store.prove(session)
    return session.id


async def test_a_session_expires_ttl_seconds_after_its_last_use() -> None:
    """Unused for ttl seconds, a session is gone; an open exchange keeps it alive."""
    clock = Clock(100.0)
    store = make_store(clock)
    idle, busy = open_session(store), open_session(store)
    session = store.get(busy)
    assert session is not None
    release = session.use()
    clock.now += 11
    assert store.get(idle) is None
    assert store.get(busy) is session
    release()
    release()  # idempotent
    clock.now += 9
    assert store.get(busy) is session
    clock.now += 1
    assert store.get(busy) is None
    assert session.closed.is_set()
    assert len(store) == 0


async def test_the_limit_counts_open_sessions_and_sweeps_expired_ones() -> None:
    """At max_sessions, with every session in use, a new session is refused, unless an
    expired one can make room."""
    clock = Clock(100.0)
    store = make_store(clock, max_sessions=2)
    first, second = store.get(open_session(store)), store.get(open_session(store))
    assert first is not None
    assert second is not None
    first.use()
    release = second.use()
    assert store.create(protocol_version="2025-11-25", capabilities={}, client_info=None) is None
    release()
    clock.now += 11
    third = store.create(protocol_version="2025-06-18", capabilities={}, client_info=None)
    assert third is not None
    assert len(store) == 2
    assert store.get(first.id) is first
    assert second.closed.is_set()


class SharedMemory(MemoryStore):
    """A memory store that calls itself shared, as Redis is between replicas."""

    shared = True


async def test_with_a_shared_store_an_evicted_session_is_adopted_again() -> None:
    """With a shared store, eviction frees this replica's place only: the session's record
    stays, and its next request adopts it again (in the place of an idle one)."""
    store = make_store(Clock(100.0), max_sessions=1)
    shared = SharedSessions(SharedMemory(), store)
    first = store.get(open_session(store))
    assert first is not None
    await shared.created(first)
    second = store.create(protocol_version="2025-11-25", capabilities={}, client_info=None)
    assert second is not None
    assert first.closed.is_set()
    again = await shared.adopt(first.id, None)
    assert again is not None
    assert again is not first
    assert again.id == first.id
    assert second.closed.is_set()


class Forgetful(SharedMemory):
    """A shared store that keeps nothing (what the replica itself holds is what counts)."""

    async def set(self, key: str, value: bytes, *, ttl: float | None = None) -> None:
        return None


async def test_a_session_that_expires_leaves_nothing_behind_with_a_shared_store() -> None:
    """Sessions that expire (or are evicted) rather than being ended by DELETE leave
    nothing in the replica: the time it last refreshed a session's shared record goes with
    the session. Counted in the interpreter's allocated blocks over 2,000 sessions opened,
    recorded and expired; a table of ids beside the sessions kept two blocks a session
    (the id, the time) until it reached twice `max_sessions` (issue 28: the soak's rise,
    its abandoned sessions)."""
    clock = Clock(100.0)
    store = make_store(clock, ttl=10.0, max_sessions=5_000)
    shared = SharedSessions(Forgetful(), store)

    async def sessions(count: int) -> None:
        for _ in range(count):
            session = store.create(protocol_version="2025-11-25", capabilities={}, client_info=None)
            assert session is not None
            await shared.created(session)
            clock.now += 11  # expired: the next create sweeps it away

    await sessions(200)  # warm: free lists, the table's dicts at their size
    gc.collect()
    before = sys.getallocatedblocks()
    await sessions(2_000)
    gc.collect()
    assert len(store) == 1
    assert sys.getallocatedblocks() - before < 400, sys.getallocatedblocks() - before


async def test_session_ids_are_unique_and_visible_ascii() -> None:
    """Ids come from a CSPRNG, URL-safe: only visible ASCII characters."""
    store = make_store(Clock(100.0), max_sessions=100)
    ids = {open_session(store) for _ in range(50)}
    assert len(ids) == 50
    assert all(len(i) >= 32 and all(0x21 <= ord(c) <= 0x7E for c in i) for i in ids)


async def test_close_all_ends_every_session() -> None:
    """Shutdown: every session is ended and forgotten."""
    store = make_store(Clock(100.0))
    sessions = [store.get(open_session(store)) for _ in range(3)]
    store.close_all()
    assert len(store) == 0
    assert all(s is not None and s.closed.is_set() for s in sessions)


def test_bad_limits_are_refused() -> None:
    """A non-positive ttl or limit is a configuration error."""
    with pytest.raises(ValueError, match="ttl"):
        SessionStore(ttl=0, max_sessions=1)
    with pytest.raises(ValueError, match="max_sessions"):
        SessionStore(ttl=1, max_sessions=0)


@pytest.mark.parametrize(
    ("requested", "answered"),
    [("2025-03-26", "2025-03-26"), ("2026-07-28", "2025-11-25"), (None, "2025-11-25")],
)
def test_version_negotiation(requested: object, answered: str) -> None:
    """initialize gets the client's revision if served, else the latest 2025 one."""
    assert negotiate_version(requested) == answered


@pytest.mark.parametrize(
    ("method", "headers", "expected"),
    [
        ("GET", [(b"mcp-session-id", b"x")], True),
        ("DELETE", [(b"mcp-session-id", b"x")], True),
        ("GET", [], False),
        ("POST", [(b"mcp-session-id", b"x")], False),
    ],
)
def test_session_requests(method: str, headers: list[tuple[bytes, bytes]], expected: bool) -> None:
    """Only GET and DELETE naming a session are 2025-era session requests."""
    asgi_scope = {"method": method, "headers": headers}
    assert is_session_request(asgi_scope, RequestHeaders.of(asgi_scope)) is expected
