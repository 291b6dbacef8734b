"""`McpMiddleware`: mounts the MCP endpoint on any ASGI app; passes everything else through.

A router, the way Starlette's `GZipMiddleware` picks a responder::

    http to settings.path ──► draining? 503 ──► the guard (a bug of ours: -32603, logged)
                          ──► method, Origin, auth, limits ──► (POST) body, Content-Type,
                              Accept, JSON ──► Exchange ──► the era's endpoint, chosen
                              once: ModernEndpoint | LegacyEndpoint
    lifespan              ──► the wiring runs around the app's lifespan (lifespan.py
                              passes it on, or stands in); shutdown cancels every request
                              in flight; a middleware inside another one on the same path
                              fails the startup (it would never be reached)
    http to the Protected Resource Metadata ──► its document (authorization on)
    anything else         ──► the app (the scope names the endpoints served outside it)

The constructor only checks its arguments and has `wiring.wire` make the objects the
settings describe; it never changes the server it is given. A bus named by
`McpSettings.bus_url` is attached to the server when the app starts (or at its first
request, without a lifespan).
"""

from __future__ import annotations

from collections.abc import Awaitable
from contextlib import AsyncExitStack
from typing import Protocol

from opentelemetry import metrics, trace
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from mcp_asgi._loggers import root_logger as logger
from mcp_asgi._loop import native_task, task_clock
from mcp_asgi.auth.guard import AuthError
from mcp_asgi.auth.verifier import TokenVerifier
from mcp_asgi.http.accept import negotiate
from mcp_asgi.http.body import ClientGone, check_content_type, read_body
from mcp_asgi.http.exchange import Exchange
from mcp_asgi.http.origin import normalize_origin, origin_allowed
from mcp_asgi.http.reply import ReplyWriter, dump, send_json
from mcp_asgi.legacy import is_legacy, is_session_request
from mcp_asgi.lifespan import fail_startup, pass_lifespan
from mcp_asgi.limits import TooManyRequests
from mcp_asgi.protocol import jsonrpc
from mcp_asgi.protocol.headers import SESSION_ID, RequestHeaders
from mcp_asgi.protocol.jsonrpc import (
    INTERNAL_ERROR,
    INVALID_REQUEST,
    ProtocolError,
    store_unavailable,
)
from mcp_asgi.protocol.message import IncomingMessage, IncomingReply, parse_post, peek_id
from mcp_asgi.routes.request import ROUTE_CALL_KEY
from mcp_asgi.server.mcp_server import McpServer
from mcp_asgi.settings import McpSettings, normalize_path
from mcp_asgi.store import StoreUnavailable
from mcp_asgi.wiring import Wiring, wire


class _Endpoint(Protocol):
    async def serve_post(self, exchange: Exchange, message: IncomingMessage) -> None: ...


