"""`McpMiddleware`: mounts the MCP endpoint on any ASGI app; passes everything else through.

Per request, the way Starlette's `GZipMiddleware` picks a responder::

    http to settings.path ──► method, Origin ──► (POST) body, Content-Type, Accept, JSON
                          ──► the era's endpoint, chosen once: ModernEndpoint | LegacyEndpoint
    lifespan              ──► the server's bus runs around the app's lifespan; shutdown
                              cancels every request in flight; a middleware inside another
                              one on the same path fails the startup (it would never be
                              reached)
    anything else         ──► the app (the scope names the endpoints served outside it)

The constructor only precomputes (settings, telemetry, the endpoints); it never changes the
server it is given. A bus named by `McpSettings.bus_url` is made here and attached to the
server when the app starts (or at its first request, without a lifespan).
"""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager, AsyncExitStack, nullcontext
from typing import Protocol

from opentelemetry import metrics, trace
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from mcp_asgi._loggers import root_logger as logger
from mcp_asgi._loop import loop_clock
from mcp_asgi.auth.discovery import HttpJson
from mcp_asgi.auth.guard import Authenticator, AuthError
from mcp_asgi.auth.metadata import MetadataDocument, document_of
from mcp_asgi.auth.verifier import TokenVerifier
from mcp_asgi.bus.in_process import NotificationBus
from mcp_asgi.endpoint import ModernEndpoint
from mcp_asgi.http.accept import ResponseMode, negotiate
from mcp_asgi.http.body import ClientGone, check_content_type, read_body
from mcp_asgi.http.origin import normalize_origin, origin_allowed
from mcp_asgi.http.reply import ReplyWriter, dump, send_json
from mcp_asgi.inflight import InFlight
from mcp_asgi.legacy import LegacyEndpoint, is_legacy, is_session_request
from mcp_asgi.limits import AuthFailures, ClientLimits, TooManyRequests
from mcp_asgi.protocol import jsonrpc
from mcp_asgi.protocol.headers import header
from mcp_asgi.protocol.jsonrpc import (
    INTERNAL_ERROR,
    INVALID_REQUEST,
    ProtocolError,
    store_unavailable,
)
from mcp_asgi.protocol.message import IncomingMessage, IncomingReply, parse_post, peek_id
from mcp_asgi.routes import ROUTE_CALL_KEY
from mcp_asgi.runtime import RequestRuntime, input_rounds, result_options
from mcp_asgi.server.mcp_server import McpServer
from mcp_asgi.settings import VERIFIER_SETTINGS, McpSettings, changed, normalize_path
from mcp_asgi.store import StoreUnavailable, store_from_url
from mcp_asgi.tasks import TaskMethods, TaskRegistry, TaskSupervisor
from mcp_asgi.telemetry import Telemetry


