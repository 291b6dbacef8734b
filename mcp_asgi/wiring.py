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
from mcp_asgi.settings import VERIFIER_SETTINGS, McpSettings, changed
from mcp_asgi.store import StateStore, store_from_url
from mcp_asgi.tasks import TaskMethods, TaskRegistry, TaskSupervisor
from mcp_asgi.telemetry import Telemetry


@dataclass(frozen=True, slots=True)
class Wiring:
    """The objects that serve one MCP endpoint, made once from its settings."""

    server: McpServer
    settings: McpSettings
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
            check_scopes_enforced(self.server, self.settings)  # what registered since
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
    bus = bus_of(server, settings, meter_provider)
    http = HttpJson()
    auth, metadata = auth_of(server, settings, token_verifier, http)
    runtime = RequestRuntime(server, settings)
    inflight = InFlight(runtime, telemetry)
    limits = ClientLimits(
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
    options = result_options(settings, private=auth is not None)
    store = store_from_url(  # with the Redis bus: shared by replicas
        settings.bus_url, timeout=settings.redis_timeout, retry_max=settings.redis_retry_max
    )
    registry = TaskRegistry(store, on_status=server.subscriptions.task_changed)
    tasks = TaskSupervisor(server, registry, settings, telemetry, options, runtime)
    modern = ModernEndpoint(
        server,
        inflight=inflight,
        inputs=input_rounds(settings),
        options=options,
        limits=limits,
        tasks=TaskMethods(server, tasks, window=settings.task_result_window, limits=limits),
    )
    legacy = (
        LegacyEndpoint(
            server,
            settings,
            limits=limits,
            open_scope=inflight.open,
            dispatch=lambda request, ctx: server.dispatch(request, ctx, options),
            store=store,
        )
        if settings.legacy_enabled
        else None
    )
    return Wiring(
        server, settings, telemetry, bus, http, auth, metadata, runtime, inflight, limits,
        store, tasks, modern, legacy,
    )  # fmt: skip


def bus_of(
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


def auth_of(
    server: McpServer, settings: McpSettings, verifier: TokenVerifier | None, http: HttpJson
) -> tuple[Authenticator | None, MetadataDocument | None]:
    """The authenticator and the Protected Resource Metadata the settings ask for (None,
    None with authorization off)."""
    if settings.auth_resource is None:
        if verifier is not None:
            raise ValueError("token_verifier needs McpSettings.auth_resource and auth_issuers")
        if not settings.auth_host_identity:
            check_scopes_enforced(server, settings)
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
        verifier = _verifier_of(settings, http)
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


def _verifier_of(settings: McpSettings, http: HttpJson) -> TokenVerifier:
    """The built-in verifier `auth_verification` names (JWT or introspection)."""
    audiences = tuple(dict.fromkeys([settings.auth_resource or "", settings.auth_audience or ""]))
    audiences = tuple(a for a in audiences if a)
    if settings.auth_verification == "jwt":
        from mcp_asgi.auth.jwt import JwtVerifier

        return JwtVerifier(
            issuers=settings.auth_issuers,
            audiences=audiences,
            algorithms=settings.auth_algorithms,
            leeway=settings.auth_leeway,
            jwks_url=settings.auth_jwks_url,
            min_refetch=settings.auth_jwks_min_refetch,
            token_types=settings.auth_token_types,
            http=http,
        )
    from mcp_asgi.auth.introspection import IntrospectionVerifier

    secret = settings.auth_client_secret
    return IntrospectionVerifier(
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


def check_scopes_enforced(server: McpServer, settings: McpSettings) -> None:
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
