"""`wire`: the settings made into the objects that serve one MCP endpoint, in order::

    settings ──► telemetry (the injected providers, or the global ones)
             ──► bus        the Redis bus `bus_url` names (attached to the server later)
             ──► auth       Authenticator + Protected Resource Metadata (or off), the
                            verifiers' HTTP client
             ──► runtime    RequestRuntime ──► InFlight (both eras' requests)
             ──► limits     ClientLimits (per client)
             ──► store      the shared-state store (Redis with `bus_url`, else memory)
             ──► tasks      TaskRegistry ──► TaskSupervisor ──► TaskMethods
             ──► endpoints  ModernEndpoint; LegacyEndpoint (`legacy_enabled`)

`Wiring` holds them, and their life around the app's lifespan (`running`, `shutdown`).
It never changes the server it is given until `running` (or the first request) attaches
the bus. Bad settings raise `ValueError`/`TypeError` here, at construction.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, nullcontext
from dataclasses import dataclass

from opentelemetry import metrics, trace

from mcp_asgi.auth.config import AuthSettings
from mcp_asgi.auth.discovery import HttpJson
from mcp_asgi.auth.guard import Authenticator
from mcp_asgi.auth.metadata import MetadataDocument, document_of
from mcp_asgi.auth.verifier import TokenVerifier
from mcp_asgi.bus.in_process import NotificationBus
from mcp_asgi.endpoint import ModernEndpoint
from mcp_asgi.inflight import InFlight
from mcp_asgi.legacy import LegacyEndpoint
from mcp_asgi.limits import AuthFailures, ClientLimits
from mcp_asgi.runtime import RequestRuntime, input_rounds, result_options
from mcp_asgi.server.mcp_server import McpServer
from mcp_asgi.settings import (
    VERIFIER_SETTINGS,
    BusSettings,
    LimitSettings,
    McpSettings,
    changed,
)
from mcp_asgi.store import StateStore, store_from_url
from mcp_asgi.tasks import TaskMethods, TaskRegistry, TaskSupervisor
from mcp_asgi.telemetry import Telemetry


@dataclass(frozen=True, slots=True)
class Wiring:
    """The objects that serve one MCP endpoint, made once from its settings."""

    server: McpServer
    authorization: AuthSettings  # the section: startup checks the declared scopes again
    telemetry: Telemetry
    bus: NotificationBus | None  # the one `bus_url` names
    http: HttpJson  # the verifiers' HTTP client, kept through the lifespan
    auth: Authenticator | None
    metadata: MetadataDocument | None
    runtime: RequestRuntime
    inflight: InFlight
    limits: ClientLimits
    store: StateStore
    tasks: TaskSupervisor
    modern: ModernEndpoint
    legacy: LegacyEndpoint | None

    def attach_bus(self) -> None:
        """Give the server the bus `bus_url` names (again: idempotent)."""
        if self.bus is not None:
            self.server.subscriptions.attach(self.bus)

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """The app's lifespan: the server's bus and tool sources, the verifiers' HTTP
        client, the tasks' work, and the 2025-era sessions hearing the other replicas.
        `ValueError` on entering: a name already taken, scopes nobody checks."""
        async with self.server.running():
            check_scopes_enforced(self.server, self.authorization)  # what registered since
            legacy = self.legacy.running() if self.legacy is not None else nullcontext()
            async with self.http, self.tasks.run_tasks(), legacy:
                yield

    async def shutdown(self) -> None:
        """Start draining, cancel every request in flight and end every 2025-era session,
        wait (bounded) for their handlers; then the same for the tasks running here."""
        scopes = self.inflight.cancel_all()
        if self.legacy is not None:
            self.legacy.close_all()
        await self.inflight.wait_exited(scopes)
        await self.tasks.shutdown()

    async def health(self) -> dict[str, str]:
        """`McpMiddleware.health`'s answer: the store's and the bus's state."""
        store = "local"
        if self.store.shared:
            store = "ok" if await self.store.check() else "unreachable"
        shared_bus = self.bus if self.bus is not None else self.server.bus
        connected: bool | None = getattr(shared_bus, "connected", None)  # a RedisBus's
        bus = "local" if connected is None else "ok" if connected else "reconnecting"
        status = "degraded" if store == "unreachable" or bus == "reconnecting" else "ok"
        return {"status": status, "store": store, "bus": bus}


