"""2025-era sessions: opened by `initialize`, named by `Mcp-Session-Id`, held in memory.

A session is *in use* while any of its HTTP exchanges is open (a request being served, its
GET stream). It expires once it has gone unused for `ttl` seconds; expiry is checked when a
2025-era request arrives, so there is no background task.

Bounds, so that no client can hold memory or lock others out:

- a session is *fresh* until it makes a request or opens its GET stream after
  `initialize`; a fresh session expires after `idle_ttl` seconds unused;
- a session is *idle* while nothing is open on it and none of its requests runs. When
  `max_sessions` are held, a new session takes the place of an idle one: the least
  recently used fresh one, else the least recently used of the others, which ends as if
  it had expired. A full table with none idle refuses `initialize` at once (O(1): the
  idle ones are kept in order);
- what a session stores is accounted in bytes of memory (`stored_bytes`: at most what the
  client info's objects take, `sizes.json_held`, and each subscribed URI's `uri_cost`),
  at most `max_bytes`, and it
  holds at most `max_subscriptions` URIs. Ending a session (DELETE, expiry,
shutdown) cancels its requests still in flight with `session_closed` and ends its GET
stream; its id is then unknown, which clients are told with 404.

Sessions live in one process; with a shared store (Redis) other replicas adopt them from
their records (legacy.shared), without one 2025-era clients need sticky routing (on
`Mcp-Session-Id`). 2026-07-28 clients need none.
"""

from __future__ import annotations

import math
import secrets
import sys
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final

import anyio

from mcp_asgi._loggers import sessions_logger as logger
from mcp_asgi.lifecycle.cancel import CancelReason
from mcp_asgi.lifecycle.scope import RequestScope
from mcp_asgi.limits import Hold
from mcp_asgi.protocol.jsonrpc import INVALID_PARAMS, McpError, RequestId, is_request_id
from mcp_asgi.protocol.message import IncomingMessage
from mcp_asgi.protocol.request import McpRequest

Release = Callable[[], None]
URI_OVERHEAD: Final = 100
"""Bytes accounted for each subscribed URI besides its `str` (its entry in the set)."""


@dataclass(frozen=True, slots=True)
class SessionBounds:
    """What one session may store."""

    max_subscriptions: int = 1000
    max_bytes: int = 256 * 1024


class StreamTurn:
    """One GET stream's turn as the session's stream (live, or logging while its client is
    away): `replaced` is set when a newer stream takes over, `done` when this one has
    stopped logging; `events` is its subscription to the bus (the next stream takes over
    what is left unread in it, on this replica); `away`: the newer stream is on another
    replica (this one logs what its subscription holds first: legacy.handover); `told`:
    the ids of the bus events the log it resumed already holds (not to be sent again)."""

    __slots__ = ("away", "done", "events", "replaced", "told")

    def __init__(self, events: Any = None) -> None:
        self.events = events
        self.replaced = anyio.Event()
        self.done = anyio.Event()
        self.away = False
        self.told: set[str] = set()


