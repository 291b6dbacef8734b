"""The fleet: three uvicorn replicas of tests/fleet/app.py on one redis-server, behind a
real HAProxy that health-checks each through GET /health, and their rolling restart
(SIGTERM, drain, start again on the same port, back in the balancer) while load runs."""

from __future__ import annotations

import csv
import io
import itertools
import json
import socket
import subprocess
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..helpers import is_ours
from ..servers import RedisServer, Worker, free_port, wait_ready

APP = "tests.fleet.app:app"
REPLICAS = 3
CHANNEL = "mcp_asgi:fleet"

HAPROXY_CONFIG = """\
global
    maxconn 2000
    log stdout format raw local0 info
    stats socket {socket} mode 600 level admin

defaults
    mode http
    log global
    option httplog
    timeout connect 1s
    timeout client 60s
    timeout server 60s
    # a replica that refuses the connection (it is draining or down) or closes an idle
    # keep-alive connection before answering: the request never reached the app, so
    # HAProxy sends it to another replica
    retries 3
    option redispatch 1
    retry-on conn-failure empty-response
    # no keep-alive to the replicas: a draining uvicorn closes its idle connections, and
    # a request HAProxy sends on one at that moment is not retried: HAProxy closes the
    # client's connection without an answer (HTTP lets the client resend; the official
    # SDKs do not). A fresh connection per request is refused instead, and redispatched.
    option http-server-close

frontend mcp
    bind 127.0.0.1:{port}
    default_backend replicas

backend replicas
    balance roundrobin
    option httpchk GET /health
    http-check expect status 200
    # a replica draining refuses connections at once (uvicorn closes its socket on
    # SIGTERM): those requests are redispatched, and two failed checks take it out; a
    # live replica slow to answer on a loaded machine is not taken out for that
    timeout check 5s
    default-server inter 300ms fall 2 rise 2
{servers}
"""


@dataclass
class Restart:
    """One replica's restart, on the test's clock (time.time())."""

    name: str
    pid: int
    signalled: float
    exited: float = 0.0
    back: float = 0.0


@dataclass
class Fleet:
    """The replicas, the balancer in front of them, and what their restarts did."""

    redis: RedisServer
    workdir: Path
    haproxy: str
    settings: dict[str, str]
    replicas: list[Worker] = field(default_factory=list)
    restarts: list[Restart] = field(default_factory=list)
    port: int = 0
    _balancer: subprocess.Popen[bytes] | None = None
    _started: Iterator[int] = field(default_factory=itertools.count)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def spans_dir(self) -> Path:
        return self.workdir / "spans"

    @property
    def _socket(self) -> Path:
        return self.workdir / "haproxy.sock"

    def start(self) -> None:
        self.spans_dir.mkdir(exist_ok=True)
        with ThreadPoolExecutor(REPLICAS) as pool:  # the imports alone take seconds each
            starting = [pool.submit(self._replica) for _ in range(REPLICAS)]
        self.replicas = [f.result() for f in starting if f.exception() is None]
        for f in starting:
            if f.exception() is not None:
                raise AssertionError("a replica did not start") from f.exception()
        self.port = free_port()
        servers = "\n".join(
            f"    server r{i} 127.0.0.1:{w.port} check" for i, w in enumerate(self.replicas)
        )
        config = self.workdir / "haproxy.cfg"
        config.write_text(
            HAPROXY_CONFIG.format(socket=self._socket, port=self.port, servers=servers)
        )
        subprocess.run([self.haproxy, "-c", "-q", "-f", str(config)], check=True)
        with (self.workdir / "haproxy.log").open("ab") as log:  # the child keeps its copy
            self._balancer = subprocess.Popen(
                [self.haproxy, "-db", "-f", str(config)], stdout=log, stderr=subprocess.STDOUT
            )
        for i in range(REPLICAS):
            self._until_up(i)

    def _replica(self, port: int | None = None) -> Worker:
        settings = {**self.settings, "FLEET_SPANS": str(self.spans_dir)}
        log = self.workdir / f"replica-{next(self._started)}.log"
        return Worker(self.redis.url, CHANNEL, app=APP, settings=settings, port=port, log=log)

    def _until_up(self, i: int) -> None:
        wait_ready(lambda: self.status(f"r{i}") == "UP", f"r{i} UP in HAProxy", timeout=60)

    def status(self, name: str) -> str:
        """The replica's state as HAProxy sees it (UP, DOWN, ...), from its stats socket."""
        with socket.socket(socket.AF_UNIX) as sock:
            sock.connect(str(self._socket))
            sock.sendall(b"show stat\n")
            data = b""
            while chunk := sock.recv(65536):
                data += chunk
        rows = csv.DictReader(io.StringIO(data.decode().lstrip("# ")))
        return next(r["status"] for r in rows if r["svname"] == name)

    def rolling_restart(self) -> None:
        """Restart the replicas one by one: SIGTERM, wait for the exit (the drain), start on
        the same port, wait until HAProxy has it UP again before the next one."""
        for i, old in enumerate(self.replicas):
            restart = Restart(f"r{i}", old.pid, time.time())
            self.restarts.append(restart)
            old.stop()
            restart.exited = time.time()
            self.replicas[i] = self._replica(old.port)
            self._until_up(i)
            restart.back = time.time()

    def stop(self) -> None:
        if self._balancer is not None:
            self._balancer.terminate()
            self._balancer.wait(10)
        for worker in self.replicas:
            worker.stop()

    def unusual_log_lines(self) -> list[str]:
        """HAProxy's log lines of requests that did not end normally (termination state
        other than `----`), for the report of a failed run."""
        log = self.workdir / "haproxy.log"
        lines = log.read_text(errors="replace").splitlines() if log.exists() else []
        return [line for line in lines if '"' in line and " ---- " not in line]

    def replica_records(self) -> list[str]:
        """mcp_asgi's records (WARNING and up) from every replica process, each prefixed
        with its log file's name (the log also holds uvicorn's own lines)."""
        return [
            f"{path.stem}: {line}"
            for path in sorted(self.workdir.glob("replica-*.log"))
            for line in path.read_text(errors="replace").splitlines()
            if is_ours(line)
        ]

    def spans(self, pid: int | None = None) -> list[dict[str, Any]]:
        """Every span the replica process `pid` exported (default: every process)."""
        pattern = "*.jsonl" if pid is None else f"{pid}.jsonl"
        return [
            json.loads(line)
            for path in sorted(self.spans_dir.glob(pattern))
            for line in path.read_text().splitlines()
            if line
        ]
