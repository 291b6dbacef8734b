"""A real redis-server on 127.0.0.1 and real uvicorn worker processes for the bus tests."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import redis

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def wait(predicate: object, what: str, timeout: float = 15) -> None:
    """Poll `predicate()` until it is true (readiness, never a timing assertion)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            if predicate():  # type: ignore[operator]
                return
        except Exception:
            pass
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not happen")
        time.sleep(0.02)


class RedisServer:
    """redis-server on a free loopback port; `stop()` and `start()` again on the same port."""

    def __init__(self, executable: str, workdir: Path) -> None:
        self.executable = executable
        self.workdir = workdir
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self._process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self._process = subprocess.Popen(
            [
                self.executable,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(self.workdir),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait(self.ping, "redis-server start")

    def ping(self) -> bool:
        with redis.Redis.from_url(self.url, socket_timeout=1) as client:
            return bool(client.ping())

    def subscribers(self, channel: str) -> int:
        with redis.Redis.from_url(self.url, socket_timeout=1) as client:
            counts = dict(client.pubsub_numsub(channel))
            return int(counts.get(channel.encode(), 0))

    def stop(self) -> None:
        if self._process is not None:
            self._process.kill()
            self._process.wait(10)
            self._process = None


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


class Worker:
    """`uvicorn tests.redis_app:app` in its own process, sharing the bus through Redis."""

    def __init__(self, redis_url: str, channel: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = dict(os.environ, MCP_BUS_URL=redis_url, MCP_BUS_CHANNEL=channel)
        self._process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "uvicorn",
                "tests.redis_app:app",
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--log-level",
                "warning",
                "--timeout-graceful-shutdown",
                "1",
            ],
            cwd=ROOT,
            env=env,
        )
        wait(self.healthy, f"worker on port {self.port}")

    def healthy(self) -> bool:
        assert self._process.poll() is None, "worker exited"
        return httpx.get(self.url + "/health", timeout=1).status_code == 200

    def post(self, path: str) -> None:
        response = httpx.post(self.url + path, timeout=5)
        assert response.status_code == 200, response.text

    def stop(self) -> None:
        self._process.terminate()
        try:
            self._process.wait(10)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait(10)


@pytest.fixture
def workers(redis_server: RedisServer) -> Iterator[tuple[Worker, Worker, str]]:
    """Two worker processes on one Redis channel: (a, b, channel)."""
    channel = f"mcp_asgi:test:{redis_server.port}"
    a = Worker(redis_server.url, channel)
    try:
        b = Worker(redis_server.url, channel)
        try:
            wait(lambda: redis_server.subscribers(channel) == 2, "both workers subscribed")
            yield a, b, channel
        finally:
            b.stop()
    finally:
        a.stop()
