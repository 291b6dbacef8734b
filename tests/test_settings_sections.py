"""`McpSettings`' sections: each subsystem's slice of the flat fields, made from them."""

from __future__ import annotations

import dataclasses

import pytest
from pydantic import SecretStr

from mcp_asgi import McpSettings

AUTH = McpSettings(
    auth_resource="https://mcp.example.com/mcp",
    auth_issuers=("https://as.example.com",),
    auth_required_scopes=("read",),
    auth_verification="introspection",
    auth_audience="api://mcp",
    auth_leeway=10.0,
    auth_introspection_url="https://as.example.com/introspect",
    auth_client_id="mcp",
    auth_client_secret=SecretStr("s3cret"),
    auth_cache_ttl=7.0,
    auth_refusal_cache_ttl=3.0,
    auth_failure_rate=None,
    auth_failure_burst=5,
    auth_host_identity=True,
)

OTHERS = McpSettings(
    page_size=7,
    list_ttl=3.0,
    cache_scope="private",
    listen_max_duration=30.0,
    request_state_key=SecretStr("a-key-shared-by-every-replica"),
    request_state_ttl=60.0,
    max_request_duration=None,
    keepalive_interval=None,
    cancel_grace=8.0,
    process_kill_grace=6.0,
    progress_min_interval=0.25,
    max_threads=9,
    bus_url="redis://127.0.0.1:6379/0",
    bus_channel="chan",
    redis_timeout=1.5,
    redis_retry_max=3.0,
    rate_limit=None,
    rate_limit_burst=7,
    max_requests_per_client=None,
    max_listen_streams_per_client=3,
    max_sessions_per_client=4,
    max_tasks_per_client=5,
    client_ipv4_prefix=24,
    client_ipv6_prefix=48,
    legacy_enabled=False,
    session_ttl=11.0,
    max_sessions=12,
    session_idle_ttl=13.0,
    max_client_info_bytes=1400,
    max_subscriptions=15,
    max_session_bytes=1600,
    legacy_disconnect_cancels=False,
    legacy_resume_events=17,
    legacy_resume_ttl=18.0,
    legacy_sse_retry=19.0,
    legacy_input_timeout=None,
    task_result_window=0.5,
    task_ttl=None,
    max_task_ttl=None,
    max_task_duration=21.0,
    task_poll_interval=2.0,
    task_lease=22.0,
    max_tasks=None,
    max_kept_task_bytes_per_client=None,
    max_kept_task_bytes=2300,
    max_task_result_bytes=2400,
)

PREFIXES = {
    "auth": "auth_",
    "bus": "bus_",
    "legacy": "legacy_",
    "tasks": "task_",
    "input": "request_state_",
}
"""A section's field is the flat field's name without this prefix, unless `RENAMES` says."""

RENAMES = {
    "limits": {
        "rate": "rate_limit",
        "burst": "rate_limit_burst",
        "requests": "max_requests_per_client",
        "listen_streams": "max_listen_streams_per_client",
        "sessions": "max_sessions_per_client",
        "tasks": "max_tasks_per_client",
        "ipv4_prefix": "client_ipv4_prefix",
        "ipv6_prefix": "client_ipv6_prefix",
    },
    "bus": {"url": "bus_url", "channel": "bus_channel"},
    "legacy": {"enabled": "legacy_enabled"},
    "tasks": {
        "max_ttl": "max_task_ttl",
        "max_duration": "max_task_duration",
        "max_tasks": "max_tasks",
        "max_kept_bytes_per_client": "max_kept_task_bytes_per_client",
        "max_kept_bytes": "max_kept_task_bytes",
        "max_result_bytes": "max_task_result_bytes",
    },
}


def _flat_name(section: str, field: str) -> str:
    renamed = RENAMES.get(section, {}).get(field)
    if renamed is not None:
        return renamed
    candidate = PREFIXES.get(section, "") + field
    return candidate if candidate in McpSettings.model_fields else field


@pytest.mark.parametrize(
    ("settings", "section"),
    [
        (AUTH, "auth"),
        (OTHERS, "runtime"),
        (OTHERS, "results"),
        (OTHERS, "input"),
        (OTHERS, "bus"),
        (OTHERS, "limits"),
        (OTHERS, "legacy"),
        (OTHERS, "tasks"),
    ],
)
def test_a_section_carries_its_flat_fields(settings: McpSettings, section: str) -> None:
    """Every field of a section is the value of its flat field (set away from its default),
    secrets unwrapped."""
    made = getattr(settings, section)
    for field in dataclasses.fields(made):
        flat = getattr(settings, _flat_name(section, field.name))
        if isinstance(flat, SecretStr):
            flat = flat.get_secret_value()
        assert getattr(made, field.name) == flat, (section, field.name)


def test_the_sections_cover_their_fields_once() -> None:
    """No flat field feeds two sections, so a setting is configured in one place."""
    seen: dict[str, str] = {}
    for section in ("auth", "runtime", "results", "input", "bus", "limits", "legacy", "tasks"):
        for field in dataclasses.fields(getattr(OTHERS, section)):
            flat = _flat_name(section, field.name)
            assert flat in McpSettings.model_fields, (section, field.name)
            assert flat not in seen, (flat, seen.get(flat), section)
            seen[flat] = section
    assert {name for name in McpSettings.model_fields if name.startswith("auth_")} <= set(seen)


def test_the_auth_section_never_shows_the_client_secret() -> None:
    """The introspection client's secret stays out of the section's repr."""
    assert "s3cret" not in repr(AUTH.auth)
    assert AUTH.auth.client_secret == "s3cret"


def test_the_input_section_never_shows_the_request_state_key() -> None:
    """The key sealing requestState stays out of the section's repr."""
    assert "a-key-shared" not in repr(OTHERS.input)
    assert OTHERS.input.key == "a-key-shared-by-every-replica"