def wire(
    server: McpServer,
    settings: McpSettings,
    *,
    tracer_provider: trace.TracerProvider | None = None,
    meter_provider: metrics.MeterProvider | None = None,
    token_verifier: TokenVerifier | None = None,
) -> Wiring:
    """Make the objects `settings` describe for `server` (see the module's recipe)."""
    telemetry = Telemetry(
        tracer_provider,
        meter_provider,
        record_arguments=settings.record_arguments,
        record_principal=settings.record_principal,
    )
    authorization, bus_settings, client_limits = settings.auth, settings.bus, settings.limits
    legacy_settings, task_settings = settings.legacy, settings.tasks
    bus = bus_of(server, bus_settings, meter_provider)
    http = HttpJson()
    if token_verifier is not None and (unused := changed(settings, VERIFIER_SETTINGS)):
        raise ValueError(
            f"McpSettings {', '.join(unused)} set, but a token_verifier is given, which "
            "replaces the built-in verifiers that read them: remove them"
        )
    auth, metadata = auth_of(server, authorization, client_limits, token_verifier, http)
    runtime = RequestRuntime(server, settings.runtime)
    inflight = InFlight(runtime, telemetry)
    limits = ClientLimits(
        rate=client_limits.rate,
        burst=client_limits.burst,
        requests=client_limits.requests,
        listen_streams=client_limits.listen_streams,
        sessions=client_limits.sessions,
        tasks=client_limits.tasks,
        retry_sessions_after=legacy_settings.session_idle_ttl,
        ipv4_prefix=client_limits.ipv4_prefix,
        ipv6_prefix=client_limits.ipv6_prefix,
    )
    options = result_options(settings.results, private=auth is not None)
    store = store_from_url(  # with the Redis bus: shared by replicas
        bus_settings.url,
        timeout=bus_settings.redis_timeout,
        retry_max=bus_settings.redis_retry_max,
    )
    registry = TaskRegistry(store, on_status=server.subscriptions.task_changed)
    tasks = TaskSupervisor(server, registry, task_settings, telemetry, options, runtime)
    modern = ModernEndpoint(
        server,
        inflight=inflight,
        inputs=input_rounds(settings.input),
        options=options,
        limits=limits,
        tasks=TaskMethods(server, tasks, window=task_settings.result_window, limits=limits),
    )
    legacy = (
        LegacyEndpoint(
            server,
            legacy_settings,
            keepalive_interval=settings.keepalive_interval,
            limits=limits,
            inflight=inflight,
            dispatch=lambda request, ctx: server.dispatch(request, ctx, options),
            store=store,
        )
        if legacy_settings.enabled
        else None
    )
    return Wiring(
        server, authorization, telemetry, bus, http, auth, metadata, runtime, inflight, limits,
        store, tasks, modern, legacy,
    )  # fmt: skip


def bus_of(
    server: McpServer, settings: BusSettings, meter_provider: metrics.MeterProvider | None
) -> NotificationBus | None:
    """The bus `bus_url` names, made now and attached to the server later."""
    if settings.url is None:
        return None
    if server.subscriptions.has_own_bus:
        raise ValueError("both McpServer(bus=...) and McpSettings.bus_url are set")
    from mcp_asgi.bus.redis import bus_from_url

    return bus_from_url(
        settings.url,
        channel=settings.channel,
        timeout=settings.redis_timeout,
        reconnect_max=settings.redis_retry_max,
        meter_provider=meter_provider,
    )


def auth_of(
    server: McpServer,
    auth: AuthSettings,
    limits: LimitSettings,
    verifier: TokenVerifier | None,
    http: HttpJson,
) -> tuple[Authenticator | None, MetadataDocument | None]:
    """The authenticator and the Protected Resource Metadata `auth` asks for (None, None
    with authorization off); `limits`: who one client is, for its refused tokens."""
    if auth.resource is None:
        if verifier is not None:
            raise ValueError("token_verifier needs McpSettings.auth_resource and auth_issuers")
        if not auth.host_identity:
            check_scopes_enforced(server, auth)
            return None, None
        authenticator = Authenticator(
            metadata_url=None,
            verifier=None,
            required_scopes=auth.required_scopes,
            host_identity=True,
        )
        return authenticator, None
    metadata = document_of(auth, server)
    authenticator = Authenticator(
        metadata_url=metadata.url,
        verifier=verifier or _verifier_of(auth, http),
        required_scopes=auth.required_scopes,
        host_identity=auth.host_identity,
        failures=AuthFailures(
            rate=rate,
            burst=auth.failure_burst,
            ipv4_prefix=limits.ipv4_prefix,
            ipv6_prefix=limits.ipv6_prefix,
        )
        if (rate := auth.failure_rate)
        else None,
    )
    return authenticator, metadata


def _verifier_of(auth: AuthSettings, http: HttpJson) -> TokenVerifier:
    """The built-in verifier `auth_verification` names (JWT or introspection)."""
    audiences = tuple(a for a in dict.fromkeys([auth.resource, auth.audience]) if a)
    if auth.verification == "jwt":
        from mcp_asgi.auth.jwt import JwtVerifier

        return JwtVerifier(
            issuers=auth.issuers,
            audiences=audiences,
            algorithms=auth.algorithms,
            leeway=auth.leeway,
            jwks_url=auth.jwks_url,
            min_refetch=auth.jwks_min_refetch,
            token_types=auth.token_types,
            http=http,
        )
    from mcp_asgi.auth.introspection import IntrospectionVerifier

    return IntrospectionVerifier(
        issuers=auth.issuers,
        audiences=audiences,
        client_id=auth.client_id,
        client_secret=auth.client_secret,
        endpoint=auth.introspection_url,
        cache_ttl=auth.cache_ttl,
        refusal_ttl=auth.refusal_cache_ttl,
        leeway=auth.leeway,
        http=http,
    )


def check_scopes_enforced(server: McpServer, auth: AuthSettings) -> None:
    """A ValueError when the server declares scopes that nobody would check (authorization
    off): at construction, and again at startup for what was registered since."""
    if auth.enforced:
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
