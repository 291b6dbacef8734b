"""`McpSettings`: every knob of the middleware, read from the environment (prefix `MCP_`),
and the sections each subsystem is given (`runtime`, `auth`, `bus`, `limits`, `legacy`,
`tasks`)."""

from __future__ import annotations

import json
import os
from typing import Annotated, Any, Final, Literal
from urllib.parse import urlsplit

from pydantic import Field, SecretStr, ValidationInfo, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from mcp_asgi.auth.config import AuthSettings
from mcp_asgi.auth.jwt import ACCESS_TOKEN_TYPES as _ACCESS_TOKEN_TYPES
from mcp_asgi.auth.jwt import ASYMMETRIC as _ASYMMETRIC
from mcp_asgi.auth.jwt import accepted_types as _accepted_types
from mcp_asgi.http.accept import ResponseMode
from mcp_asgi.settings.sections import (
    BusSettings,
    InputSettings,
    LegacySettings,
    LimitSettings,
    ResultSettings,
    RuntimeSettings,
    TaskSettings,
)

Strings = Annotated[tuple[str, ...], NoDecode]
"""A list setting: from the environment, a JSON list or a comma-separated one (`_listed`)."""


class McpSettings(BaseSettings):
    """Settings of one MCP endpoint.

    Every default is safe for production. Values come from keyword arguments, then from
    environment variables such as `MCP_PATH` or `MCP_ALLOWED_ORIGINS=https://a.example` (a
    list setting takes a comma-separated list or a JSON one).
    The model can be nested in an application's own settings class.
    """

    model_config = SettingsConfigDict(env_prefix="MCP_", extra="forbid", frozen=True)

    path: str = Field(default="/mcp", description="Exact path of the endpoint, after root_path.")
    allowed_origins: Strings = Field(
        default=(),
        description="Origins allowed besides the request's own host; '*' allows any.",
    )
    max_body_bytes: int = Field(default=4 * 1024 * 1024, gt=0, description="Largest request body.")
    max_json_values: int = Field(
        default=100_000,
        gt=0,
        description="Most JSON values (object keys included) in a request body or stdio "
        "line (413 above): a request's parsed objects take at most 4 bytes per body byte "
        "plus 100 bytes per value.",
    )
    response_mode: ResponseMode = Field(
        default="auto", description="'auto' answers JSON unless the handler streams or is slow."
    )
    keepalive_interval: float | None = Field(
        default=15.0,
        gt=0,
        description="Seconds between SSE keep-alive comments; None (env: 'none') for none.",
    )
    max_request_duration: float | None = Field(
        default=300.0,
        gt=0,
        description="Server-side deadline per request in seconds; None (env: 'none') for no limit.",
    )
    cancel_grace: float = Field(
        default=5.0,
        ge=0,
        description="Seconds a cancelled handler has to exit before it is an orphan.",
    )
    process_kill_grace: float = Field(
        default=2.0,
        ge=0,
        description="Seconds between SIGTERM and SIGKILL for a cancelled subprocess; at "
        "most cancel_grace.",
    )
    record_arguments: bool = Field(
        default=False, description="Record tool arguments and results on spans (sensitive)."
    )
    page_size: int = Field(default=100, gt=0, description="Items per page of list results.")
    list_ttl: float = Field(
        default=0,
        ge=0,
        description="Seconds list and discover results may be cached (their ttlMs); 0: none.",
    )
    cache_scope: Literal["public", "private"] = Field(
        default="public",
        description="cacheScope of cacheable results; 'private' when they depend on who asks.",
    )
    progress_min_interval: float = Field(
        default=0.0,
        ge=0,
        description="Minimum seconds between progress notifications of a request.",
    )
    legacy_enabled: bool = Field(
        default=True,
        description="Also serve 2025-era clients (initialize, Mcp-Session-Id, GET stream).",
    )
    session_ttl: float = Field(
        default=1800.0,
        gt=0,
        description="Seconds a 2025-era session may go unused (nothing open) before it expires.",
    )
    max_sessions: int = Field(
        default=10_000,
        gt=0,
        description="Most 2025-era sessions held at once (per process); when all are held, "
        "the least recently used idle one (nothing open on it) makes room, else 503.",
    )
    session_idle_ttl: float = Field(
        default=60.0,
        gt=0,
        description="Seconds a 2025-era session that has made no request and opened no "
        "stream since initialize is kept; such sessions are also evicted first when "
        "max_sessions are held (then the least recently used idle ones).",
    )
    max_sessions_per_client: int | None = Field(
        default=64,
        gt=0,
        description="Most 2025-era sessions one client holds at once (429); None: no limit.",
    )
    max_client_info_bytes: int = Field(
        default=64 * 1024,
        gt=0,
        description="Most memory initialize's capabilities plus clientInfo may take in a "
        "2025-era session (400 above; at most max_session_bytes), counted as at most what "
        "their parsed objects take: 4 bytes per byte of their compact JSON plus 100 bytes "
        "per JSON value.",
    )
    max_subscriptions: int = Field(
        default=1000, gt=0, description="Most resources/subscribe URIs per 2025-era session."
    )
    max_session_bytes: int = Field(
        default=256 * 1024,
        gt=0,
        description="Most memory a 2025-era session stores: its client info (counted as in "
        "max_client_info_bytes) and subscribed URIs (each its str plus 100 bytes); a "
        "subscribe beyond it is refused.",
    )
    legacy_disconnect_cancels: bool = Field(
        default=True,
        description="A 2025-era client's disconnect cancels its request; False: the work "
        "continues, and its events and result wait in the stream's log for the client to "
        "resume with GET and Last-Event-ID (the letter of the 2025 spec).",
    )
    legacy_resume_events: int = Field(
        default=1000,
        gt=0,
        description="Most events kept per 2025-era stream for a client resuming it with "
        "Last-Event-ID (older ones are dropped; in Redis, about this many).",
    )
    legacy_resume_ttl: float = Field(
        default=300.0,
        gt=0,
        description="Seconds a 2025-era stream's events are kept after its last one, for a "
        "client resuming it with Last-Event-ID.",
    )
    legacy_sse_retry: float = Field(
        default=1.0,
        gt=0,
        description="Seconds a 2025-era client is told to wait (the SSE retry field) before "
        "it reconnects to a stream the server closed early (ctx.close_stream()).",
    )
    legacy_input_timeout: float | None = Field(
        default=600.0,
        gt=0,
        description="Seconds a 2025-era request waits for the client's answer to "
        "ctx.elicit/sample/list_roots (a request sent on its stream) before the handler gets "
        "a -32001 timeout error; None: as long as the request lives.",
    )
    body_read_timeout: float = Field(
        default=30.0,
        gt=0,
        description="Seconds the client has to send the whole request body after its "
        "headers (408 after); max_request_duration also counts from the headers.",
    )
    max_threads: int = Field(
        default=40,
        gt=0,
        description="Worker threads running sync (def) handlers at once; an abandoned "
        "thread counts until it really returns, further calls queue.",
    )
    rate_limit: float | None = Field(
        default=100.0,
        gt=0,
        description="Requests per second one client (its principal, else its address) may "
        "make, sustained (429 with Retry-After beyond); None: no limit.",
    )
    rate_limit_burst: int = Field(
        default=200, gt=0, description="Requests one client may make at once above rate_limit."
    )
    max_requests_per_client: int | None = Field(
        default=100,
        gt=0,
        description="Requests one client may have in flight at once (429); None: no limit.",
    )
    max_listen_streams_per_client: int | None = Field(
        default=32,
        gt=0,
        description="subscriptions/listen streams and 2025-era GET streams one client may "
        "hold open (429); None: no limit.",
    )
    client_ipv4_prefix: int = Field(
        default=32,
        ge=8,
        le=32,
        description="Leading bits of an IPv4 address that name one client for the per-client "
        "limits when it is not authenticated (32: each address).",
    )
    client_ipv6_prefix: int = Field(
        default=64,
        ge=16,
        le=128,
        description="Leading bits of an IPv6 address that name one client for the per-client "
        "limits when it is not authenticated (64: a host's usual /64, whose addresses it "
        "may rotate freely).",
    )
    stdio_max_in_flight: int = Field(
        default=100,
        gt=0,
        description="Requests a stdio server runs at once (subscriptions/listen included); "
        "while that many are in flight it reads no further request from stdin, so the "
        "client's writes wait.",
    )
    listen_max_duration: float | None = Field(
        default=None,
        gt=0,
        description="Seconds after which the server ends a subscriptions/listen stream "
        "gracefully (the client listens again, e.g. on another replica); None: no limit. "
        "max_request_duration does not apply to listen streams.",
    )
    task_result_window: float = Field(
        default=0.1,
        ge=0,
        description="Seconds a tools/call of a task-capable tool waits for its own result "
        "before answering with a task (Tasks extension): an optional tool done by then "
        "answers plainly, and a question asked by then is an ordinary input_required round.",
    )
    task_ttl: float | None = Field(
        default=3600.0,
        gt=0,
        description="Seconds a task and its result are kept from its creation (ttlMs); "
        "capped by max_task_ttl. None: unlimited (only with max_task_ttl None).",
    )
    max_task_ttl: float | None = Field(
        default=86400.0,
        gt=0,
        description="Longest task TTL the server grants; None: no maximum.",
    )
    max_task_duration: float | None = Field(
        default=3600.0,
        gt=0,
        description="Seconds a task's work may run before it is cancelled (reason timeout; "
        "the task ends failed); None: until its TTL ends.",
    )
    task_poll_interval: float = Field(
        default=1.0,
        gt=0,
        description="Seconds between tasks/get polls the server suggests (pollIntervalMs).",
    )
    task_lease: float = Field(
        default=30.0,
        gt=0,
        description="Seconds a running task's lease lasts; renewed every third of it, when "
        "the replica also checks the store for a cancel or answers. A task whose lease "
        "ran out (its replica died) ends failed.",
    )
    max_tasks_per_client: int | None = Field(
        default=100,
        gt=0,
        description="Tasks one client may have running at once in this process, counted "
        "from the start of their work to its end (429 with Retry-After beyond); None: no "
        "limit.",
    )
    max_tasks: int | None = Field(
        default=1000,
        gt=0,
        description="Tasks running at once in this process, all clients together (503 "
        "with Retry-After beyond); None: no limit.",
    )
    max_kept_task_bytes_per_client: int | None = Field(
        default=32 * 1024 * 1024,
        gt=0,
        description="Bytes the records of one client's ended tasks (their results) may "
        "take in the store, counted in this process until each task's TTL ends; beyond "
        "it the client's new tasks get 429 with Retry-After. None: no limit.",
    )
    max_kept_task_bytes: int | None = Field(
        default=256 * 1024 * 1024,
        gt=0,
        description="Bytes the records of ended tasks this process stored may take, all "
        "clients together, until each task's TTL ends; beyond it new tasks get 503 with "
        "Retry-After. None: no limit.",
    )
    max_task_result_bytes: int = Field(
        default=1024 * 1024,
        gt=0,
        description="Largest result (or error) a task stores, in JSON bytes: a larger one "
        "is not kept, and the task ends failed saying so. A tasks/get answer carrying a "
        "result counts as one more request against rate_limit per full 64 KiB of it.",
    )
    bus_url: str | None = Field(
        default=None,
        description="Redis URL (redis://host:6379/0) of the notification bus shared by all "
        "workers and replicas, and of the shared store; redis+cluster://host:6379[,host2:6379] "
        "for a Redis Cluster (needs mcp-asgi[redis]); None: in-process.",
    )
    bus_channel: str = Field(
        default="mcp_asgi:changes", min_length=1, description="Redis pub/sub channel of the bus."
    )
    redis_timeout: float = Field(
        default=2.0,
        gt=0,
        description="Seconds a Redis command of the shared store or bus may take (connecting "
        "included) before Redis counts as unreachable: requests then fall back or get a 503, "
        "never wait longer. Must be shorter than max_request_duration.",
    )
    redis_retry_max: float = Field(
        default=5.0,
        ge=0.1,
        description="Longest wait in seconds between two attempts to reach Redis while it is "
        "unreachable (the backoff starts at 0.1 s and doubles up to this).",
    )
    request_state_key: SecretStr | None = Field(
        default=None,
        description="Secret that seals MRTR requestState (HMAC-SHA256); every worker and "
        "replica needs the same one. None: a random per-process key (a warning is logged).",
    )
    request_state_ttl: float = Field(
        default=600.0, gt=0, description="Seconds an MRTR requestState stays valid."
    )
    auth_resource: str | None = Field(
        default=None,
        description="Canonical URL of this endpoint as clients reach it, e.g. "
        "'https://mcp.example.com/mcp': the audience tokens must name (RFC 8707). Setting it "
        "turns bearer-token authorization on. None: no token verification.",
    )
    auth_issuers: Strings = Field(
        default=(),
        description="Issuer URLs of the authorization servers whose tokens are accepted "
        "(listed in the Protected Resource Metadata); at least one with auth_resource.",
    )
    auth_required_scopes: Strings = Field(
        default=(), description="Scopes every request needs (403 insufficient_scope without)."
    )
    auth_verification: Literal["jwt", "introspection"] = Field(
        default="jwt",
        description="How access tokens are verified: 'jwt' (signature against the issuer's "
        "JWKS) or 'introspection' (RFC 7662, opaque tokens). Needs mcp-asgi[auth].",
    )
    auth_audience: str | None = Field(
        default=None,
        description="The audience tokens carry when the issuer names this API by an "
        "identifier instead of its URL (e.g. Entra's 'api://<app id>'); None: auth_resource.",
    )
    auth_jwks_url: str | None = Field(
        default=None,
        description="The issuer's JWKS URL; None: discovered from its metadata (one issuer).",
    )
    auth_algorithms: Strings = Field(
        default=("RS256", "ES256", "PS256", "EdDSA"),
        description="JWT signature algorithms accepted (public-key only: never 'none' or HS*).",
    )
    auth_token_types: Strings = Field(
        default=_ACCESS_TOKEN_TYPES,
        description="JWT header 'typ' values accepted, without case or 'application/' "
        "prefix: 'at+jwt' (RFC 9068); add 'JWT' for issuers that type access tokens so "
        "(Keycloak, Entra), '' for none. ID tokens (id_token+jwt) are always refused.",
    )
    auth_leeway: float = Field(
        default=30.0, ge=0, le=300, description="Seconds of clock skew allowed on exp and nbf."
    )
    auth_jwks_min_refetch: float = Field(
        default=30.0,
        ge=0,
        description="Least seconds between two JWKS fetches of one issuer (an unknown kid).",
    )
    auth_introspection_url: str | None = Field(
        default=None,
        description="The RFC 7662 introspection endpoint; None: from the issuer's metadata.",
    )
    auth_client_id: str | None = Field(
        default=None, description="Client id this endpoint introspects tokens with."
    )
    auth_client_secret: SecretStr | None = Field(
        default=None, description="Client secret this endpoint introspects tokens with."
    )
    auth_cache_ttl: float = Field(
        default=30.0, ge=0, description="Seconds a positive introspection answer is cached."
    )
    auth_refusal_cache_ttl: float = Field(
        default=5.0,
        ge=0,
        description="Seconds a refusal by the introspection endpoint is cached (by a digest "
        "of the token), so a token sent again is not introspected again; 0: not cached.",
    )
    auth_failure_rate: float | None = Field(
        default=1.0,
        gt=0,
        description="Refused access tokens per second one client address may send, "
        "sustained; past it, its requests get 429 before their token is verified. "
        "None: no limit.",
    )
    auth_failure_burst: int = Field(
        default=20,
        ge=1,
        description="Refused access tokens one client address may send at once above "
        "auth_failure_rate; also the most of its tokens being verified at once (the others "
        "wait).",
    )
    auth_host_identity: bool = Field(
        default=False,
        description="Trust the identity the host app's authentication put in scope['user'] "
        "/ scope['auth']: such a request needs no token. With no auth_resource, it is the "
        "only way in (401 without it).",
    )
    record_principal: bool = Field(
        default=False,
        description="Record the principal's subject on spans (enduser.id; personal data).",
    )

    @field_validator("path")
    @classmethod
    def _path_is_absolute(cls, value: str) -> str:
        return normalize_path(value)

    @field_validator(
        "allowed_origins",
        "auth_issuers",
        "auth_required_scopes",
        "auth_algorithms",
        "auth_token_types",
        mode="before",
    )
    @classmethod
    def _listed(cls, value: object, info: ValidationInfo) -> object:
        """A list setting given as a string (its environment variable): a JSON list, or
        comma-separated items (surrounding spaces and empty items dropped)."""
        if not isinstance(value, str):
            return value
        text = value.strip()
        if not text.startswith("["):
            return tuple(item.strip() for item in text.split(",") if item.strip())
        try:
            items = json.loads(text)
        except ValueError as error:
            items = error
        if not isinstance(items, list):
            name = str(info.field_name)
            raise ValueError(
                f"{name} (env MCP_{name.upper()}) is not a list: write it comma-separated, "
                f'MCP_{name.upper()}=a,b, or as JSON, MCP_{name.upper()}=\'["a","b"]\''
            )
        return tuple(items)

    @field_validator("allowed_origins")
    @classmethod
    def _origins_are_origins(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for origin in value:
            if origin.strip() != "*" and not _is_origin(origin.strip()):
                raise ValueError(
                    f"allowed origin {origin!r} must be '*' or scheme://host[:port], "
                    "e.g. 'https://app.example.com'"
                )
        return value

    @field_validator("auth_algorithms")
    @classmethod
    def _algorithms_are_asymmetric(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        refused = [alg for alg in value if alg not in _ASYMMETRIC]
        if refused or not value:
            raise ValueError(
                f"auth_algorithms must be public-key signature algorithms "
                f"({', '.join(sorted(_ASYMMETRIC))}); refused: {refused or 'an empty list'}"
            )
        return value

    @field_validator("auth_token_types")
    @classmethod
    def _types_are_access_tokens(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        _accepted_types(value)
        return value

    @model_validator(mode="before")
    @classmethod
    def _renamed(cls, data: Any) -> Any:
        """A setting given by an old name (argument or MCP_* variable) is refused, naming
        the new one: a silently ignored setting is a hole."""
        for old, new in RENAMED.items():
            variable = f"MCP_{old.upper()}"
            if (isinstance(data, dict) and old in data) or variable in os.environ:
                raise ValueError(f"{old} ({variable}) was renamed {new}")
        return data

    @field_validator("keepalive_interval", mode="before")
    @classmethod
    def _keepalive_off_is_none(cls, value: object) -> object:
        if isinstance(value, (int, float, str)) and str(value).strip() in ("0", "0.0"):
            raise ValueError("keepalive_interval: None turns keep-alives off ('none' from env)")
        return value

    @model_validator(mode="after")
    def _redis_timeout_within_deadline(self) -> McpSettings:
        unused = changed(self, ("bus_channel", "redis_timeout", "redis_retry_max"))
        if self.bus_url is None and unused:
            raise ValueError(
                f"{', '.join(unused)} set, but they apply to Redis, which needs bus_url "
                "(redis://host:6379/0): set it, or remove them"
            )
        deadline = self.max_request_duration
        if self.bus_url is not None and deadline is not None and self.redis_timeout >= deadline:
            raise ValueError(
                f"redis_timeout ({self.redis_timeout:g}s) must be shorter than "
                f"max_request_duration ({deadline:g}s), or a request would time out waiting "
                "for Redis before Redis is found unreachable: lower redis_timeout"
            )
        return self

    @model_validator(mode="after")
    def _task_ttl_bounded(self) -> McpSettings:
        if self.task_ttl is None and self.max_task_ttl is not None:
            raise ValueError("task_ttl None (unlimited) needs max_task_ttl None too")
        return self

    @model_validator(mode="after")
    def _coherent(self) -> McpSettings:
        """Refuse settings that contradict each other (each error names both)."""
        if self.process_kill_grace > self.cancel_grace:
            raise ValueError(
                f"process_kill_grace ({self.process_kill_grace:g} s) must not exceed "
                f"cancel_grace ({self.cancel_grace:g} s): a subprocess still alive would be "
                "killed only after its handler was given up as an orphan. Lower "
                "process_kill_grace (MCP_PROCESS_KILL_GRACE) or raise cancel_grace "
                "(MCP_CANCEL_GRACE)"
            )
        if self.max_client_info_bytes > self.max_session_bytes:
            raise ValueError(
                f"max_client_info_bytes ({self.max_client_info_bytes}) must not exceed "
                f"max_session_bytes ({self.max_session_bytes}): a 2025-era session's stored "
                "bytes include its client info, so such a session could never subscribe. "
                "Lower max_client_info_bytes or raise max_session_bytes"
            )
        return self

    @model_validator(mode="after")
    def _auth_complete(self) -> McpSettings:
        """No auth setting is left doing nothing: see the table in docs/authorization.md."""
        if self.auth_resource is None:
            unused = changed(self, BEARER_SETTINGS)
            if not self.auth_host_identity:
                unused += changed(self, ("auth_required_scopes",))
            if unused and not self.auth_host_identity:
                raise ValueError(
                    f"{', '.join(unused)} set, but authorization is off, so nothing would "
                    "be checked: set auth_resource (this endpoint's URL) and auth_issuers to "
                    "verify bearer tokens, or auth_host_identity=True to use the host app's "
                    "users; or remove them"
                )
            if unused:
                raise ValueError(
                    f"{', '.join(unused)} set, but they apply to bearer tokens, which need "
                    "auth_resource: set it (with auth_issuers), or remove them "
                    "(auth_host_identity alone only uses the host app's users)"
                )
            return self
        parts = urlsplit(self.auth_resource)
        if parts.scheme not in ("https", "http") or not parts.hostname or parts.fragment:
            raise ValueError(
                "auth_resource must be an absolute http(s) URL without a fragment, "
                f"e.g. 'https://mcp.example.com/mcp', got {self.auth_resource!r}"
            )
        if not self.auth_issuers:
            raise ValueError("auth_resource needs at least one issuer in auth_issuers")
        jwt = self.auth_verification == "jwt"
        unused = changed(self, INTROSPECTION_SETTINGS if jwt else JWT_SETTINGS)
        if unused:
            other = "introspection" if jwt else "jwt"
            raise ValueError(
                f"{', '.join(unused)} set, but they do nothing with auth_verification="
                f"{self.auth_verification!r}: remove them, or set auth_verification={other!r}"
            )
        if self.auth_client_secret is not None and self.auth_client_id is None:
            raise ValueError("auth_client_secret needs auth_client_id (the client it is of)")
        return self

    @field_validator(
        "max_request_duration",
        "listen_max_duration",
        "task_ttl",
        "max_task_ttl",
        "max_task_duration",
        "max_tasks_per_client",
        "max_tasks",
        "max_kept_task_bytes_per_client",
        "max_kept_task_bytes",
        "rate_limit",
        "max_requests_per_client",
        "max_listen_streams_per_client",
        "max_sessions_per_client",
        "auth_resource",
        "auth_audience",
        "auth_jwks_url",
        "auth_introspection_url",
        "auth_client_id",
        "auth_failure_rate",
        "keepalive_interval",
        mode="before",
    )
    @classmethod
    def _none_from_env(cls, value: object) -> object:
        if isinstance(value, str) and value.strip().lower() in ("", "none", "null"):
            return None
        return value

    # -- the sections: what each subsystem is given (settings/sections.py) ---------------

    @property
    def auth(self) -> AuthSettings:
        """Authorization: the `auth_*` fields."""
        secret = self.auth_client_secret
        return AuthSettings(
            resource=self.auth_resource,
            issuers=self.auth_issuers,
            required_scopes=self.auth_required_scopes,
            verification=self.auth_verification,
            audience=self.auth_audience,
            jwks_url=self.auth_jwks_url,
            algorithms=self.auth_algorithms,
            token_types=self.auth_token_types,
            leeway=self.auth_leeway,
            jwks_min_refetch=self.auth_jwks_min_refetch,
            introspection_url=self.auth_introspection_url,
            client_id=self.auth_client_id,
            client_secret=secret.get_secret_value() if secret else None,
            cache_ttl=self.auth_cache_ttl,
            refusal_cache_ttl=self.auth_refusal_cache_ttl,
            failure_rate=self.auth_failure_rate,
            failure_burst=self.auth_failure_burst,
            host_identity=self.auth_host_identity,
        )

    @property
    def runtime(self) -> RuntimeSettings:
        """What every request's runtime reads (RequestRuntime)."""
        return RuntimeSettings(
            max_request_duration=self.max_request_duration,
            keepalive_interval=self.keepalive_interval,
            cancel_grace=self.cancel_grace,
            process_kill_grace=self.process_kill_grace,
            progress_min_interval=self.progress_min_interval,
            max_threads=self.max_threads,
        )

    @property
    def results(self) -> ResultSettings:
        """Paging, caching and listen streams' length (the server's results)."""
        return ResultSettings(
            page_size=self.page_size,
            list_ttl=self.list_ttl,
            cache_scope=self.cache_scope,
            listen_max_duration=self.listen_max_duration,
        )

    @property
    def input(self) -> InputSettings:
        """The sealed `requestState` of input rounds."""
        key = self.request_state_key
        return InputSettings(
            key=key.get_secret_value() if key else None, ttl=self.request_state_ttl
        )

    @property
    def bus(self) -> BusSettings:
        """Redis: the shared bus and store."""
        return BusSettings(
            url=self.bus_url,
            channel=self.bus_channel,
            redis_timeout=self.redis_timeout,
            redis_retry_max=self.redis_retry_max,
        )

    @property
    def limits(self) -> LimitSettings:
        """Per-client limits."""
        return LimitSettings(
            rate=self.rate_limit,
            burst=self.rate_limit_burst,
            requests=self.max_requests_per_client,
            listen_streams=self.max_listen_streams_per_client,
            sessions=self.max_sessions_per_client,
            tasks=self.max_tasks_per_client,
            ipv4_prefix=self.client_ipv4_prefix,
            ipv6_prefix=self.client_ipv6_prefix,
        )

    @property
    def legacy(self) -> LegacySettings:
        """2025-era clients."""
        return LegacySettings(
            enabled=self.legacy_enabled,
            session_ttl=self.session_ttl,
            max_sessions=self.max_sessions,
            session_idle_ttl=self.session_idle_ttl,
            max_client_info_bytes=self.max_client_info_bytes,
            max_subscriptions=self.max_subscriptions,
            max_session_bytes=self.max_session_bytes,
            disconnect_cancels=self.legacy_disconnect_cancels,
            resume_events=self.legacy_resume_events,
            resume_ttl=self.legacy_resume_ttl,
            sse_retry=self.legacy_sse_retry,
            input_timeout=self.legacy_input_timeout,
        )

    @property
    def tasks(self) -> TaskSettings:
        """The Tasks extension."""
        return TaskSettings(
            result_window=self.task_result_window,
            ttl=self.task_ttl,
            max_ttl=self.max_task_ttl,
            max_duration=self.max_task_duration,
            poll_interval=self.task_poll_interval,
            lease=self.task_lease,
            max_tasks=self.max_tasks,
            max_kept_bytes_per_client=self.max_kept_task_bytes_per_client,
            max_kept_bytes=self.max_kept_task_bytes,
            max_result_bytes=self.max_task_result_bytes,
        )


RENAMED: Final = {"list_ttl_ms": "list_ttl, in seconds (MCP_LIST_TTL)"}
"""Old setting names and what replaced them: refused with that hint, never ignored."""


def _is_origin(value: str) -> bool:
    parts = urlsplit(value)
    try:
        parts.port  # noqa: B018 - raises ValueError for an invalid port
    except ValueError:
        return False
    bare = parts.path in ("", "/") and not (parts.query or parts.fragment)
    return bool(parts.scheme and parts.hostname) and bare


def normalize_path(value: str) -> str:
    """An endpoint path as the middleware matches it: absolute, without a trailing slash."""
    if not isinstance(value, str) or not value.startswith("/"):
        raise ValueError(f"path must be a string starting with '/', got {value!r}")
    if "?" in value or "#" in value:
        raise ValueError(f"path must not contain a query or fragment, got {value!r}")
    return value.rstrip("/") or "/"


JWT_SETTINGS: Final = (
    "auth_jwks_url",
    "auth_algorithms",
    "auth_token_types",
    "auth_jwks_min_refetch",
)
"""The settings of the built-in JWT verifier (auth_verification='jwt')."""

INTROSPECTION_SETTINGS: Final = (
    "auth_introspection_url",
    "auth_client_id",
    "auth_client_secret",
    "auth_cache_ttl",
    "auth_refusal_cache_ttl",
)
"""The settings of the built-in introspection verifier (auth_verification='introspection')."""

VERIFIER_SETTINGS: Final = (
    "auth_verification",
    "auth_audience",
    "auth_leeway",
    *JWT_SETTINGS,
    *INTROSPECTION_SETTINGS,
)
"""What the built-in verifiers read: nothing of it is used with a custom token_verifier."""

BEARER_SETTINGS: Final = (
    "auth_issuers",
    *VERIFIER_SETTINGS,
    "auth_failure_rate",
    "auth_failure_burst",
)
"""What only bearer tokens use (they need auth_resource)."""


def changed(settings: McpSettings, names: tuple[str, ...]) -> list[str]:
    """Those of the settings `names` that differ from their defaults."""
    fields = McpSettings.model_fields
    return [name for name in names if getattr(settings, name) != fields[name].default]
