"""`LegacyEndpoint`: serves 2025-era clients (2025-11-25, 2025-06-18, 2025-03-26) on the
MCP endpoint, beside the 2026-07-28 path.

    POST initialize          -> a new session; `Mcp-Session-Id` on the response
    POST request             -> run in a RequestScope (spans, deadline, cancellation)
    POST notification        -> 202 (`notifications/cancelled` cancels a request first)
    GET                      -> the session's stream of change notifications
    DELETE                   -> the session ends; its requests in flight are cancelled

Every request but `initialize` must name an open session: no `Mcp-Session-Id` is 400,
an unknown or expired one 404, and so is another principal's (a session is bound to the
identity that opened it: the verified token's, or the host app's). Errors raised before
a request runs are `ProtocolError`s, answered by the middleware like its own. The
wiring hands in what a request needs to run (`inflight`, `dispatch`) so both eras
run requests the same way.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import replace
from functools import partial
from typing import Final, Protocol

import anyio
from starlette.types import Message, Receive, Scope, Send

from mcp_asgi._loggers import sessions_logger as logger
from mcp_asgi.auth.principal import principal_key
from mcp_asgi.http.accept import ResponseMode, negotiate
from mcp_asgi.http.exchange import Exchange
from mcp_asgi.http.reply import ReplyWriter, send_empty
from mcp_asgi.input.asking import INPUT_METHODS, Asking
from mcp_asgi.input.live import LiveInput
from mcp_asgi.legacy import methods as _methods
from mcp_asgi.legacy.era import LEGACY_VERSIONS, negotiate_version
from mcp_asgi.legacy.outbound import Outbound, Replies
from mcp_asgi.legacy.parked import ParkedStreams
from mcp_asgi.legacy.resumable import EventLog, LogSettings, ResumableWriter
from mcp_asgi.legacy.resume import serve_resumed
from mcp_asgi.legacy.sessions import (
    LegacySession,
    Release,
    SessionBounds,
    SessionStore,
    session_request,
)
from mcp_asgi.legacy.shared import SharedSessions
from mcp_asgi.legacy.stream import serve_stream
from mcp_asgi.lifecycle.armed import begins_plainly
from mcp_asgi.lifecycle.scope import RequestScope
from mcp_asgi.limits import ClientLimits
from mcp_asgi.protocol.headers import (
    ACCEPT,
    LAST_EVENT_ID,
    PROTOCOL_VERSION,
    SESSION_ID,
    RequestHeaders,
)
from mcp_asgi.protocol.jsonrpc import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    JsonObject,
    McpError,
    ProtocolError,
    RequestId,
    ResourceNotFound,
)
from mcp_asgi.protocol.message import IncomingMessage, IncomingReply
from mcp_asgi.protocol.request import McpRequest
from mcp_asgi.protocol.sizes import json_held
from mcp_asgi.server.context import Context
from mcp_asgi.server.mcp_server import McpServer
from mcp_asgi.settings import LegacySettings
from mcp_asgi.store import MemoryStore, StateStore

_RETRY_FULL: Final = 5
"""Seconds a refused `initialize` is told to wait: a session frees once its exchanges close."""

Dispatch = Callable[[McpRequest, Context], Awaitable[JsonObject]]
Call = Callable[[Context], Awaitable[JsonObject]]


class InFlightRequests(Protocol):
    """Opens the request scope of one request and closes it once it is over (`InFlight`,
    shared by both eras: what is in flight is cancelled at shutdown)."""

    def open(
        self,
        exchange: Exchange,
        request: McpRequest,
        writer: ReplyWriter,
        inputs: Asking | None,
        cancel_on_disconnect: bool,
    ) -> tuple[RequestScope, Context]: ...

    def close(self, request_scope: RequestScope) -> None: ...


class LegacyEndpoint:
    """The 2025-era side of one MCP endpoint: its sessions, their requests and streams."""

    def __init__(
        self,
        server: McpServer,
        settings: LegacySettings,
        *,
        keepalive_interval: float | None,
        limits: ClientLimits,
        inflight: InFlightRequests,
        dispatch: Dispatch,
        store: StateStore | None = None,
    ) -> None:
        """`store` carries the answers to server-to-client requests (across replicas when
        it is shared); default: this process's memory. `keepalive_interval`: seconds
        between keep-alive comments on event streams (None: none)."""
        self.server = server
        self.sessions = SessionStore(
            ttl=settings.session_ttl,
            max_sessions=settings.max_sessions,
            idle_ttl=settings.session_idle_ttl,
            bounds=SessionBounds(
                max_subscriptions=settings.max_subscriptions,
                max_bytes=settings.max_session_bytes,
            ),
        )
        self._limits = limits
        self._max_info = settings.max_client_info_bytes
        self._inflight = inflight
        self._dispatch = dispatch
        self._keepalive = keepalive_interval or 0  # 0: none
        self._disconnect_cancels = settings.disconnect_cancels
        self._store = store if store is not None else MemoryStore()
        self._replies = Replies(self._store)
        self.shared = SharedSessions(self._store, self.sessions)
        self._log_settings = LogSettings(
            max_events=settings.resume_events,
            ttl=settings.resume_ttl,
            retry_ms=round(settings.sse_retry * 1000),
        )
        self._input_timeout = settings.input_timeout
        self._parked = ParkedStreams(park_for=settings.resume_ttl)

    # -- entry points (the middleware has checked method, Origin, body, Accept) ----------

    async def serve_post(self, exchange: Exchange, message: IncomingMessage) -> None:
        """Serve one POSTed 2025-era message (read from the exchange's body)."""
        if message.method == "initialize":
            await self._initialize(exchange, message)
            return
        session = await self._session(exchange.asgi_scope, exchange.headers, message.id)
        if message.id is None:
            await self._notified(session, message)
            await send_empty(exchange.send, 202)
            return
        await self.shared.touch(session)
        self.sessions.prove(session)  # a request: the session is in real use
        method, params = message.method, message.params
        if not _methods.serves(self.server, method):
            raise _in_band(message.id, METHOD_NOT_FOUND, f"Method not found: {method}")
        problem = _methods.check_params(method, params)
        if problem is not None:
            raise _in_band(message.id, INVALID_PARAMS, problem)
        if session.in_flight(message.id):
            raise ProtocolError(
                400,
                INVALID_REQUEST,
                "Invalid Request: a request with this id is already in flight on this session",
                request_id=message.id,
            )
        request = session_request(message, session, session_id=session.id)
        if method in _methods.SESSION_METHODS:

            async def call(ctx: Context) -> JsonObject:
                return _methods.session_method(session, method, params)

        else:

            async def call(ctx: Context) -> JsonObject:
                try:
                    result = await self._dispatch(request, ctx)
                except ResourceNotFound as error:
                    raise _methods.legacy_error(error) from None
                except McpError as error:
                    if error.http_status == 200:
                        raise
                    # in-band: to a 2025-era client, a 404 means its session is gone
                    raise McpError(error.code, error.message, error.data, http_status=200) from None
                return _methods.legacy_result(result)

        await self._run(exchange, session, request, call)

    async def serve_reply(
        self, asgi_scope: Scope, headers: RequestHeaders, send: Send, reply: IncomingReply
    ) -> None:
        """A POSTed answer to one of the server's requests: handed to the handler that
        waits for it (on this replica or another), then `202 Accepted`."""
        session = await self._session(asgi_scope, headers, reply.id)
        await self._replies.deliver(session.id, reply)
        await send_empty(send, 202)

    async def serve_session(
        self, asgi_scope: Scope, headers: RequestHeaders, receive: Receive, send: Send
    ) -> None:
        """GET (the session's notification stream) or DELETE (end the session)."""
        session = await self._session(asgi_scope, headers, None)
        if asgi_scope["method"] == "DELETE":
            self.sessions.close(session)
            await self.shared.close(session)  # on every replica
            await send_empty(send, 204)
            return
        if headers.first[ACCEPT] is not None and negotiate(headers, "sse") != "sse":
            raise ProtocolError(
                406, INVALID_REQUEST, "Not Acceptable: Accept must admit text/event-stream"
            )
        resumed = self._resumed(headers, session)  # 400: an unknown Last-Event-ID
        if resumed is not None and resumed[0].kind == "r" and not await resumed[0].exists():
            raise ProtocolError(
                404,
                INVALID_REQUEST,
                "Not Found: Last-Event-ID names a stream that is unknown or has expired "
                "(legacy_resume_ttl)",
            )
        held = self._limits.hold("listen_streams", self._limits.key(asgi_scope))  # 429
        self.sessions.prove(session)
        send = _send_with_session_id(send, session.id)
        try:
            if resumed is not None and resumed[0].kind == "r":  # a request's stream
                log, after = resumed
                await serve_resumed(
                    session, log, after, receive, send, keepalive_interval=self._keepalive
                )
                return
            log = (
                resumed[0]
                if resumed
                else EventLog.new(self._store, session.id, "g", self._log_settings)
            )
            await serve_stream(
                session,
                self.server.bus,  # read now: the middleware may attach a shared bus at startup
                receive,
                send,
                keepalive_interval=self._keepalive,
                log=log,
                replay_after=resumed[1] if resumed else None,
                prime=resumed is None and session.protocol_version >= "2025-11-25",
                parked=self._parked,
                opened=lambda: self.shared.stream_opened(session),
            )
        finally:
            held.release()

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Hear the other replicas' cancels and session ends (with a shared store), and log
        the notifications of GET streams whose client is away, for as long as the app runs
        (its lifespan)."""
        async with self.shared.running(), self._parked.running():
            yield

    def close_all(self) -> None:
        """End every session (shutdown)."""
        self.sessions.close_all()

    # -- the pieces --------------------------------------------------------------------

    async def _initialize(self, exchange: Exchange, message: IncomingMessage) -> None:
        params = message.params
        capabilities = params.get("capabilities", {})
        client_info = params.get("clientInfo")
        if message.id is None:
            raise ProtocolError(400, INVALID_REQUEST, "Invalid Request: initialize needs an id")
        if not isinstance(params.get("protocolVersion"), str) or not isinstance(capabilities, dict):
            raise ProtocolError(
                400,
                INVALID_PARAMS,
                "Invalid params: initialize needs 'protocolVersion' and 'capabilities'",
                {"supported": list(LEGACY_VERSIONS)},
                request_id=message.id,
            )
        client_info = client_info if isinstance(client_info, dict) else None
        info_bytes = json_held(capabilities, client_info)  # kept parsed: their memory
        if info_bytes > self._max_info:
            raise ProtocolError(
                400,
                INVALID_PARAMS,
                f"Invalid params: capabilities and clientInfo take more than {self._max_info} "
                "bytes",
                {"reason": "session_limit", "limit": self._max_info},
                request_id=message.id,
            )
        asgi_scope = exchange.asgi_scope
        hold = self._limits.hold("sessions", self._limits.key(asgi_scope))  # 429
        session = self.sessions.create(
            protocol_version=negotiate_version(params["protocolVersion"]),
            capabilities=capabilities,
            client_info=client_info,
            principal=principal_key(asgi_scope),
            info_bytes=info_bytes,
            hold=hold,
        )
        if session is None:  # max_sessions held, every one of them in use
            raise ProtocolError(
                503,
                INTERNAL_ERROR,
                "Service Unavailable: every session is in use; retry later",
                {"reason": "sessions_full", "retryAfter": _RETRY_FULL},
                request_id=message.id,
                headers=[(b"retry-after", str(_RETRY_FULL).encode())],
            )
        result = _methods.initialize_result(self.server, session.protocol_version)

        async def call(ctx: Context) -> JsonObject:
            # recorded before the answer is sent: the client may turn to another replica
            # as soon as it has the session id (the store out of reach: this replica only)
            try:
                await self.shared.created(session)
            except Exception:
                logger.warning("session not recorded in the shared store", exc_info=True)
            return result

        request = session_request(message, session, session_id=session.id)
        exchange = replace(exchange, send=_send_with_session_id(exchange.send, session.id))
        request_scope = await self._run(exchange, session, request, call)
        if request_scope.result is None:  # failed or cancelled: no session was opened
            self.sessions.close(session)
            with anyio.CancelScope(shield=True), anyio.move_on_after(1.0):
                try:
                    await self.shared.close(session)  # its record, if it was written
                except Exception:
                    logger.warning("session record not removed", exc_info=True)

    async def _run(
        self, exchange: Exchange, session: LegacySession, request: McpRequest, call: Call
    ) -> RequestScope:
        writer = self._writer(exchange.send, exchange.mode, session, request)
        release = session.use()
        outbound = inputs = None
        if request.method in INPUT_METHODS:  # the handler may ask the client (elicit & co.)
            outbound = Outbound(
                session.id, self._replies, streams=writer.streams, timeout=self._input_timeout
            )
            inputs = LiveInput(request, outbound.send)
        inflight = self._inflight
        request_scope, ctx = inflight.open(
            exchange, request, writer, inputs, self._disconnect_cancels
        )
        try:
            if outbound is not None:
                outbound.bind(request_scope)
            session.track(request_scope)  # no await since the session lookup: atomic
            try:
                await request_scope.run(
                    _ReceiveWithRelease(exchange.receive, release, writer), lambda: call(ctx)
                )
                if not writer.end_at_once():  # complete the HTTP exchange (as the 2026
                    await writer.end()  # endpoint does), even if the client left
            finally:
                session.untrack(request_scope)
                release()
        finally:
            inflight.close(request_scope)
        return request_scope

    def _writer(
        self, send: Send, mode: ResponseMode, session: LegacySession, request: McpRequest
    ) -> ReplyWriter:
        """A resumable writer for a reply that may be an event stream (its events logged
        with ids); initialize's reply is not resumed."""
        if mode == "json" or request.method == "initialize":
            return ReplyWriter(send, mode)
        return ResumableWriter(
            send,
            mode,
            partial(EventLog.new, self._store, session.id, "r", self._log_settings),
            prime=session.protocol_version >= "2025-11-25",  # older clients reject empty data
            outlives=not self._disconnect_cancels,
        )

    def _resumed(
        self, headers: RequestHeaders, session: LegacySession
    ) -> tuple[EventLog, str] | None:
        """The log and position a GET's `Last-Event-ID` names (None: no header)."""
        last = headers.text(LAST_EVENT_ID)
        if last is None:
            return None
        found = EventLog.of(self._store, session.id, last, self._log_settings)
        if found is None:
            raise ProtocolError(
                400, INVALID_REQUEST, "Bad Request: Last-Event-ID is not an event of this server"
            )
        return found

    async def _session(
        self, asgi_scope: Scope, headers: RequestHeaders, request_id: RequestId | None
    ) -> LegacySession:
        session_id = headers.text(SESSION_ID)
        if session_id is None:
            raise ProtocolError(
                400,
                INVALID_REQUEST,
                "Bad Request: Mcp-Session-Id header is required (send initialize first)",
                request_id=request_id,
            )
        session_id, principal = session_id.strip(" \t"), principal_key(asgi_scope)
        session = self.sessions.get(session_id, principal)
        if session is None:  # opened on another replica?
            session = await self.shared.adopt(session_id, principal)
        if session is None:
            raise ProtocolError(
                404,
                INVALID_REQUEST,
                "Not Found: unknown or expired session; initialize a new one",
                request_id=request_id,
            )
        version = headers.text(PROTOCOL_VERSION)
        if version is not None and version.strip(" \t") not in LEGACY_VERSIONS:
            raise ProtocolError(
                400,
                INVALID_REQUEST,
                f"Bad Request: unsupported MCP-Protocol-Version {version.strip()!r}",
                {"supported": list(LEGACY_VERSIONS), "requested": version.strip()},
                request_id=request_id,
            )
        return session

    async def _notified(self, session: LegacySession, message: IncomingMessage) -> None:
        if message.method == "notifications/cancelled":
            request_id = message.params.get("requestId")
            if not session.cancel(request_id):
                logger.debug("cancel not for a request in flight here: told the replicas")
                await self.shared.cancel(session, request_id)


def _in_band(request_id: RequestId, code: int, message: str) -> ProtocolError:
    """A JSON-RPC error answered with HTTP 200, as 2025-era clients expect (a 404 would
    tell them their session is gone)."""
    return ProtocolError(200, code, message, request_id=request_id)


def _send_with_session_id(send: Send, session_id: str) -> Send:
    value = session_id.encode("ascii")

    async def send_with_session_id(message: Message) -> None:
        if message["type"] == "http.response.start":
            headers = [*message.get("headers", []), (b"mcp-session-id", value)]
            message = {**message, "headers": headers}
        await send(message)

    return send_with_session_id


class _ReceiveWithRelease:
    """`receive` that lets the session go idle once the client has disconnected (the
    request may run on, with `legacy_disconnect_cancels=False`), and that never reports
    the end of a connection the handler closed early (`ctx.close_stream()`): the client
    polls, the request goes on. Plain where `receive` is (`lifecycle.armed`)."""

    __slots__ = ("_receive", "_release", "_writer")

    def __init__(self, receive: Receive, release: Release, writer: ReplyWriter) -> None:
        self._receive = receive
        self._release = release
        self._writer = writer

    @property
    def plain_receive(self) -> bool:
        """Asked only once a handler waits (most never do)."""
        return begins_plainly(self._receive)

    async def __call__(self) -> Message:
        message = await self._receive()
        if message["type"] == "http.disconnect":
            self._release()
            writer = self._writer
            if isinstance(writer, ResumableWriter) and writer.closed_early:
                await anyio.sleep_forever()
        return message
