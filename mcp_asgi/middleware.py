"""`McpMiddleware`: mounts the MCP endpoint on any ASGI app; passes everything else through."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator

import anyio
from opentelemetry import metrics, trace
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from mcp_asgi.http.accept import negotiate
from mcp_asgi.http.body import ClientGone, check_content_type, read_body
from mcp_asgi.http.origin import normalize_origin, origin_allowed
from mcp_asgi.http.reply import ReplyWriter, dump, send_json
from mcp_asgi.input.rounds import InputRound, InputRounds
from mcp_asgi.legacy import LegacyEndpoint, is_legacy, is_session_request
from mcp_asgi.lifecycle.cancel import CancelReason
from mcp_asgi.lifecycle.scope import RequestScope
from mcp_asgi.protocol import jsonrpc
from mcp_asgi.protocol.jsonrpc import INVALID_REQUEST, ProtocolError
from mcp_asgi.protocol.message import IncomingMessage, parse_message, peek_id
from mcp_asgi.protocol.request import McpRequest
from mcp_asgi.protocol.validate import validate
from mcp_asgi.server.context import Context
from mcp_asgi.server.listen import LISTEN, check_listen
from mcp_asgi.server.mcp_server import McpServer, ResultOptions
from mcp_asgi.settings import McpSettings, normalize_path
from mcp_asgi.telemetry.telemetry import Telemetry

logger = logging.getLogger("mcp_asgi")


class McpMiddleware:
    """Serve `server` at `settings.path` (exact match after `root_path`, with or without a
    trailing slash); every other request, websocket and lifespan event goes to `app`.

    `path`, when given, overrides `settings.path`. Telemetry uses the injected providers,
    or the global ones.
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        server: McpServer,
        path: str | None = None,
        settings: McpSettings | None = None,
        tracer_provider: trace.TracerProvider | None = None,
        meter_provider: metrics.MeterProvider | None = None,
    ) -> None:
        if not isinstance(server, McpServer):
            raise TypeError("server must be an McpServer")
        if settings is not None and not isinstance(settings, McpSettings):
            raise TypeError("settings must be an McpSettings")
        settings = settings or McpSettings()
        if path is not None:
            settings = settings.model_copy(update={"path": normalize_path(path)})
        self.app = app
        self.server = server
        self.settings = settings
        self._options = ResultOptions(
            page_size=settings.page_size,
            ttl_ms=settings.list_ttl_ms,
            cache_scope=settings.cache_scope,
            listen_max_duration=settings.listen_max_duration,
        )
        self._paths = frozenset({settings.path, settings.path.rstrip("/") + "/"})
        self._origins = frozenset(normalize_origin(o) for o in settings.allowed_origins)
        self._telemetry = Telemetry(
            tracer_provider, meter_provider, record_arguments=settings.record_arguments
        )
        self._inflight: set[RequestScope] = set()
        server.subscriptions.use_bus_url(settings.bus_url, settings.bus_channel, meter_provider)
        key = settings.request_state_key
        self._inputs = InputRounds(
            key.get_secret_value().encode() if key else None, ttl=settings.request_state_ttl
        )
        self._legacy = (
            LegacyEndpoint(
                server,
                settings,
                open_scope=self._request_scope,
                dispatch=lambda request, ctx: server.dispatch(request, ctx, self._options),
                bus=server.bus,
            )
            if settings.legacy_enabled
            else None
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and _route_path(scope) in self._paths:
            await self._serve_guarded(scope, receive, send)
        elif scope["type"] == "lifespan":
            async with self.server.running():  # the bus's background work lives here
                await self.app(scope, self._receive_with_shutdown(receive), send)
        else:
            await self.app(scope, receive, send)

    def _receive_with_shutdown(self, receive: Receive) -> Receive:
        async def receive_with_shutdown() -> Message:
            message = await receive()
            if message["type"] == "lifespan.shutdown":
                await self.cancel_inflight()
            return message

        return receive_with_shutdown

    async def cancel_inflight(self) -> None:
        """Cancel every request in flight (reason `server_shutdown`) and wait, bounded by
        the cancel grace period, for their handlers to exit."""
        scopes = list(self._inflight)
        for request_scope in scopes:
            request_scope.cancel(CancelReason.SERVER_SHUTDOWN)
        if self._legacy is not None:
            self._legacy.close_all()
        with anyio.move_on_after(self.settings.cancel_grace + 1.0):
            for request_scope in scopes:
                await request_scope.wait_exited()

    async def _serve_guarded(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve one request; a bug of ours becomes a logged -32603 (HTTP 500 if nothing was
        sent yet), never an exception in the host app."""
        started = False

        async def send_tracking_start(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self._serve(scope, receive, send_tracking_start)
        except Exception:
            logger.exception("internal error while serving an MCP request")
            if not started:
                error = jsonrpc.McpError(jsonrpc.INTERNAL_ERROR, "Internal error")
                await send_json(send, 500, dump(jsonrpc.error_response(None, error)), [])

    async def _serve(self, scope: Scope, receive: Receive, send: Send) -> None:
        settings = self.settings
        message: IncomingMessage | None = None
        body: bytes | None = None
        legacy = self._legacy
        try:
            sessions = legacy if legacy is not None and is_session_request(scope) else None
            if scope["method"] != "POST" and sessions is None:
                raise ProtocolError(
                    405, INVALID_REQUEST, "Method Not Allowed: the MCP endpoint accepts POST only"
                )
            if not origin_allowed(scope, self._origins):
                raise ProtocolError(403, INVALID_REQUEST, "Forbidden: Origin not allowed")
            if sessions is not None:  # GET or DELETE of a 2025-era session
                await sessions.serve_session(scope, receive, send)
                return
            body = await read_body(scope, receive, settings.max_body_bytes)
            check_content_type(scope)
            mode = negotiate(scope, settings.response_mode)
            if mode is None:
                raise ProtocolError(
                    406,
                    INVALID_REQUEST,
                    "Not Acceptable: Accept must admit application/json or text/event-stream",
                )
            message = parse_message(body)
            if legacy is not None and is_legacy(scope, message):
                await legacy.serve_post(scope, receive, send, message, mode)
                return
            if message.is_notification:
                await send({"type": "http.response.start", "status": 202, "headers": []})
                await send({"type": "http.response.body", "body": b""})
                return
            request = validate(scope, message, self.server)
            check_listen(scope, request)  # a listen stream needs SSE (406) and a filter (400)
            inputs = self._inputs.begin(scope, request)  # verifies requestState (400)
        except ProtocolError as error:
            if message is not None:  # the method was readable: a short span says why it failed
                self._telemetry.rejected(scope, message, error)
            headers = [(b"allow", b"POST")] if error.http_status == 405 else []
            request_id = error.request_id if error.request_id is not None else peek_id(body)
            reply = dump(jsonrpc.error_response(request_id, error))
            await send_json(send, error.http_status, reply, headers)
            return
        except ClientGone:
            await ReplyWriter(send, "json").end()
            return
        writer = ReplyWriter(send, "sse" if request.method == LISTEN else mode)
        with self._request_scope(scope, request, writer, inputs=inputs) as (request_scope, ctx):
            await request_scope.run(
                receive, lambda: self.server.dispatch(request, ctx, self._options)
            )
            await writer.end()

    @contextlib.contextmanager
    def _request_scope(
        self,
        scope: Scope,
        request: McpRequest,
        writer: ReplyWriter,
        *,
        cancel_on_disconnect: bool = True,
        inputs: InputRound | None = None,
    ) -> Iterator[tuple[RequestScope, Context]]:
        """The scope and context of one request (either era), tracked while it runs."""
        settings = self.settings
        observer = self._telemetry.begin(scope, request)
        listen = request.method == LISTEN  # long-lived: no deadline, a graceful end
        timeout = _min(settings.max_request_duration, self.server.timeout_for(request))
        request_scope = RequestScope(
            request,
            writer,
            timeout=None if listen else timeout,
            cancel_grace=settings.cancel_grace,
            keepalive_interval=settings.keepalive_interval,
            observer=observer,
            cancel_on_disconnect=cancel_on_disconnect,
            on_server_end=self.server.subscriptions.server_end(request) if listen else None,
        )
        ctx = Context(
            request_scope,
            progress_min_interval=settings.progress_min_interval,
            process_kill_grace=settings.process_kill_grace,
            inputs=inputs,
        )
        self._inflight.add(request_scope)
        try:
            yield request_scope, ctx
        finally:
            self._inflight.discard(request_scope)


def _route_path(scope: Scope) -> str:
    path: str = scope["path"]
    root: str = scope.get("root_path", "")
    if root and path.startswith(root) and (len(path) == len(root) or path[len(root)] == "/"):
        return path[len(root) :] or "/"
    return path


def _min(a: float | None, b: float | None) -> float | None:
    if a is None:
        return b
    return a if b is None else min(a, b)
