"""2025-era sessions across replicas, through a shared store (Redis, with `bus_url`).

::

    replica A: initialize ─► session:<id> = {version, capabilities, clientInfo, principal}
                             (TTL session_ttl, refreshed as the session is used)
    replica B: a request naming <id> ─► not known here ─► the record ─► adopted
    replica B: notifications/cancelled, DELETE ─► sessions:control ─► every replica
               cancels the request / ends the session where it runs
    replica B: a GET stream opens ─► sessions:control ─► the other replicas end theirs
               (live, or logging for a client that went away: legacy.parked), and B
               resumes their log where they stopped (legacy.handover)

A replica that does not know a session and finds no record answers 404 (the client
initializes again). Without a shared store (memory) nothing here runs: sessions live in
their process. Ending a session here (DELETE) removes its record; a session that expires,
is evicted to make room (`max_sessions`) or is shut down on one replica is only forgotten
there: its record lives on until its TTL, and its next request, here or elsewhere, adopts
it again (a replica's idle copy may be in use on another replica, so it is not ended
everywhere). What a session does after `initialize` (its log level, its
subscriptions) stays with the replica that was told.

The store out of reach (`StoreUnavailable`, logged once by the store): a new session is
served by this replica only (its record is not written later), a record is not refreshed,
a cancel or a session's end reaches this replica only; a request naming a session this
replica does not know gets 503 (the middleware), since its record cannot be read. The
control channel is listened to again as soon as the store answers.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any, Final

import anyio

from mcp_asgi._loggers import sessions_logger as logger
from mcp_asgi.legacy.sessions import LegacySession, SessionStore
from mcp_asgi.protocol.jsonrpc import is_request_id
from mcp_asgi.protocol.sizes import json_held
from mcp_asgi.store import StateStore, StoreUnavailable, slot_tag

CONTROL: Final = "sessions:control"


class SharedSessions:
    """The records of a store's 2025-era sessions and the control channel between replicas."""

    def __init__(self, store: StateStore, sessions: SessionStore) -> None:
        self._store = store
        self._sessions = sessions
        self._me = secrets.token_hex(8)  # this replica, in what it publishes

    @property
    def active(self) -> bool:
        """Whether other replicas share the store (otherwise nothing is written)."""
        return self._store.shared

    async def created(self, session: LegacySession) -> None:
        """Record a session `initialize` opened here."""
        if not self.active:
            return
        record = {
            "version": session.protocol_version,
            "capabilities": session.capabilities,
            "clientInfo": session.client_info,
            "principal": session.principal,
        }
        with _unless_unreachable("a new session is served by this replica only"):
            await self._store.set(_key(session.id), json.dumps(record).encode(), ttl=self._ttl)
        session.record_touched = anyio.current_time()

    async def touch(self, session: LegacySession) -> None:
        """The session is in use: refresh its record's time to live (at most every quarter
        of it, per replica)."""
        if not self.active:
            return
        now = anyio.current_time()
        if now - session.record_touched < self._ttl / 4:
            return
        session.record_touched = now
        with _unless_unreachable("a session record is not refreshed"):
            data = await self._store.get(_key(session.id))
            if data is not None:
                await self._store.set(_key(session.id), data, ttl=self._ttl)

    async def adopt(self, session_id: str, principal: str | None) -> LegacySession | None:
        """A session another replica opened, from its record; None when there is none."""
        if not self.active or len(session_id) > 128 or not _taggable(session_id):
            return None
        data = await self._store.get(_key(session_id))
        if data is None:
            return None
        record = json.loads(data)
        found = self._sessions.get(session_id, principal)  # adopted meanwhile
        if found is None:
            capabilities, client_info = record.get("capabilities") or {}, record.get("clientInfo")
            found = self._sessions.create(
                protocol_version=record["version"],
                capabilities=capabilities,
                client_info=client_info,
                principal=record.get("principal"),
                info_bytes=json_held(capabilities, client_info),
                session_id=session_id,
            )
            if found is None:
                return None  # this replica is full: 503 is not ours to give, 404 is safe
            self._sessions.prove(found)
            found = self._sessions.get(session_id, principal)  # its principal's only
            logger.debug("session adopted from the shared store")
        return found

    async def cancel(self, session: LegacySession, request_id: object) -> None:
        """Cancel a request of the session on whichever replica runs it."""
        if self.active and is_request_id(request_id):
            with _unless_unreachable("a cancel is not told to the other replicas"):
                await self._publish("cancel", session, request=request_id)

    async def stream_opened(self, session: LegacySession) -> None:
        """A GET stream of the session opened here: the other replicas end theirs."""
        if self.active:
            with _unless_unreachable("the other replicas' streams of a session stay open"):
                await self._publish("stream", session)

    async def close(self, session: LegacySession) -> None:
        """End the session everywhere: its record goes, every replica ends it."""
        if self.active:
            with _unless_unreachable("a session ends on this replica only"):
                await self._store.delete(_key(session.id))
                await self._publish("close", session)

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Listen to the other replicas' cancels and session ends while open (the app's
        lifespan)."""
        if not self.active:
            yield
            return
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._listen)
            try:
                yield
            finally:
                tg.cancel_scope.cancel()

    async def _listen(self) -> None:
        while True:
            try:
                async with self._store.subscribe(CONTROL) as messages:
                    async for data in messages:
                        self._act(data)
            except StoreUnavailable:  # logged by the store; it says when to try again
                logger.debug("session control channel: the store is unreachable")
            except Exception as error:
                logger.warning("session control channel lost: %s", type(error).__name__)
            await anyio.sleep(0.5)

    def _act(self, data: bytes) -> None:
        try:
            message: dict[str, Any] = json.loads(data)
            session = self._sessions.get(message["session"], message.get("principal"))
        except (ValueError, KeyError, TypeError):
            return
        if session is None:
            return  # not here
        if message.get("op") == "cancel":
            session.cancel(message.get("request"))
        elif message.get("op") == "close":
            self._sessions.close(session)
        elif message.get("op") == "stream" and message.get("from") != self._me:
            turn, _ = session.open_stream(away=True)  # the other replica's stream is the session's
            turn.done.set()

    async def _publish(self, op: str, session: LegacySession, **fields: Any) -> None:
        message = {
            "op": op,
            "session": session.id,
            "principal": session.principal,
            "from": self._me,
            **fields,
        }
        await self._store.publish(CONTROL, json.dumps(message).encode())

    @property
    def _ttl(self) -> float:
        return self._sessions.ttl


@contextmanager
def _unless_unreachable(skipped: str) -> Iterator[None]:
    """Go on without the store when it is out of reach (its outage is logged once, by the
    store): `skipped` says what is lost, at DEBUG."""
    try:
        yield
    except StoreUnavailable:
        logger.debug("store unreachable: %s", skipped)


def _key(session_id: str) -> str:
    """The session's record; its streams and reply channels share its slot (`slot_tag`)."""
    return f"session:{slot_tag(session_id)}"


def _taggable(session_id: str) -> bool:
    """Whether `session_id` (a client's) can name a record: ours hold no braces."""
    return "{" not in session_id and "}" not in session_id
