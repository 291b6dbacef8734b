"""A real redis-server, a Redis Cluster of three, and two uvicorn workers sharing one
channel on either."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ..servers import RedisCluster, RedisServer, Worker, redis_executable, wait_ready


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[RedisServer]:
    """A fresh redis-server; skipped (outside CI only) when redis-server is not installed."""
    server = RedisServer(redis_executable(), tmp_path)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def workers(request: pytest.FixtureRequest) -> Iterator[tuple[Worker, Worker, str]]:
    """Two worker processes on one Redis channel: (a, b, channel). On a fresh redis-server,
    or on the session's cluster for a test parametrized with `indirect=["workers"]` and
    "cluster"."""
    redis: RedisServer | RedisCluster
    if getattr(request, "param", "redis") == "cluster":
        redis = request.getfixturevalue("redis_cluster")
    else:
        redis = request.getfixturevalue("redis_server")
    channel = f"mcp_asgi:test:{request.node.name}"
    a = Worker(redis.url, channel)
    try:
        b = Worker(redis.url, channel)
        try:
            wait_ready(lambda: redis.subscribers(channel) == 2, "both workers subscribed")
            yield a, b, channel
        finally:
            b.stop()
    finally:
        a.stop()
