"""The sections of `McpSettings`, one per subsystem that reads them.

`McpSettings` keeps its flat fields (keyword arguments, `MCP_*` variables) and makes each
section from them (`settings.runtime`, `.results`, `.input`, `.bus`, `.limits`, `.legacy`,
`.tasks`; `.auth` is
`mcp_asgi.auth.config.AuthSettings`, defined in the layer that reads it). A subsystem is
given its section alone. A field here is the flat field's name without its section's
prefix (`legacy_resume_ttl` is `settings.legacy.resume_ttl`); units are seconds and
bytes, and None turns a limit off.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal


@dataclass(frozen=True, slots=True)
class RuntimeSettings:
    """What every request's runtime reads, on every transport (`max_request_duration`,
    `keepalive_interval`, `cancel_grace`, `process_kill_grace`, `progress_min_interval`,
    `max_threads`)."""

    max_request_duration: float | None
    keepalive_interval: float | None
    cancel_grace: float
    process_kill_grace: float
    progress_min_interval: float
    max_threads: int


@dataclass(frozen=True, slots=True)
class BusSettings:
    """Redis, shared by replicas: the notification bus and the shared-state store
    (`bus_url`, `bus_channel`, `redis_timeout`, `redis_retry_max`)."""

    url: str | None
    channel: str
    redis_timeout: float
    redis_retry_max: float


@dataclass(frozen=True, slots=True)
class LimitSettings:
    """Per-client limits (`rate_limit`, `rate_limit_burst`, `max_requests_per_client`,
    `max_listen_streams_per_client`, `max_sessions_per_client`, `max_tasks_per_client`,
    `client_ipv4_prefix`, `client_ipv6_prefix`)."""

    rate: float | None
    burst: int
    requests: int | None
    listen_streams: int | None
    sessions: int | None
    tasks: int | None
    ipv4_prefix: int
    ipv6_prefix: int


@dataclass(frozen=True, slots=True)
class LegacySettings:
    """2025-era clients: sessions, their bounds and resumable streams (`legacy_enabled`,
    `session_ttl`, `max_sessions`, `session_idle_ttl`, `max_client_info_bytes`,
    `max_subscriptions`, `max_session_bytes`, `legacy_disconnect_cancels`,
    `legacy_resume_events`, `legacy_resume_ttl`, `legacy_sse_retry`,
    `legacy_input_timeout`)."""

    enabled: bool
    session_ttl: float
    max_sessions: int
    session_idle_ttl: float
    max_client_info_bytes: int
    max_subscriptions: int
    max_session_bytes: int
    disconnect_cancels: bool
    resume_events: int
    resume_ttl: float
    sse_retry: float
    input_timeout: float | None


@dataclass(frozen=True, slots=True)
class TaskSettings:
    """The Tasks extension (`task_result_window`, `task_ttl`, `max_task_ttl`,
    `max_task_duration`, `task_poll_interval`, `task_lease`, `max_tasks`,
    `max_kept_task_bytes_per_client`, `max_kept_task_bytes`, `max_task_result_bytes`;
    `max_tasks_per_client` is a per-client limit)."""

    result_window: float
    ttl: float | None
    max_ttl: float | None
    max_duration: float | None
    poll_interval: float
    lease: float
    max_tasks: int | None
    max_kept_bytes_per_client: int | None
    max_kept_bytes: int | None
    max_result_bytes: int


@dataclass(frozen=True, slots=True)
class ResultSettings:
    """How results are paged and cached, and how long a listen stream lasts (`page_size`,
    `list_ttl`, `cache_scope`, `listen_max_duration`)."""

    page_size: int
    list_ttl: float
    cache_scope: Literal["public", "private"]
    listen_max_duration: float | None


@dataclass(frozen=True, slots=True)
class InputSettings:
    """The 2026-07-28 input rounds' sealed `requestState` (`request_state_key`,
    `request_state_ttl`)."""

    key: str | None = field(repr=False)  # never in a repr
    ttl: float