class McpMiddleware:
    """Serve `server` at `settings.path` (exact match after `root_path`, with or without a
    trailing slash); every other request, websocket and lifespan event goes to `app`.

    `path`, when given, overrides `settings.path`. A second `McpMiddleware` inside this one
    on the same path (it would never be reached) fails the lifespan startup; see
    docs/mounting.md#several-servers. Telemetry uses the injected providers, or the global
    ones. `token_verifier` verifies bearer tokens instead of the verifier the settings
    describe (`auth_resource` and `auth_issuers` are still needed: they are the
    audience and the Protected Resource Metadata); see docs/authorization.md.
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
        token_verifier: TokenVerifier | None = None,
    ) -> None:
        try:
            self._configure(
                app, server, path, settings, tracer_provider, meter_provider, token_verifier
            )
        except (TypeError, ValueError) as refused:
            # Starlette builds its middleware at the app's first ASGI call, the lifespan
            # startup, and uvicorn's default `--lifespan auto` takes an exception there for
            # "no lifespan support" and serves on (every request then fails): this line is
            # the start-up's only word of why, unless uvicorn runs with `--lifespan on`.
            logger.error("the MCP endpoint cannot start: %s", refused)
            raise

    def _configure(
        self,
        app: ASGIApp,
        server: McpServer,
        path: str | None,
        settings: McpSettings | None,
        tracer_provider: trace.TracerProvider | None,
        meter_provider: metrics.MeterProvider | None,
        token_verifier: TokenVerifier | None,
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
        self._wiring: Wiring = wire(
            server,
            settings,
            tracer_provider=tracer_provider,
            meter_provider=meter_provider,
            token_verifier=token_verifier,
        )
        wiring = self._wiring  # what the router and the checks read, kept at hand
        self._paths = frozenset({settings.path, settings.path.rstrip("/") + "/"})
        deadline = settings.max_request_duration
        self._read_timeout = min(settings.body_read_timeout, deadline or settings.body_read_timeout)
        self._origins = frozenset(normalize_origin(o) for o in settings.allowed_origins)
        # the settings each request reads, at hand (a model's attribute chain costs more)
        self._max_body_bytes = settings.max_body_bytes
        self._max_json_values = settings.max_json_values
        self._response_mode = settings.response_mode
        self._telemetry = wiring.telemetry
        self._bus = wiring.bus
        self._runtime = wiring.runtime
        self._inflight = wiring.inflight
        self._limits = wiring.limits
        self._limits_requests = wiring.limits.limits_requests
        self._auth, self._metadata = wiring.auth, wiring.metadata
        self._modern, self._legacy = wiring.modern, wiring.legacy
        self._lifespan_started = False  # the server's lifespan startup reached us
        self._endpoints: _Endpoints | None = None  # ours and those outside: set once seen
        self._warned = False  # that it did not, at the first request

    async def __call__(self, asgi_scope: Scope, receive: Receive, send: Send) -> None:
        """Serve an HTTP request to the MCP path; run the server's bus around a lifespan
        (and cancel what is in flight at its shutdown); pass everything else to the app."""
        # (the path under root_path's prefix: with no root_path, the path, without a call)
        if (
            asgi_scope["type"] == "http"
            and (_route_path(asgi_scope) if asgi_scope.get("root_path") else asgi_scope["path"])
            in self._paths
        ):
            if self._bus is not None:  # (no bus: nothing to attach, no call)
                self._wiring.attach_bus()
            if not self._lifespan_started:
                self._warn_without_lifespan()
            if self._inflight.draining:  # 503: retry soon, on another replica
                await send_json(send, 503, _SHUTTING_DOWN, [(b"retry-after", b"1")])
                return
            await self._serve(asgi_scope, receive, send)
        elif asgi_scope["type"] == "lifespan":
            await self._lifespan(asgi_scope, receive, send)
        elif (
            self._metadata is not None
            and asgi_scope["type"] == "http"
            and asgi_scope["path"] in self._metadata.paths
        ):
            await self._metadata.serve(asgi_scope, send)  # Protected Resource Metadata
        else:
            if self._endpoints is None:  # no lifespan reached us: checked at the first request
                self._endpoints, shadowed = self._stack(asgi_scope)
                if shadowed is not None:
                    logger.error("%s", shadowed)
            asgi_scope[_ENDPOINTS_KEY] = self._endpoints  # one dict write per passed request
            await self.app(asgi_scope, receive, send)

    def _stack(self, asgi_scope: Scope) -> tuple[_Endpoints, str | None]:
        """The endpoints served outside this middleware (from the scope) and its own, and
        why it can never be reached when an outer one serves the same path (else None)."""
        here = asgi_scope.get("root_path", "") + self.settings.path
        outer: _Endpoints = asgi_scope.get(_ENDPOINTS_KEY, ())
        shadowed = None
        for path, name in outer:
            if path == here:
                shadowed = (
                    f"two McpMiddleware serve the path {here!r}: the outer one (server "
                    f"{name!r}) answers every request to it, so this one (server "
                    f"{self.server.name!r}) would never be reached and its tools never "
                    "listed. Add McpMiddleware once per path, or give this one another path "
                    "(path= or McpSettings.path)"
                )
        return (*outer, (here, self.server.name)), shadowed

    async def _lifespan(self, asgi_scope: Scope, receive: Receive, send: Send) -> None:
        """Run the wiring (the bus, tool sources, tasks' work) around the app's lifespan;
        cancel what is in flight at its shutdown; refuse to start when shadowed."""
        self._wiring.attach_bus()
        self._endpoints, shadowed = self._stack(asgi_scope)
        if shadowed is not None:
            await _startup_failed(ValueError(shadowed), receive, send)
            return
        asgi_scope[_ENDPOINTS_KEY] = self._endpoints
        async with AsyncExitStack() as running:
            try:
                await running.enter_async_context(self._wiring.running())
            except ValueError as refused:  # a name already taken, scopes nobody checks
                await _startup_failed(refused, receive, send)
                return
            await pass_lifespan(
                self.app,
                asgi_scope,
                receive,
                send,
                started=self._started,
                shutting_down=self.cancel_inflight,
            )

    def _started(self) -> None:
        self._lifespan_started = True

    async def health(self) -> dict[str, str]:
        """For the app's readiness route: `status` `ok`, or `degraded` while Redis is out
        of reach; `store` `ok` | `unreachable` | `local` (asks Redis, bounded by
        `redis_timeout`); `bus` `ok` | `reconnecting` | `local`. See docs/deployment.md,
        "When Redis fails", for what degrades meanwhile."""
        return await self._wiring.health()

    def _warn_without_lifespan(self) -> None:
        """Say once, loudly, that this middleware cannot see the server shut down (no
        lifespan startup reached it)."""
        if self._warned:
            return
        self._warned = True
        logger.warning(
            "serving MCP requests without a lifespan startup: this middleware cannot see the "
            "server shut down, so requests in flight then are cut off without their "
            "server_shutdown error, span or log record. Run the server with lifespan events "
            "(uvicorn: not --lifespan off), and give an app that mounts this one its lifespan: "
            "lifespan=mounted_lifespan(app) (see docs/mounting.md#lifespan-and-shutdown)"
        )

    async def cancel_inflight(self) -> None:
        """Start draining (new requests get 503), cancel every request in flight (reason
        `server_shutdown`), end every 2025-era session, and wait, bounded by the cancel grace
        period, for their handlers to exit; then the same for the tasks running here (each
        ends `failed`, saying the server shut down)."""
        await self._wiring.shutdown()

    async def _serve(self, asgi_scope: Scope, receive: Receive, asgi_send: Send) -> None:
        """The checks every request passes, then the era's endpoint; every rejection is
        answered here with its HTTP status and a JSON-RPC error. A bug of ours becomes a
        logged -32603 (HTTP 500 if nothing was sent yet), never an exception in the host
        app."""
        started = False

        def send(message: Message) -> Awaitable[None]:
            # the server's `send`, noting the response's start: a plain call handing back
            # the server's awaitable (no coroutine of its own)
            nonlocal started
            started = started or message["type"] == "http.response.start"
            return asgi_send(message)

        message: IncomingMessage | None = None
        body: bytes | None = None
        admitted: str | None = None  # the client holding a request (`leave` gives it back)
        try:
            task = native_task()  # the request's own task (asyncio, 3.11+), asked once
            clock = task_clock(task)  # the request's scope reads it too (via the Exchange)
            arrived = clock()  # the request's deadline counts from here, body included
            try:
                if asgi_scope.get(ROUTE_CALL_KEY):  # a route called as a tool (AppRoutes)
                    raise ProtocolError(
                        508,
                        INVALID_REQUEST,
                        "Loop Detected: a route called as a tool cannot call the MCP endpoint",
                    )
                headers = RequestHeaders(asgi_scope["headers"])
                legacy = self._legacy
                post = asgi_scope["method"] == "POST"
                # (a POST never names a session: not asked)
                sessions = (
                    legacy
                    if legacy and not post and is_session_request(asgi_scope, headers)
                    else None
                )
                if not post and sessions is None:
                    raise ProtocolError(
                        405,
                        INVALID_REQUEST,
                        "Method Not Allowed: the MCP endpoint accepts POST only",
                    )
                if not origin_allowed(asgi_scope, headers, self._origins):
                    raise ProtocolError(403, INVALID_REQUEST, "Forbidden: Origin not allowed")
                auth = self._auth  # before the body is read: 400, 401, 403, 503
                principal = (
                    await auth.authenticate(asgi_scope, headers) if auth is not None else None
                )
                limits = self._limits
                if sessions is not None:  # GET or DELETE of a 2025-era session
                    if self._limits_requests:
                        limits.check_rate(limits.key(asgi_scope))  # 429
                    await sessions.serve_session(asgi_scope, headers, receive, send)
                    return
                # 429: its rate, its requests in flight (nothing to ask with no limit on)
                admitted = limits.admit(asgi_scope) if self._limits_requests else None
                read = read_body(  # (positional: see `RequestRuntime.context`)
                    headers, receive, self._max_body_bytes, task, self._read_timeout
                )
                body = read if isinstance(read, bytes) else await read  # (most: at once)
                check_content_type(headers)
                mode = negotiate(headers, self._response_mode)
                if mode is None:
                    raise ProtocolError(
                        406,
                        INVALID_REQUEST,
                        "Not Acceptable: Accept must admit application/json or text/event-stream",
                    )
                incoming = parse_post(body, self._max_json_values)
                if isinstance(incoming, IncomingReply):  # a 2025-era client's answer
                    if legacy is None or headers.first[SESSION_ID] is None:
                        raise ProtocolError(
                            400,
                            INVALID_REQUEST,
                            "Invalid Request: clients must not POST JSON-RPC responses",
                            request_id=incoming.id,
                        )
                    await legacy.serve_reply(asgi_scope, headers, send, incoming)
                    return
                message = incoming
                if principal is not None and auth is not None:  # the operation's scopes: 403
                    required = self.server.required_scopes(message.method, message.params)
                    auth.authorize(principal, required, message.id)
                endpoint: _Endpoint = (
                    legacy if legacy and is_legacy(headers, message) else self._modern
                )
                await endpoint.serve_post(
                    Exchange(asgi_scope, headers, receive, send, body, arrived, mode, clock, task),
                    message,
                )
            except (ProtocolError, StoreUnavailable) as caught:  # the store: logged once by it
                error = caught if isinstance(caught, ProtocolError) else store_unavailable()
                await self._refuse(asgi_scope, send, error, message, body)
            except ClientGone:
                await ReplyWriter(send, "json").end()
            finally:
                if admitted is not None:
                    self._limits.leave(admitted)
        except Exception:
            logger.exception("internal error while serving an MCP request")
            if not started:
                internal = jsonrpc.McpError(jsonrpc.INTERNAL_ERROR, "Internal error")
                await send_json(asgi_send, 500, dump(jsonrpc.error_response(None, internal)), [])

    async def _refuse(
        self,
        asgi_scope: Scope,
        send: Send,
        error: ProtocolError,
        message: IncomingMessage | None,
        body: bytes | None,
    ) -> None:
        """Answer a refused request with `error`'s status and JSON-RPC error (echoing the
        request's id where it can be read), counted and, once the method was readable,
        given a short span saying why."""
        if message is not None:
            self._telemetry.rejected(asgi_scope, message, error)
        extra = [(b"allow", b"POST")] if error.http_status == 405 else error.headers
        if isinstance(error, AuthError):
            self._telemetry.auth_failed(error.reason)
        elif isinstance(error, TooManyRequests):
            self._telemetry.limited(error.limit)
        request_id = (
            error.request_id
            if error.request_id is not None
            else peek_id(body, self._max_json_values)
        )
        reply = dump(jsonrpc.error_response(request_id, error))
        await send_json(send, error.http_status, reply, extra)


_SHUTTING_DOWN = dump(
    jsonrpc.error_response(
        None,
        jsonrpc.McpError(
            INTERNAL_ERROR,
            "Service Unavailable: the server is shutting down",
            {"reason": "server_shutdown"},
        ),
    )
)
"""The body of the 503 a request gets while the server drains (with `Retry-After: 1`)."""


_ENDPOINTS_KEY = "mcp_asgi.endpoints"
"""Scope key: the MCP endpoints served by the middlewares a scope has passed through, as
(path after root_path's prefix, server name) pairs; an inner middleware on one of those
paths refuses to start."""

_Endpoints = tuple[tuple[str, str], ...]


def _route_path(asgi_scope: Scope) -> str:
    path: str = asgi_scope["path"]
    root: str = asgi_scope.get("root_path", "")
    if root and path.startswith(root) and (len(path) == len(root) or path[len(root)] == "/"):
        return path[len(root) :] or "/"
    return path


async def _startup_failed(refused: ValueError, receive: Receive, send: Send) -> None:
    """The server could not start (a tool source refused a name already taken, scopes were
    declared with authorization off, another middleware shadows this one): logged, and the
    ASGI server is told `lifespan.startup.failed` with the reason (it exits saying so)."""
    logger.error("the MCP server cannot start: %s", refused)
    await fail_startup(str(refused), receive, send)
