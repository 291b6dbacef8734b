"""The task app on a live uvicorn (`url`, with what its handlers saw: `seen`); a real
redis-server (or the session's Redis Cluster), and two uvicorn replicas of the task app
sharing it."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from mcp_asgi.testing import serve

from ..servers import RedisServer, Worker
from .apps import Seen, task_app

WORKER_APP = "tests.tasks.worker_app:app"
LEASE = "1.5"  # seconds: a renewal (and a look at the store) every half second


@pytest.fixture
def seen() -> Seen:
    return Seen()


@pytest.fixture
def url(seen: Seen) -> Iterator[str]:
    """The task app on a live uvicorn: its base URL."""
    with serve(task_app(seen), timeout_graceful_shutdown=1) as live:
        yield live.url


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[RedisServer]:
    """A fresh redis-server; skipped (outside CI only) when redis-server is not installed."""
    executable = shutil.which("redis-server")
    if executable is None:
        if os.environ.get("CI"):
            pytest.fail("redis-server is not installed (make test installs it)")
        pytest.skip("redis-server is not installed: run `make test` or apt-get install it")
    server = RedisServer(executable, tmp_path)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def replica_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """What both replicas share besides the store: a short lease, one requestState key."""
    monkeypatch.setenv("MCP_TASK_LEASE", LEASE)
    monkeypatch.setenv("MCP_REQUEST_STATE_KEY", "replicas-share-this-secret")


def replica(redis_url: str, channel: str) -> Worker:
    """One replica of the task app, its store and bus on `redis_url`."""
    return Worker(redis_url, channel, app=WORKER_APP)
