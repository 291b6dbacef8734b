"""The soak rig: a real redis-server and one uvicorn replica of tests/soak/app.py using it
for its bus and store (tasks, 2025-era sessions, resumable streams)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from ..fleet.conftest import SETTINGS as FLEET_SETTINGS
from ..servers import RedisServer, Worker
from ..tasks.conftest import redis_server  # noqa: F401 (the fixture, shared)

APP = "tests.soak.app:app"
CHANNEL = "mcp_asgi:soak"
TTL = "20"
"""Seconds every Redis key the replica writes lives unused (tasks, 2025-era sessions and
their streams' event logs): short, so the key count reaches its steady state within the
warm-up; a key written without its TTL, or refreshed forever, would grow."""

SETTINGS = {
    **FLEET_SETTINGS,
    "MCP_TASK_TTL": TTL,
    "MCP_SESSION_TTL": TTL,
    "MCP_SESSION_IDLE_TTL": TTL,
    "MCP_LEGACY_RESUME_TTL": TTL,
    # every session comes from 127.0.0.1, and the abandoned ones live until their TTL
    "MCP_MAX_SESSIONS_PER_CLIENT": "100000",
}


@pytest.fixture
def replica(redis_server: RedisServer, tmp_path: Path) -> Iterator[Worker]:  # noqa: F811
    """One replica on the Redis, answering (SOAK_LD_PRELOAD=path: with that library
    preloaded, e.g. another malloc, in the replica alone)."""
    preload = os.environ.get("SOAK_LD_PRELOAD")
    settings = {**SETTINGS, "LD_PRELOAD": preload} if preload else SETTINGS
    worker = Worker(redis_server.url, CHANNEL, app=APP, settings=settings)
    try:
        yield worker
    finally:
        worker.stop()