class _Endpoint(Protocol):
    async def serve_post(
        self,
        asgi_scope: Scope,
        receive: Receive,
        send: Send,
        message: IncomingMessage,
        mode: ResponseMode,
        *,
        body: bytes,
        arrived: float,
    ) -> None: ...


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
        self._paths = frozenset({settings.path, settings.path.rstrip("/") + "/"})
        deadline = settings.max_request_duration
        self._read_timeout = min(settings.body_read_timeout, deadline or settings.body_read_timeout)
        self._origins = frozenset(normalize_origin(o) for o in settings.allowed_origins)
        self._bus = _bus_of(server, settings, meter_provider)
        self._http = HttpJson()  # the verifiers' HTTP client, kept through the lifespan
        self._auth, self._metadata = _auth_of(server, settings, token_verifier, self._http)
        self._telemetry = Telemetry(
            tracer_provider,
            meter_provider,
            record_arguments=settings.record_arguments,
            record_principal=settings.record_principal,
        )
        self._runtime = runtime = RequestRuntime(server, settings)
        self._inflight = InFlight(runtime, self._telemetry)
        self._lifespan_started = False  # the server's lifespan startup reached us
        self._endpoints: _Endpoints | None = None  # ours and those outside: set once seen
        self._warned = False  # that it did not, at the first request
        self._limits = ClientLimits(
            rate=settings.rate_limit,
            burst=settings.rate_limit_burst,
            requests=settings.max_requests_per_client,
            listen_streams=settings.max_listen_streams_per_client,
            sessions=settings.max_sessions_per_client,
            tasks=settings.max_tasks_per_client,
            retry_sessions_after=settings.session_idle_ttl,
            ipv4_prefix=settings.client_ipv4_prefix,
            ipv6_prefix=settings.client_ipv6_prefix,
        )
        self._limits_requests = self._limits.limits_requests
        options = result_options(settings, private=self._auth is not None)
        self._store = store_from_url(  # with the Redis bus: shared by replicas
            settings.bus_url, timeout=settings.redis_timeout, retry_max=settings.redis_retry_max
        )
        registry = TaskRegistry(self._store, on_status=server.subscriptions.task_changed)
        self._tasks = TaskSupervisor(server, registry, settings, self._telemetry, options, runtime)
        self._modern = ModernEndpoint(
            server,
            inflight=self._inflight,
            inputs=input_rounds(settings),
            options=options,
            limits=self._limits,
            tasks=TaskMethods(
                server, self._tasks, window=settings.task_result_window, limits=self._limits
            ),
        )
        self._legacy = (
            LegacyEndpoint(
                server,
                settings,
                limits=self._limits,
                open_scope=self._inflight.open,
                dispatch=lambda request, ctx: server.dispatch(request, ctx, options),
                store=self._store,
            )
            if settings.legacy_enabled
            else None
        )

    async def __call__(self, asgi_scope: Scope, receive: Receive, send: Send) -> None:
        """Serve an HTTP request to the MCP path; run the server's bus around a lifespan
        (and cancel what is in flight at its shutdown); pass everything else to the app."""
        if asgi_scope["type"] == "http" and _route_path(asgi_scope) in self._paths:
            self._attach_bus()
            self._warn_without_lifespan()
            if self._inflight.draining:  # 503: retry soon, on another replica
                await send_json(send, 503, _SHUTTING_DOWN, [(b"retry-after", b"1")])
                return
            await self._serve_guarded(asgi_scope, receive, send)
        elif asgi_scope["type"] == "lifespan":
            self._attach_bus()
            self._endpoints, shadowed = self._stack(asgi_scope)
            if shadowed is not None:
                await _startup_failed(ValueError(shadowed), receive, send)
                return
            asgi_scope[_ENDPOINTS_KEY] = self._endpoints
            # the bus's background work, the tool sources and the tasks' work live here
            async with AsyncExitStack() as running:
                try:
                    await running.enter_async_context(self.server.running())
                    _check_scopes_enforced(self.server, self.settings)
                except ValueError as refused:  # a name already taken, scopes nobody checks
                    await _startup_failed(refused, receive, send)
                    return
                await running.enter_async_context(self._http)
                async with self._tasks.run_tasks(), self._replicas():
                    await self._serve_lifespan(asgi_scope, receive, send)
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

    async def health(self) -> dict[str, str]:
        """For the app's readiness route: `status` `ok`, or `degraded` while Redis is out
        of reach; `store` `ok` | `unreachable` | `local` (asks Redis, bounded by
        `redis_timeout`); `bus` `ok` | `reconnecting` | `local`. See docs/deployment.md,
        "When Redis fails", for what degrades meanwhile."""
        store = "local"
        if self._store.shared:
            store = "ok" if await self._store.check() else "unreachable"
        shared_bus = self._bus if self._bus is not None else self.server.bus
        connected: bool | None = getattr(shared_bus, "connected", None)  # a RedisBus's
        bus = "local" if connected is None else "ok" if connected else "reconnecting"
        status = "degraded" if store == "unreachable" or bus == "reconnecting" else "ok"
        return {"status": status, "store": store, "bus": bus}

    def _replicas(self) -> AbstractAsyncContextManager[None]:
        """2025-era sessions hear the other replicas (cancels, session ends) meanwhile."""
        return self._legacy.running() if self._legacy is not None else nullcontext()

    def _attach_bus(self) -> None:
        if self._bus is not None:
            self.server.subscriptions.attach(self._bus)

    async def _serve_lifespan(self, asgi_scope: Scope, receive: Receive, send: Send) -> None:
        """Pass the lifespan to the app, cancelling what is in flight when `lifespan.shutdown`
        arrives (before the app hears of it). An app that returns without taking part in the
        protocol (it ignores lifespan scopes) is stood in for: startup completes, and
        shutdown is still seen."""
        messages: list[str] = []

        async def receive_with_shutdown() -> Message:
            message = await receive()
            messages.append(message["type"])
            if message["type"] == "lifespan.shutdown":
                await self.cancel_inflight()
            return message

        async def send_seeing_startup(message: Message) -> None:
            messages.append(message["type"])
            if message["type"] == "lifespan.startup.complete":
                self._lifespan_started = True
            await send(message)

        await self.app(asgi_scope, receive_with_shutdown, send_seeing_startup)
        if messages in ([], ["lifespan.startup"]):  # the app does not take part: stand in
            if not messages:
                await receive()  # lifespan.startup
            await send_seeing_startup({"type": "lifespan.startup.complete"})
            while (await receive_with_shutdown())["type"] != "lifespan.shutdown":
                pass
            await send({"type": "lifespan.shutdown.complete"})

    def _warn_without_lifespan(self) -> None:
        """Say once, loudly, that this middleware cannot see the server shut down."""
        if self._lifespan_started or self._warned:
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
        scopes = self._inflight.cancel_all()
        if self._legacy is not None:
            self._legacy.close_all()
        await self._inflight.wait_exited(scopes)
        await self._tasks.shutdown()

    async def _serve_guarded(self, asgi_scope: Scope, receive: Receive, send: Send) -> None:
        """Serve one request; a bug of ours becomes a logged -32603 (HTTP 500 if nothing was
        sent yet), never an exception in the host app."""
        started = False

        async def send_tracking_start(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self._serve(asgi_scope, receive, send_tracking_start)
        except Exception:
            logger.exception("internal error while serving an MCP request")
            if not started:
                error = jsonrpc.McpError(jsonrpc.INTERNAL_ERROR, "Internal error")
                await send_json(send, 500, dump(jsonrpc.error_response(None, error)), [])

    async def _serve(self, asgi_scope: Scope, receive: Receive, send: Send) -> None:
        """The checks every request passes, then the era's endpoint; every rejection is
        answered here with its HTTP status and a JSON-RPC error."""
        message: IncomingMessage | None = None
        body: bytes | None = None
        held = None
        arrived = loop_clock()()  # the request's deadline counts from here, body included
        try:
            if asgi_scope.get(ROUTE_CALL_KEY):  # a route called as a tool (AppRoutes)
                raise ProtocolError(
                    508,
                    INVALID_REQUEST,
                    "Loop Detected: a route called as a tool cannot call the MCP endpoint",
                )
            legacy = self._legacy
            sessions = legacy if legacy and is_session_request(asgi_scope) else None
            if asgi_scope["method"] != "POST" and sessions is None:
                raise ProtocolError(
                    405, INVALID_REQUEST, "Method Not Allowed: the MCP endpoint accepts POST only"
                )
            if not origin_allowed(asgi_scope, self._origins):
                raise ProtocolError(403, INVALID_REQUEST, "Forbidden: Origin not allowed")
            auth = self._auth  # before the body is read: 400, 401, 403, 503
            principal = await auth.authenticate(asgi_scope) if auth is not None else None
            # the principal when authenticated, else the address; unused with no limit on
            client = self._limits.key(asgi_scope) if self._limits_requests else ""
            self._limits.check_rate(client)  # 429
            if sessions is not None:  # GET or DELETE of a 2025-era session
                await sessions.serve_session(asgi_scope, receive, send)
                return
            held = self._limits.hold("requests", client)  # 429
            body = await read_body(
                asgi_scope, receive, self.settings.max_body_bytes, within=self._read_timeout
            )
            check_content_type(asgi_scope)
            mode = negotiate(asgi_scope, self.settings.response_mode)
            if mode is None:
                raise ProtocolError(
                    406,
                    INVALID_REQUEST,
                    "Not Acceptable: Accept must admit application/json or text/event-stream",
                )
            incoming = parse_post(body, self.settings.max_json_values)
            if isinstance(incoming, IncomingReply):  # a 2025-era client's answer
                if legacy is None or header(asgi_scope, b"mcp-session-id") is None:
                    raise ProtocolError(
                        400,
                        INVALID_REQUEST,
                        "Invalid Request: clients must not POST JSON-RPC responses",
                        request_id=incoming.id,
                    )
                await legacy.serve_reply(asgi_scope, send, incoming)
                return
            message = incoming
            if principal is not None and auth is not None:  # the operation's scopes: 403
                required = self.server.required_scopes(message.method, message.params)
                auth.authorize(principal, required, message.id)
            endpoint: _Endpoint = (
                legacy if legacy and is_legacy(asgi_scope, message) else self._modern
            )
            await endpoint.serve_post(
                asgi_scope, receive, send, message, mode, body=body, arrived=arrived
            )
        except (ProtocolError, StoreUnavailable) as caught:  # the store: logged once by it
            error = caught if isinstance(caught, ProtocolError) else store_unavailable()
            if message is not None:  # the method was readable: a short span says why it failed
                self._telemetry.rejected(asgi_scope, message, error)
            headers = [(b"allow", b"POST")] if error.http_status == 405 else error.headers
            if isinstance(error, AuthError):
                self._telemetry.auth_failed(error.reason)
            elif isinstance(error, TooManyRequests):
                self._telemetry.limited(error.limit)
            request_id = (
                error.request_id
                if error.request_id is not None
                else peek_id(body, self.settings.max_json_values)
            )
            reply = dump(jsonrpc.error_response(request_id, error))
            await send_json(send, error.http_status, reply, headers)
        except ClientGone:
            await ReplyWriter(send, "json").end()
        finally:
            if held is not None:
                held.release()


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


def _bus_of(
    server: McpServer, settings: McpSettings, meter_provider: metrics.MeterProvider | None
) -> NotificationBus | None:
    """The bus `settings.bus_url` names, made now and attached to the server later."""
    if settings.bus_url is None:
        return None
    if server.subscriptions.has_own_bus:
        raise ValueError("both McpServer(bus=...) and McpSettings.bus_url are set")
    from mcp_asgi.bus.redis import bus_from_url

    return bus_from_url(
        settings.bus_url,
        channel=settings.bus_channel,
        timeout=settings.redis_timeout,
        reconnect_max=settings.redis_retry_max,
        meter_provider=meter_provider,
    )


def _auth_of(
    server: McpServer, settings: McpSettings, verifier: TokenVerifier | None, http: HttpJson
) -> tuple[Authenticator | None, MetadataDocument | None]:
    """The authenticator and the Protected Resource Metadata the settings ask for (None,
    None with authorization off)."""
    if settings.auth_resource is None:
        if verifier is not None:
            raise ValueError("token_verifier needs McpSettings.auth_resource and auth_issuers")
        if not settings.auth_host_identity:
            _check_scopes_enforced(server, settings)
            return None, None
        authenticator = Authenticator(
            metadata_url=None,
            verifier=None,
            required_scopes=settings.auth_required_scopes,
            host_identity=True,
        )
        return authenticator, None
    metadata = document_of(settings, server)
    unused = changed(settings, VERIFIER_SETTINGS) if verifier is not None else []
    if unused:
        raise ValueError(
            f"McpSettings {', '.join(unused)} set, but a token_verifier is given, which "
            "replaces the built-in verifiers that read them: remove them"
        )
    if verifier is None:
        audiences = tuple(dict.fromkeys([settings.auth_resource, settings.auth_audience or ""]))
        audiences = tuple(a for a in audiences if a)
        if settings.auth_verification == "jwt":
            from mcp_asgi.auth.jwt import JwtVerifier

            verifier = JwtVerifier(
                issuers=settings.auth_issuers,
                audiences=audiences,
                algorithms=settings.auth_algorithms,
                leeway=settings.auth_leeway,
                jwks_url=settings.auth_jwks_url,
                min_refetch=settings.auth_jwks_min_refetch,
                token_types=settings.auth_token_types,
                http=http,
            )
        else:
            from mcp_asgi.auth.introspection import IntrospectionVerifier

            secret = settings.auth_client_secret
            verifier = IntrospectionVerifier(
                issuers=settings.auth_issuers,
                audiences=audiences,
                client_id=settings.auth_client_id,
                client_secret=secret.get_secret_value() if secret else None,
                endpoint=settings.auth_introspection_url,
                cache_ttl=settings.auth_cache_ttl,
                refusal_ttl=settings.auth_refusal_cache_ttl,
                leeway=settings.auth_leeway,
                http=http,
            )
    authenticator = Authenticator(
        metadata_url=metadata.url,
        verifier=verifier,
        required_scopes=settings.auth_required_scopes,
        host_identity=settings.auth_host_identity,
        failures=AuthFailures(
            rate=rate,
            burst=settings.auth_failure_burst,
            ipv4_prefix=settings.client_ipv4_prefix,
            ipv6_prefix=settings.client_ipv6_prefix,
        )
        if (rate := settings.auth_failure_rate)
        else None,
    )
    return authenticator, metadata


def _check_scopes_enforced(server: McpServer, settings: McpSettings) -> None:
    """A ValueError when the server declares scopes that nobody would check (authorization
    off): at construction, and again at startup for what was registered since."""
    if settings.auth_resource is not None or settings.auth_host_identity:
        return
    declared = server.declared_scopes()
    if declared:
        raise ValueError(
            f"McpServer {server.name!r} declares scopes ({', '.join(sorted(declared))}: its "
            "default_scopes or a tool's, resource's, prompt's or source's scopes=), but "
            "authorization is off, so every caller could use everything: set "
            "McpSettings.auth_resource and auth_issuers (bearer tokens) or "
            "auth_host_identity=True, or remove the scopes"
        )


def _route_path(asgi_scope: Scope) -> str:
    path: str = asgi_scope["path"]
    root: str = asgi_scope.get("root_path", "")
    if root and path.startswith(root) and (len(path) == len(root) or path[len(root)] == "/"):
        return path[len(root) :] or "/"
    return path


async def _startup_failed(refused: ValueError, receive: Receive, send: Send) -> None:
    """The server could not start (a tool source refused a name already taken, or scopes
    were declared with authorization off): the ASGI
    server is told `lifespan.startup.failed` with the reason, and exits saying so."""
    logger.error("the MCP server cannot start: %s", refused)
    await receive()  # lifespan.startup
    await send({"type": "lifespan.startup.failed", "message": str(refused)})
