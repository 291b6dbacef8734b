"""Fixtures of tests/server's handler-API tests: the log the FastAPI dependencies write,
a probe, and the FastAPI host apps serving the servers of `handler_apps.py`."""

from __future__ import annotations

import pytest
from fastapi import FastAPI

from ..helpers import Probe
from .handler_apps import DependencyLog, depends_server, fastapi_host


@pytest.fixture
def dependency_log() -> DependencyLog:
    """What the dependencies of `depends_server` did, in order."""
    return DependencyLog()


@pytest.fixture
def probe() -> Probe:
    """What a handler saw."""
    return Probe()


@pytest.fixture
def depends_app(dependency_log: DependencyLog, probe: Probe) -> FastAPI:
    """A FastAPI app serving `depends_server` at /mcp (cancel grace 2 s)."""
    return fastapi_host(depends_server(probe), dependency_log, cancel_grace=2.0)
