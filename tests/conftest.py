"""Fixtures for every folder: the event loop (asyncio; asyncio and trio for tests marked
`both_loops`; trio on a fake clock for tests marked `fake_clock`; asyncio also with the
plain-anyio path forced for the tests of tests/lifecycle and tests/loop), an in-memory OpenTelemetry
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

from mcp_asgi import _loop

from .helpers import Otel as Otel  # re-exported: some tests import it from here
from .live_marker import named_fixtures, starts_something
from .servers import RedisCluster, redis_executable

_PR_SET_CHILD_SUBREAPER = 36
BOTH_LOOPS = ("asyncio", "trio")
PLAIN = "asyncio-plain"  # asyncio with the plain-anyio path forced (mcp_asgi._loop.switch)
# Folders whose tests also run on the plain-anyio path (unless marked `fast_paths`).
_BOTH_PATHS_FOLDERS = frozenset({"lifecycle", "loop"})
# Folders whose tests drive the official clients, the conformance suite or a real backend.
_INTEROP_FOLDERS = frozenset({"interop", "conformance", "backends"})


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "both_loops: run each async test on asyncio and on trio")
    config.addinivalue_line(
        "markers", "fake_clock: run each async test on trio with the `fake_clock` fixture's clock"
    )
    config.addinivalue_line(
        "markers",
        "both_paths: run each async test on asyncio also with the plain-anyio path forced "
        "(every test of tests/lifecycle and tests/loop is)",
    )
    config.addinivalue_line(
        "markers", "fast_paths: tests asyncio's fast paths themselves (never the plain path)"
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
    """A test marked `both_loops` runs once per loop in BOTH_LOOPS, and one marked
    `both_paths` (or in a folder of _BOTH_PATHS_FOLDERS) once more on asyncio with the
    plain-anyio path forced, unless it names its loop itself
    (`@pytest.mark.parametrize("anyio_backend", [...])`)."""
    test = metafunc.definition
    if "anyio_backend" not in metafunc.fixturenames:
        return
    for mark in test.iter_markers("parametrize"):
        names = mark.args[0] if mark.args else mark.kwargs.get("argnames", ())
        if isinstance(names, str):
            names = [n.strip() for n in names.split(",")]
        if "anyio_backend" in names:
            return
    loops = list(BOTH_LOOPS) if test.get_closest_marker("both_loops") else ["asyncio"]
    if _both_paths(test):
        loops.insert(1, PLAIN)
    if len(loops) > 1:
        metafunc.parametrize("anyio_backend", loops, indirect=True)


def _both_paths(test: pytest.Function) -> bool:
    """Whether `test` runs on the plain-anyio path too."""
    if test.get_closest_marker("fake_clock") or test.get_closest_marker("fast_paths"):
        return False  # on trio only, or about the fast paths themselves
    folder = test.path.relative_to(test.config.rootpath).parts[1:2]
    return bool(folder and folder[0] in _BOTH_PATHS_FOLDERS) or bool(
        test.get_closest_marker("both_paths")
    )


@pytest.fixture
def anyio_backend(request: pytest.FixtureRequest) -> Iterator[str | tuple[str, dict[str, Any]]]:
    """Run async tests on asyncio (what uvicorn uses), or on the loop `both_loops` chose
    (asyncio with the plain-anyio path forced, for `both_paths`), or (marked `fake_clock`)
    on trio with a fake clock."""
    if request.node.get_closest_marker("fake_clock") is not None:
        yield ("trio", {"clock": request.getfixturevalue("fake_clock")})
        return
    loop = str(getattr(request, "param", "asyncio"))
    if loop != PLAIN:
        yield loop
        return
    was = _loop.plain_anyio()
    _loop.use_plain_anyio(True)
    try:
        yield "asyncio"
    finally:
        _loop.use_plain_anyio(was)


@pytest.fixture(autouse=True)
def _fast_paths(request: pytest.FixtureRequest) -> Iterator[None]:
    """A test marked `fast_paths` runs with them on, also in a run with the plain-anyio
    path forced from the environment (`MCP_ASGI_PLAIN_ANYIO=1 pytest ...`)."""
    if request.node.get_closest_marker("fast_paths") is None:
        yield
        return
    was = _loop.plain_anyio()
    _loop.use_plain_anyio(False)
    try:
        yield
    finally:
        _loop.use_plain_anyio(was)


@pytest.fixture
def fake_clock() -> MockClock:
    """The event loop's clock for a test marked `fake_clock` (trio's `MockClock`, handed to
    trio through anyio's backend options). It jumps to the next deadline as soon as every
    task waits, so a timer that is not about real time fires at once and exactly on time;
    `fake_clock.jump(s)` moves it by hand (a handler "holding" the loop for `s` seconds).
    Deadlines are absolute times on the loop's clock (mcp_asgi._loop.clock), so this
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