class LegacySession:
    """One 2025-era session: what `initialize` negotiated, and what is open on it."""

    def __init__(
        self,
        session_id: str,
        *,
        protocol_version: str,
        capabilities: Mapping[str, Any],
        client_info: Mapping[str, Any] | None,
        clock: Callable[[], float],
        principal: str | None = None,
        info_bytes: int = 0,
        bounds: SessionBounds = SessionBounds(),
        on_idle: Callable[[LegacySession, bool], None] | None = None,
    ) -> None:
        """`on_idle(session, idle)`: told when the session stops being `idle` (False) and
        when it is idle again (True)."""
        self.id = session_id
        self.principal = principal
        """Who opened the session (`mcp_asgi.auth.principal_key`); only they may use it."""
        self.protocol_version = protocol_version
        self.capabilities = capabilities
        self.client_info = client_info
        self.log_level: str | None = None
        self.subscriptions: set[str] = set()
        self.stored_bytes = info_bytes
        """Bytes accounted for what the session stores (client info, subscribed URIs)."""
        self.fresh = True
        """No request and no GET stream since `initialize` (see `SessionStore.prove`)."""
        self.closed = anyio.Event()
        self.record_touched = -math.inf
        """When this replica last wrote or refreshed the session's record in a shared store
        (anyio time; `legacy.shared`): kept here, it goes with the session, however the
        session ends (a table of ids beside it would outlive the sessions that expire)."""
        self._bounds = bounds
        self._clock = clock
        self._last_used = clock()
        self._open = 0
        self._on_idle = on_idle
        self._requests: dict[RequestId, RequestScope] = {}
        self._stream: StreamTurn | None = None

    # -- use ---------------------------------------------------------------------------

    def use(self) -> Release:
        """Mark one exchange open; the returned function marks it closed (idempotent)."""
        self._busy()
        self._open += 1
        released = False

        def release() -> None:
            nonlocal released
            if not released:
                released = True
                self._open -= 1
                self._last_used = self._clock()
                self._maybe_idle()

        return release

    @property
    def idle(self) -> bool:
        """Nothing open on the session and no request of it running (one may run on after
        its client left, with `legacy_disconnect_cancels=False`)."""
        return not self._open and not self._requests

    def _busy(self) -> None:
        if self.idle and self._on_idle is not None:
            self._on_idle(self, False)

    def _maybe_idle(self) -> None:
        if self.idle and self._on_idle is not None:
            self._on_idle(self, True)

    def subscribe(self, uri: str) -> None:
        """Add a subscription; `McpError` (-32602) past `max_subscriptions` or `max_bytes`."""
        if uri in self.subscriptions:
            return
        cost = uri_cost(uri)
        bounds = self._bounds
        if len(self.subscriptions) >= bounds.max_subscriptions:
            raise _full(f"at most {bounds.max_subscriptions} subscriptions per session")
        if self.stored_bytes + cost > bounds.max_bytes:
            raise _full(f"the session may store at most {bounds.max_bytes} bytes")
        self.subscriptions.add(uri)
        self.stored_bytes += cost

    def unsubscribe(self, uri: str) -> None:
        if uri in self.subscriptions:
            self.subscriptions.discard(uri)
            self.stored_bytes -= uri_cost(uri)

    def expired(self, ttl: float) -> bool:
        """Whether the session has gone unused for `ttl` seconds."""
        return self._open == 0 and self._clock() - self._last_used >= ttl

    # -- requests in flight ------------------------------------------------------------

    def in_flight(self, request_id: RequestId) -> bool:
        return request_id in self._requests

    def track(self, request_scope: RequestScope) -> None:
        """Register a request in flight, so `cancel` and `close` can reach it."""
        self._busy()
        self._requests[request_scope.request.id] = request_scope
        if self.closed.is_set():
            request_scope.cancel(CancelReason.SESSION_CLOSED)

    def untrack(self, request_scope: RequestScope) -> None:
        if self._requests.get(request_scope.request.id) is request_scope:
            del self._requests[request_scope.request.id]
            self._maybe_idle()

    def cancel(self, request_id: object) -> bool:
        """Cancel one of this session's requests (`notifications/cancelled`); False when
        no such request is in flight (unknown, finished, or another session's)."""
        if not is_request_id(request_id):
            return False
        request_scope = self._requests.get(request_id)
        if request_scope is None or request_scope.request.method == "initialize":
            return False
        request_scope.cancel(CancelReason.CLIENT_NOTIFICATION)
        return True

    # -- the GET stream ----------------------------------------------------------------

    @property
    def stream(self) -> StreamTurn | None:
        """The turn of the session's GET stream (here), if one opened."""
        return self._stream

    def open_stream(
        self, events: Any = None, *, away: bool = False
    ) -> tuple[StreamTurn, StreamTurn | None]:
        """Make a new GET stream the session's only one (a message is never sent on two
        streams): its turn, and the turn it replaces (now `replaced`), if any. `events`:
        the new stream's subscription to the bus, whose unread events the next stream
        takes over; `away`: the new stream is on another replica."""
        previous = self._stream
        self._stream = StreamTurn(events)
        if previous is not None:
            previous.away = away
            previous.replaced.set()
        return self._stream, previous

    # -- the end -----------------------------------------------------------------------

    def close(self) -> None:
        """End the session: cancel its requests in flight, end its GET stream."""
        if self.closed.is_set():
            return
        self.closed.set()
        for request_scope in list(self._requests.values()):
            request_scope.cancel(CancelReason.SESSION_CLOSED)


