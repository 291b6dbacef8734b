"""What the soak measures of its replica, every few seconds: RSS, open file descriptors and
threads (from /proc/<pid>), asyncio tasks (the app's test-only route) and Redis keys
(DBSIZE), with how many requests the load had sent by then; with SOAK_DIAG=1, the
replica's memory diagnostics too (tests/soak/diag.py), and with SOAK_MALLOC_TRIM=1 as
well, `malloc_trim(0)` in the replica before each sample."""

from __future__ import annotations

import os
import time
from dataclasses import asdict, dataclass
from typing import Any

import httpx
import redis

from . import diag
from .app import TASKS_PATH

RESOURCES = ("rss_mb", "fds", "threads", "tasks", "keys")
"""The resources sampled, as `Sample` names them."""


@dataclass(frozen=True)
class Sample:
    """One look at the replica: seconds since the load began, requests sent so far, each
    resource of RESOURCES, and with SOAK_DIAG=1 what GET /soak/diag answered."""

    t: float
    requests: int
    rss_mb: float
    fds: int
    threads: int
    tasks: int
    keys: int
    diag: dict[str, Any] | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def proc_status(pid: int) -> dict[str, str]:
    """/proc/<pid>/status as a dict (VmRSS, Threads, ...)."""
    with open(f"/proc/{pid}/status") as status:
        return dict(line.rstrip("\n").split(":\t", 1) for line in status if ":\t" in line)


def take(pid: int, url: str, redis_url: str, started: float, requests: int) -> Sample:
    """Sample process `pid` (serving at `url`) and the Redis at `redis_url` (blocking)."""
    status = proc_status(pid)
    rss_kb = int(status["VmRSS"].split()[0])
    fds = len(os.listdir(f"/proc/{pid}/fd"))
    tasks = httpx.get(url + TASKS_PATH, timeout=10).json()["tasks"]
    with redis.Redis.from_url(redis_url, socket_timeout=5) as client:
        keys = int(client.dbsize())
    if diag.ENABLED and os.environ.get("SOAK_MALLOC_TRIM", "") not in ("", "0"):
        httpx.get(url + diag.PREFIX + "/trim", timeout=30)  # an experiment: is it free memory?
    figures = httpx.get(url + diag.PREFIX, timeout=30).json() if diag.ENABLED else None
    return Sample(
        t=round(time.monotonic() - started, 2),
        requests=requests,
        rss_mb=round(rss_kb / 1024, 2),
        fds=fds,
        threads=int(status["Threads"]),
        tasks=int(tasks),
        keys=keys,
        diag=figures,
    )
