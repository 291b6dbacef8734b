"""The plain-anyio switch: `MCP_ASGI_PLAIN_ANYIO=1` turns it on at import, and with it on
the fast paths step aside on asyncio (the rest of tests/lifecycle and tests/loop runs on
both paths: tests/conftest.py)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator

import pytest

from mcp_asgi import _loop
from mcp_asgi._loop import switch

pytestmark = [pytest.mark.anyio, pytest.mark.fast_paths]  # each test sets the path itself


@pytest.fixture
def use_plain() -> Iterator[Callable[[bool], None]]:
    """`_loop.use_plain_anyio`, set back as it was after the test."""
    was = _loop.plain_anyio()
    yield _loop.use_plain_anyio
    _loop.use_plain_anyio(was)


@pytest.mark.parametrize(("value", "plain"), [("1", True), ("0", False), ("", False)])
def test_the_environment_sets_it_at_import(value: str, plain: bool) -> None:
    env = {**os.environ, switch.ENV: value}
    code = f"import runpy; print(runpy.run_path({switch.__file__!r})['plain_anyio']())"
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == str(plain)


def test_a_value_it_cannot_read_is_refused_at_import() -> None:
    """`MCP_ASGI_PLAIN_ANYIO=2` is neither on nor off: the import fails naming it."""
    env = {**os.environ, switch.ENV: "2"}
    code = f"import runpy; runpy.run_path({switch.__file__!r})"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.returncode != 0
    assert f"{switch.ENV}='2'" in out.stderr


async def where_things_run() -> tuple[bool, object, str]:
    """Whether the fast paths apply, the clock, and the name of a bounded call's thread."""
    name = await _loop.run_in_thread(lambda: threading.current_thread().name, bounded=True)
    clock = _loop.loop_clock()
    # the clock asked of the request's task (as the middleware asks it) is the same one
    assert _loop.task_clock(_loop.native_task()) == clock
    return _loop.on_asyncio(), clock, name


async def test_the_fast_paths_apply_on_asyncio_without_it(
    use_plain: Callable[[bool], None],
) -> None:
    use_plain(False)
    fast, clock, thread = await where_things_run()
    assert fast
    assert clock is time.monotonic
    assert thread == "mcp_asgi worker"


async def test_with_it_on_asyncio_runs_on_plain_anyio(use_plain: Callable[[bool], None]) -> None:
    use_plain(True)
    fast, clock, thread = await where_things_run()
    assert not fast
    assert clock == asyncio.get_running_loop().time
    assert thread != "mcp_asgi worker"  # one of anyio's own


@pytest.mark.skipif(sys.version_info < (3, 11), reason="no native cancellation before 3.11")
async def test_a_request_asks_for_its_task_once_and_hands_it_on(
    use_plain: Callable[[bool], None], monkeypatch: pytest.MonkeyPatch
) -> None:
    """On asyncio the middleware asks for the request's task once; the handler's scope and
    the runner are handed it, and ask nothing themselves."""
    from mcp_asgi import McpServer

    from ..helpers import call, mcp_app

    use_plain(False)
    server = McpServer("hand-off")

    @server.tool()
    async def echo(text: str) -> str:
        return text

    asked: list[str] = []

    def counted(name: str, ask: Callable[[], object]) -> Callable[[], object]:
        def asking() -> object:
            asked.append(name)
            return ask()

        return asking

    # the look-ups as those modules hold them (`_loop` exports a function `cheap_scope` that
    # shadows its module: the module is taken from sys.modules)
    scopes = sys.modules["mcp_asgi._loop.cheap_scope"]
    monkeypatch.setattr(scopes, "native_task", counted("scope", _loop.native_task))
    monkeypatch.setattr(
        "mcp_asgi.lifecycle.runner.asyncio_task", counted("runner", _loop.asyncio_task)
    )
    wire = await call(mcp_app(server), "tools/call", {"name": "echo", "arguments": {"text": "a"}})
    assert wire.status == 200
    assert asked == []
