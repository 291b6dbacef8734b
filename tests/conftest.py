"""Fixtures for every folder: the event loop (asyncio; asyncio and trio for tests marked
`both_loops`; trio on a fake clock for tests marked `fake_clock`), an in-memory OpenTelemetry
pipeline and a child subreaper for process-group checks. Each folder's own conftest.py holds
what only its tests use (tests/bus: a real redis-server with two uvicorn workers;
tests/lifecycle: the pgid file); the Redis Cluster is here, so that one serves the session.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from trio.testing import MockClock

from .helpers import Otel as Otel  # re-exported: some tests import it from here
from .live_marker import named_fixtures, starts_something
from .servers import RedisCluster, redis_executable

_PR_SET_CHILD_SUBREAPER = 36
BOTH_LOOPS = ("asyncio", "trio")
# Folders whose tests drive the official clients, the conformance suite or a real backend.
_INTEROP_FOLDERS = frozenset({"interop", "conformance", "backends"})


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "both_loops: run each async test on asyncio and on trio")
    config.addinivalue_line(
        "markers", "fake_clock: run each async test on trio with the `fake_clock` fixture's clock"
    )
    config.addinivalue_line(
        "markers",
        "live: starts a server, a subprocess or a backend (set by tests/live_marker.py; "
        "`make check` leaves these out)",
    )
    config.addinivalue_line(
        "markers", "interop: drives an official client, the conformance suite or a backend"
    )


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark the tests that start something `live`, and those of the interop folders
    `interop` (and `live`): `pytest -m "not live"` is the fast loop."""
    for item in items:
        folder = item.path.relative_to(item.config.rootpath).parts[1:2]
        if folder and folder[0] in _INTEROP_FOLDERS:
            item.add_marker(pytest.mark.interop)
            item.add_marker(pytest.mark.live)
        elif _is_live(item):
            item.add_marker(pytest.mark.live)


def _is_live(item: pytest.Item) -> bool:
    """Whether the test, or a fixture it uses (also one it asks for by name with
    `request.getfixturevalue("...")`), starts something."""
    if not isinstance(item, pytest.Function):
        return False
    if starts_something(item.function):
        return True
    manager = item.session._fixturemanager
    pending = list(item.fixturenames)
    seen: set[str] = set()
    while pending:
        name = pending.pop()
        if name in seen:
            continue
        seen.add(name)
        for fixture in manager.getfixturedefs(name, item) or ():
            if starts_something(fixture.func):
                return True
            pending.extend(named_fixtures(fixture.func))
    return False


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """A test marked `both_loops` runs once per loop in BOTH_LOOPS, unless it names its loop
    itself (`@pytest.mark.parametrize("anyio_backend", [...])`)."""
    test = metafunc.definition
    if "anyio_backend" not in metafunc.fixturenames or not test.get_closest_marker("both_loops"):
        return
    for mark in test.iter_markers("parametrize"):
        names = mark.args[0] if mark.args else mark.kwargs.get("argnames", ())
        if isinstance(names, str):
            names = [n.strip() for n in names.split(",")]
        if "anyio_backend" in names:
            return
    metafunc.parametrize("anyio_backend", BOTH_LOOPS, indirect=True)


@pytest.fixture
def anyio_backend(request: pytest.FixtureRequest) -> str | tuple[str, dict[str, Any]]:
    """Run async tests on asyncio (what uvicorn uses), or on the loop `both_loops` chose, or
    (marked `fake_clock`) on trio with a fake clock."""
    if request.node.get_closest_marker("fake_clock") is not None:
        return ("trio", {"clock": request.getfixturevalue("fake_clock")})
    return str(getattr(request, "param", "asyncio"))


@pytest.fixture
def fake_clock() -> MockClock:
    """The event loop's clock for a test marked `fake_clock` (trio's `MockClock`, handed to
    trio through anyio's backend options). It jumps to the next deadline as soon as every
    task waits, so a timer that is not about real time fires at once and exactly on time;
    `fake_clock.jump(s)` moves it by hand (a handler "holding" the loop for `s` seconds).
    Deadlines are absolute times on the loop's clock (mcp_asgi.lifecycle.clock), so this
    drives every request deadline, grace period and keep-alive. A worker thread runs in real
    time the clock cannot see: while one works, set `autojump_threshold = math.inf` and
    jump by hand."""
    return MockClock(autojump_threshold=0)


@pytest.fixture
def otel() -> Iterator[Otel]:
    """A fresh tracer and meter provider with in-memory exporters."""
    pipeline = Otel()
    yield pipeline
    pipeline.shutdown()


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


@pytest.fixture(scope="session")
def redis_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisCluster]:
    """A Redis Cluster of three masters, for the session: its users name their keys and
    channels apart (each test its own ids), and resume what they pause."""
    cluster = RedisCluster(redis_executable(), tmp_path_factory.mktemp("cluster"))
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()
