"""tests/live_marker.py: what `make check` leaves out is found from the code."""

from __future__ import annotations

import subprocess
import sys

import anyio

from mcp_asgi import McpServer
from mcp_asgi.testing import serve

from .helpers import mcp_app, serving
from .live_marker import named_fixtures, starts_something


def _pure() -> int:
    return len([1, 2])


def _serves() -> None:
    with serve(mcp_app(McpServer("x"))):
        pass


def _through_a_helper() -> None:
    with serving(mcp_app(McpServer("x"))):
        pass


def _nested_process() -> None:
    async def inner() -> None:
        await anyio.run_process([sys.executable, "-c", "pass"])

    del inner


def _runs() -> None:
    subprocess.run([sys.executable, "-c", "pass"], check=True)


class _Starter:
    def start(self) -> None:
        _runs()


def _uses_a_class() -> None:
    _Starter().start()


def _asks_by_name(request: object) -> object:
    return request.getfixturevalue("redis_server")  # type: ignore[attr-defined]


def test_code_that_starts_nothing_is_not_live() -> None:
    """A function that starts nothing (and refers to no helper that does) is not live."""
    assert not starts_something(_pure)
    assert not starts_something(mcp_app)


def test_servers_and_processes_are_found_through_helpers() -> None:
    """Serving, a helper that serves, a process in a nested function, a class whose method
    starts one: each is live."""
    for fn in (_serves, _through_a_helper, _nested_process, _runs, _uses_a_class):
        assert starts_something(fn), fn.__name__


def test_fixtures_asked_for_by_name_are_followed() -> None:
    """`request.getfixturevalue("x")` names a fixture whose own code is walked too."""
    assert "redis_server" in list(named_fixtures(_asks_by_name))
    assert list(named_fixtures(_pure)) == []
