"""Shared fixtures: an in-memory OpenTelemetry pipeline, a child subreaper for process-group
checks, and a real redis-server with two uvicorn workers sharing it."""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from .helpers import Otel as Otel  # re-exported: some tests import it from here
from .servers import RedisServer, Worker, wait_ready

_PR_SET_CHILD_SUBREAPER = 36


@pytest.fixture
def anyio_backend() -> str:
    """Run async tests on asyncio (what uvicorn uses)."""
    return "asyncio"


@pytest.fixture
def otel() -> Iterator[Otel]:
    """A fresh tracer and meter provider with in-memory exporters."""
    pipeline = Otel()
    yield pipeline
    pipeline.shutdown()


@pytest.fixture
def pgid_file(tmp_path: Path) -> Path:
    """Where a test's shell writes its pid (`echo $$ > file`), its process group id."""
    return tmp_path / "pgid"


@pytest.fixture
def subreaper() -> Iterator[None]:
    """Make this test process adopt orphaned grandchildren (Linux), as a real init would
    reap them: in this sandbox PID 1 never reaps, and a zombie still holds its process
    group, so `killpg(pgid, 0)` could not tell "all dead" from "still running"."""
    if not sys.platform.startswith("linux"):
        pytest.skip("process groups are checked on Linux")
    libc = ctypes.CDLL(None, use_errno=True)
    assert libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    try:
        yield
    finally:
        libc.prctl(_PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)
        with contextlib.suppress(ChildProcessError):
            while os.waitpid(-1, os.WNOHANG)[0]:
                pass


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
