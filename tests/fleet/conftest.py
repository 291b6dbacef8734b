"""The fleet rig (tests/fleet/rig.py): a real redis-server, three uvicorn replicas of
tests/fleet/app.py sharing it (bus, task store, 2025-era sessions), and HAProxy in front,
health-checking each replica. `make test-deps` installs redis-server and haproxy."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from ..servers import RedisServer
from ..tasks.conftest import redis_server  # noqa: F401 (the fixture, shared)
from .rig import Fleet

SETTINGS = {
    # one requestState key and a short task lease (renewed every second), shared by every
    # replica; no replica dies without writing its tasks' outcomes here, so the lease never
    # decides one: short enough to renew often under load, long enough for a loaded
    # 2-core machine (tests/tasks runs out leases on purpose)
    "MCP_REQUEST_STATE_KEY": "the-fleet-shares-this-secret",
    "MCP_TASK_LEASE": "3",
    # every client is the balancer's address: no per-client rate limit in the way
    "MCP_RATE_LIMIT": "100000",
    "MCP_RATE_LIMIT_BURST": "100000",
}


def _haproxy() -> str:
    executable = shutil.which("haproxy") or shutil.which("haproxy", path="/usr/sbin:/sbin")
    if executable is None:
        if os.environ.get("CI"):
            pytest.fail("haproxy is not installed (make test-deps installs it)")
        pytest.skip("haproxy is not installed: run `make test-deps` or apt-get install it")
    return executable


@pytest.fixture
def fleet(redis_server: RedisServer, tmp_path: Path) -> Iterator[Fleet]:  # noqa: F811
    """Three replicas behind HAProxy, all UP."""
    rig = Fleet(redis_server, tmp_path, _haproxy(), dict(SETTINGS))
    try:
        rig.start()
        yield rig
    finally:
        rig.stop()
        print("HAProxy, requests that did not end normally:", *rig.unusual_log_lines(), sep="\n")
        print("The replicas' mcp_asgi records:", *rig.replica_records(), sep="\n")
