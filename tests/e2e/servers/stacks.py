"""The servers of the matrix: how each is started (the command lines docs/deployment.md
recommends), and a running one as a real process on a free loopback port."""

from __future__ import annotations

import contextlib
import os
import signal
import ssl
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[3]
APP = "tests.e2e.servers.app:app"
EVENTS_ENV = "MCP_MATRIX_EVENTS"  # the file the app appends its events to
PY = sys.executable


@dataclass(frozen=True)
class Certs:
    """A test CA and a certificate for 127.0.0.1 it signed (files, for the server)."""

    ca: Path
    cert: Path
    key: Path


@dataclass(frozen=True)
class Stack:
    """One server configuration: its command line, and what the tests should expect."""

    name: str
    argv: Callable[[int, Certs | None], list[str]]
    tls: bool = False
    http2: bool = False
    lifespan: bool = True


def _uvicorn(http: str, loop: str) -> Callable[[int, Certs | None], list[str]]:
    def argv(port: int, certs: Certs | None) -> list[str]:
        return [
            *(PY, "-m", "uvicorn", APP, "--host", "127.0.0.1", "--port", str(port)),
            *("--http", http, "--loop", loop, "--timeout-graceful-shutdown", "1"),
            *("--log-level", "warning"),
        ]

    return argv


def _hypercorn(port: int, certs: Certs | None) -> list[str]:
    argv = [PY, "-m", "hypercorn", APP, "--bind", f"127.0.0.1:{port}"]
    argv += ["--graceful-timeout", "1", "--log-level", "warning"]
    if certs:
        argv += ["--certfile", str(certs.cert), "--keyfile", str(certs.key)]
    return argv


def _granian(port: int, certs: Certs | None) -> list[str]:
    return [
        *(PY, "-m", "granian", "--interface", "asgi", "--host", "127.0.0.1"),
        *("--port", str(port), "--workers", "1", "--workers-kill-timeout", "2"),
        *("--log-level", "warning", APP),
    ]


def _daphne(port: int, certs: Certs | None) -> list[str]:
    return [PY, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), "-v", "0", APP]


def _gunicorn(worker: str, graceful: int) -> Callable[[int, Certs | None], list[str]]:
    def argv(port: int, certs: Certs | None) -> list[str]:
        return [
            *(PY, "-m", "gunicorn", APP, "--bind", f"127.0.0.1:{port}", "--workers", "1"),
            *("--worker-class", worker, "--graceful-timeout", str(graceful)),
            *("--log-level", "warning"),
        ]

    return argv


STACKS = {
    stack.name: stack
    for stack in (
        Stack("uvicorn-h11", _uvicorn("h11", "asyncio")),
        Stack("uvicorn-httptools", _uvicorn("httptools", "uvloop")),
        Stack("hypercorn-h1", _hypercorn),
        Stack("hypercorn-h2", _hypercorn, tls=True, http2=True),
        Stack("granian", _granian),
        Stack("daphne", _daphne, lifespan=False),
        Stack("gunicorn", _gunicorn("uvicorn_worker.UvicornWorker", 2)),
        # the worker docs/deployment.md recommends (a graceful timeout for uvicorn)
        Stack(
            "gunicorn-mcp-worker", _gunicorn(f"{__package__}.gunicorn_worker.McpUvicornWorker", 4)
        ),
    )
}


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class ServerProcess:
    """`stack` serving the matrix app in its own process group, on a free port."""

    def __init__(self, stack: Stack, workdir: Path, certs: Certs | None = None) -> None:
        self.stack = stack
        self.certs = certs if stack.tls else None
        self.port = free_port()
        scheme = "https" if self.certs else "http"
        self.url = f"{scheme}://127.0.0.1:{self.port}"
        self.events_path = workdir / f"{stack.name}-{self.port}.events"
        self.log_path = workdir / f"{stack.name}-{self.port}.log"
        env = dict(os.environ, **{EVENTS_ENV: str(self.events_path)})
        env["PYTHONWARNINGS"] = "ignore"  # the server's own warnings are not the tests' errors
        self._log = self.log_path.open("wb")
        self.process = subprocess.Popen(
            stack.argv(self.port, self.certs),
            cwd=ROOT,
            env=env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def verify(self) -> ssl.SSLContext | bool:
        """What httpx verifies the server's certificate with (its test CA)."""
        return ssl.create_default_context(cafile=str(self.certs.ca)) if self.certs else False

    def wait_ready(self, timeout: float = 20) -> None:
        deadline = time.monotonic() + timeout
        while True:
            if self.process.poll() is not None:
                raise AssertionError(f"{self.stack.name} exited at start:\n{self.output()}")
            try:
                response = httpx.get(self.url + "/", verify=self.verify(), timeout=1)
                if response.status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise AssertionError(f"{self.stack.name} did not start:\n{self.output()}")
            time.sleep(0.05)

    def output(self) -> str:
        """The end of what the server printed."""
        return self.log_path.read_text(errors="replace")[-4000:]

    def events(self, **match: Any) -> list[dict[str, Any]]:
        import json

        try:
            text = self.events_path.read_text()
        except FileNotFoundError:
            return []
        lines = text.split("\n")[:-1]  # the last one is being written, or empty
        found = [json.loads(line) for line in lines if line.strip()]
        return [e for e in found if all(e.get(k) == v for k, v in match.items())]

    def signal(self, sig: signal.Signals) -> None:
        self.process.send_signal(sig)

    def stop(self) -> None:
        """SIGTERM, then SIGKILL for the whole group if it lingers."""
        if self.process.poll() is None:
            self.process.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(10)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(10)
        self._log.close()