class SessionStore:
    """The 2025-era sessions of one endpoint: at most `max_sessions` (an idle one makes
    room for a new one), expiring after `ttl` seconds unused (`idle_ttl` while fresh)."""

    def __init__(
        self,
        *,
        ttl: float,
        max_sessions: int,
        idle_ttl: float | None = None,
        bounds: SessionBounds = SessionBounds(),
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if ttl <= 0 or (idle_ttl is not None and idle_ttl <= 0):
            raise ValueError("ttl and idle_ttl must be positive")
        if max_sessions < 1:
            raise ValueError("max_sessions must be at least 1")
        self.ttl = ttl
        self.idle_ttl = min(ttl, idle_ttl) if idle_ttl is not None else ttl
        self.max_sessions = max_sessions
        self.bounds = bounds
        self._clock = clock
        self._sessions: dict[str, LegacySession] = {}
        # the idle sessions, least recently used first: the fresh ones, and the others
        self._idle_fresh: OrderedDict[str, LegacySession] = OrderedDict()
        self._idle_used: OrderedDict[str, LegacySession] = OrderedDict()
        self._holds: dict[str, Hold] = {}
        self._refused = 0
        self._evicted = 0
        self._warn_after = -math.inf
        self._sweep_every = min(ttl / 2, 1.0)
        self._next_sweep = clock() + self._sweep_every

    def __len__(self) -> int:
        return len(self._sessions)

    def __iter__(self) -> Iterator[LegacySession]:
        return iter(list(self._sessions.values()))

    def __contains__(self, session_id: object) -> bool:
        return session_id in self._sessions

    def create(
        self,
        *,
        protocol_version: str,
        capabilities: Mapping[str, Any],
        client_info: Mapping[str, Any] | None,
        principal: str | None = None,
        info_bytes: int = 0,
        hold: Hold | None = None,
        session_id: str | None = None,
    ) -> LegacySession | None:
        """Open a session with a fresh id, bound to `principal`; when `max_sessions` are
        held, the least recently used idle session ends to make room (a fresh one first),
        and with none idle the result is None. `hold` (the client's count of sessions)
        is given back when the session ends, or at once when it is refused. `session_id`:
        the id of a session another replica opened (adopted from the shared store)."""
        self._sweep()
        if len(self._sessions) >= self.max_sessions and not self._evict():
            if hold is not None:
                hold.release()
            return None
        session = LegacySession(
            session_id or secrets.token_urlsafe(32),  # URL-safe base64: visible ASCII only
            protocol_version=protocol_version,
            capabilities=capabilities,
            client_info=client_info,
            clock=self._clock,
            principal=principal,
            info_bytes=info_bytes,
            bounds=self.bounds,
            on_idle=self._idle_changed,
        )
        self._sessions[session.id] = session
        self._idle_fresh[session.id] = session
        if hold is not None:
            self._holds[session.id] = hold
        return session

    def prove(self, session: LegacySession) -> None:
        """The session made a request or opened its stream: it is no longer fresh."""
        if session.fresh:
            session.fresh = False
            if self._idle_fresh.pop(session.id, None) is not None:
                self._idle_used[session.id] = session

    def get(self, session_id: str, principal: str | None = None) -> LegacySession | None:
        """The open session with this id, if `principal` opened it; None when unknown,
        ended, expired or another principal's (which is told apart from nothing)."""
        self._sweep()
        session = self._sessions.get(session_id)
        if session is not None and not _same(session.principal, principal):
            return None
        if session is not None and self._expired(session):
            self.close(session)
            return None
        return session

    def close(self, session: LegacySession) -> None:
        """End a session and forget its id."""
        self._sessions.pop(session.id, None)
        self._idle_fresh.pop(session.id, None)
        self._idle_used.pop(session.id, None)
        hold = self._holds.pop(session.id, None)
        if hold is not None:
            hold.release()
        session.close()

    def close_all(self) -> None:
        """End every session (shutdown)."""
        for session in list(self._sessions.values()):
            self.close(session)

    def _idle_changed(self, session: LegacySession, idle: bool) -> None:
        """Keep the idle sessions in order of last use (told by `LegacySession.use`)."""
        if self._sessions.get(session.id) is not session:
            return  # ended meanwhile
        order = self._idle_fresh if session.fresh else self._idle_used
        if idle:
            order[session.id] = session  # the most recently used: last
        else:
            order.pop(session.id, None)

    def _evict(self) -> bool:
        """End the least recently used idle session (a fresh one first) to make room;
        False when every session has an exchange open."""
        order = self._idle_fresh or self._idle_used
        if not order:  # O(1): no scan of the table
            self._refused += 1
            now = self._clock()
            if now >= self._warn_after:  # at most once a minute, with counts
                self._warn_after = now + 60.0
                logger.warning(
                    "sessions refused: all %d sessions in use (%d refusals, %d evicted)",
                    len(self._sessions),
                    self._refused,
                    self._evicted,
                )
            return False
        _, oldest = order.popitem(last=False)
        self._evicted += 1
        logger.debug("idle session evicted (fresh: %s)", oldest.fresh)
        self.close(oldest)
        return True

    def _expired(self, session: LegacySession) -> bool:
        return session.expired(self.idle_ttl if session.fresh else self.ttl)

    def _sweep(self) -> None:
        """Expire sessions: the idle fresh ones from the least recently used on, at every
        call (each one looked at is expired, but the first); all of them at most once a
        second."""
        while self._idle_fresh:
            oldest = next(iter(self._idle_fresh.values()))
            if not self._expired(oldest):
                break
            self.close(oldest)
        now = self._clock()
        if now < self._next_sweep:
            return
        self._next_sweep = now + self._sweep_every
        expired = [s for s in self._sessions.values() if self._expired(s)]
        for session in expired:
            self.close(session)
        if expired:
            logger.debug("%d idle sessions expired", len(expired))


def uri_cost(uri: str) -> int:
    """The bytes a subscribed URI is accounted: its `str` (4 bytes a character with an
    emoji in it), and `URI_OVERHEAD`."""
    return sys.getsizeof(uri) + URI_OVERHEAD


def _full(detail: str) -> McpError:
    return McpError(INVALID_PARAMS, f"Invalid params: {detail}", {"reason": "session_limit"})


def _same(bound: str | None, principal: str | None) -> bool:
    return (
        bound is None
        if principal is None
        else (bound is not None and secrets.compare_digest(bound.encode(), principal.encode()))
    )


def session_request(
    message: IncomingMessage, session: LegacySession, *, session_id: str | None
) -> McpRequest:
    """A 2025-era request as the handlers see it: the session's version, capabilities,
    client and log level stand in for 2026-07-28's `_meta` envelope. `session_id` names
    an HTTP session (stdio has none)."""
    meta = message.params.get("_meta")
    meta = meta if isinstance(meta, dict) else {}
    token = meta.get("progressToken")
    if message.id is None:
        raise ValueError("a notification is not a request")
    return McpRequest(
        id=message.id,
        method=message.method,
        params=message.params,
        protocol_version=session.protocol_version,
        client_capabilities=session.capabilities,
        client_info=session.client_info,
        log_level=session.log_level,
        progress_token=token if is_request_id(token) else None,
        meta=meta,
        session_id=session_id,
    )
