"""A real redis-server, and two uvicorn workers sharing one channel on it."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from ..servers import RedisServer, Worker, wait_ready


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[RedisServer]:
    """A fresh redis-server; skipped (outside CI only) when redis-server is not installed."""
    executable = shutil.which("redis-server")
    if executable is None:
        if os.environ.get("CI"):
            pytest.fail("redis-server is not installed (make test installs it)")
        pytest.skip(
            "redis-server is not installed: run `make test` or apt-get install redis-server"
        )
    server = RedisServer(executable, tmp_path)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def workers(redis_server: RedisServer) -> Iterator[tuple[Worker, Worker, str]]:
    """Two worker processes on one Redis channel: (a, b, channel)."""
    channel = f"mcp_asgi:test:{redis_server.port}"
    a = Worker(redis_server.url, channel)
    try:
        b = Worker(redis_server.url, channel)
        try:
            wait_ready(lambda: redis_server.subscribers(channel) == 2, "both workers subscribed")
            yield a, b, channel
        finally:
            b.stop()
    finally:
        a.stop()
