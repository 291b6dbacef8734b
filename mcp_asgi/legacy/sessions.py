"""2025-era sessions: opened by `initialize`, named by `Mcp-Session-Id`, held in memory.

A session is *in use* while any of its HTTP exchanges is open (a request being served, its
GET stream). It expires once it has gone unused for `ttl` seconds; expiry is checked when a
2025-era request arrives, so there is no background task. Ending a session (DELETE, expiry,
shutdown) cancels its requests still in flight with `session_closed` and ends its GET
stream; its id is then unknown, which clients are told with 404.

Sessions live in one process: behind several replicas, 2025-era clients need sticky routing
(on `Mcp-Session-Id`). 2026-07-28 clients need none.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import anyio

from mcp_asgi._loggers import sessions_logger as logger
from mcp_asgi.lifecycle.cancel import CancelReason
from mcp_asgi.lifecycle.scope import RequestScope
from mcp_asgi.protocol.jsonrpc import RequestId, is_request_id

Release = Callable[[], None]


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
    ) -> None:
        self.id = session_id
        self.principal = principal
        """Who opened the session (`mcp_asgi.auth.principal_key`); only they may use it."""
        self.protocol_version = protocol_version
        self.capabilities = capabilities
        self.client_info = client_info
        self.log_level: str | None = None
        self.subscriptions: set[str] = set()
        self.closed = anyio.Event()
        self._clock = clock
        self._last_used = clock()
        self._open = 0
        self._requests: dict[RequestId, RequestScope] = {}
        self._stream: anyio.Event | None = None

    # -- use ---------------------------------------------------------------------------

    def use(self) -> Release:
        """Mark one exchange open; the returned function marks it closed (idempotent)."""
        self._open += 1
        released = False

        def release() -> None:
            nonlocal released
            if not released:
                released = True
                self._open -= 1
                self._last_used = self._clock()

        return release

    def expired(self, ttl: float) -> bool:
        """Whether the session has gone unused for `ttl` seconds."""
        return self._open == 0 and self._clock() - self._last_used >= ttl

    # -- requests in flight ------------------------------------------------------------

    def in_flight(self, request_id: RequestId) -> bool:
        return request_id in self._requests

    def track(self, request_scope: RequestScope) -> None:
        """Register a request in flight, so `cancel` and `close` can reach it."""
        self._requests[request_scope.request.id] = request_scope
        if self.closed.is_set():
            request_scope.cancel(CancelReason.SESSION_CLOSED)

    def untrack(self, request_scope: RequestScope) -> None:
        if self._requests.get(request_scope.request.id) is request_scope:
            del self._requests[request_scope.request.id]

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

    def open_stream(self) -> anyio.Event:
        """Make a new GET stream the session's only one: the event returned is set when a
        newer stream replaces it (a message is never sent on two streams)."""
        if self._stream is not None:
            self._stream.set()
        self._stream = anyio.Event()
        return self._stream

    # -- the end -----------------------------------------------------------------------

    def close(self) -> None:
        """End the session: cancel its requests in flight, end its GET stream."""
        if self.closed.is_set():
            return
        self.closed.set()
        for request_scope in list(self._requests.values()):
            request_scope.cancel(CancelReason.SESSION_CLOSED)


class SessionStore:
    """The 2025-era sessions of one endpoint: at most `max_sessions`, expiring after `ttl`
    seconds unused."""

    def __init__(
        self, *, ttl: float, max_sessions: int, clock: Callable[[], float] = time.monotonic
    ) -> None:
        if ttl <= 0:
            raise ValueError("ttl must be positive")
        if max_sessions < 1:
            raise ValueError("max_sessions must be at least 1")
        self.ttl = ttl
        self.max_sessions = max_sessions
        self._clock = clock
        self._sessions: dict[str, LegacySession] = {}
        self._sweep_every = min(ttl / 2, 1.0)
        self._next_sweep = clock() + self._sweep_every

    def __len__(self) -> int:
        return len(self._sessions)

    def __iter__(self) -> Iterator[LegacySession]:
        return iter(list(self._sessions.values()))

    def create(
        self,
        *,
        protocol_version: str,
        capabilities: Mapping[str, Any],
        client_info: Mapping[str, Any] | None,
        principal: str | None = None,
    ) -> LegacySession | None:
        """Open a session with a fresh id, bound to `principal`; None when `max_sessions`
        are open and in use."""
        self._sweep(force=len(self._sessions) >= self.max_sessions)
        if len(self._sessions) >= self.max_sessions:
            logger.warning("session refused: %d sessions open", len(self._sessions))
            return None
        session = LegacySession(
            secrets.token_urlsafe(32),  # URL-safe base64: visible ASCII only
            protocol_version=protocol_version,
            capabilities=capabilities,
            client_info=client_info,
            clock=self._clock,
            principal=principal,
        )
        self._sessions[session.id] = session
        return session

    def get(self, session_id: str, principal: str | None = None) -> LegacySession | None:
        """The open session with this id, if `principal` opened it; None when unknown,
        ended, expired or another principal's (which is told apart from nothing)."""
        self._sweep()
        session = self._sessions.get(session_id)
        if session is not None and not _same(session.principal, principal):
            return None
        if session is not None and session.expired(self.ttl):
            self.close(session)
            return None
        return session

    def close(self, session: LegacySession) -> None:
        """End a session and forget its id."""
        self._sessions.pop(session.id, None)
        session.close()

    def close_all(self) -> None:
        """End every session (shutdown)."""
        for session in list(self._sessions.values()):
            self.close(session)

    def _sweep(self, *, force: bool = False) -> None:
        now = self._clock()
        if not force and now < self._next_sweep:
            return
        self._next_sweep = now + self._sweep_every
        expired = [s for s in self._sessions.values() if s.expired(self.ttl)]
        for session in expired:
            self.close(session)
        if expired:
            logger.debug("%d idle sessions expired", len(expired))


def _same(bound: str | None, principal: str | None) -> bool:
    return (
        bound is None
        if principal is None
        else (bound is not None and secrets.compare_digest(bound.encode(), principal.encode()))
    )
