"""`RequestRuntime`: every per-request setting reaches the scope and the context it names.

The runtime calls `RequestScope` and `Context` with positional arguments (a call with
keywords costs a request a few percent on Python 3.11): two settings of one type swapped
in those calls would pass the type checker, so each is given a value of its own here and
read back where it lands.
"""

from __future__ import annotations

from typing import Any

import pytest

from mcp_asgi import McpServer
from mcp_asgi.http.reply import ReplyWriter
from mcp_asgi.lifecycle.outcome import ScopeObserver
from mcp_asgi.protocol.request import McpRequest
from mcp_asgi.runtime import RequestRuntime
from mcp_asgi.settings import RuntimeSettings


def _request(method: str = "tools/call") -> McpRequest:
    return McpRequest(7, method, {"name": "echo"}, "2026-07-28", {}, None, None, None, {})


async def _send(message: Any) -> None:
    pass


def _runtime(**settings: Any) -> RequestRuntime:
    server = McpServer("runtime")

    @server.tool()
    async def echo(text: str) -> str:
        return text

    values: dict[str, Any] = {
        "max_request_duration": 42.0,
        "keepalive_interval": 7.0,
        "cancel_grace": 1.5,
        "process_kill_grace": 2.5,
        "progress_min_interval": 0.25,
        "max_threads": 3,
    }
    return RequestRuntime(server, RuntimeSettings(**{**values, **settings}))


async def test_each_runtime_setting_reaches_the_scope_and_context_it_names() -> None:
    runtime = _runtime()
    observer = ScopeObserver()
    clock_now = 100.0
    scope = runtime.scope(
        _request(), ReplyWriter(_send, "json"), observer, 90.0, lambda: clock_now, None, False
    )
    assert scope.time_left() == pytest.approx(32.0)  # 42 s from its arrival at 90, read at 100
    assert scope.clock() == clock_now
    fields = {name: getattr(scope, "_" + name) for name in ("cancel_grace", "keepalive_interval")}
    assert fields == {"cancel_grace": 1.5, "keepalive_interval": 7.0}
    assert scope._observer is observer
    assert scope._cancel_on_disconnect is False
    assert scope._on_server_end is None
    assert scope.work._threads is runtime.threads

    asgi_scope = {"type": "http", "method": "POST", "path": "/mcp", "headers": []}
    ctx = runtime.context(scope, None, asgi_scope, b"{}")
    assert ctx.cancel_grace == 1.5
    assert (ctx._min_interval, ctx._kill_grace) == (0.25, 2.5)
    assert await ctx.request.body() == b"{}"
    assert ctx.task_id is None


async def test_without_a_deadline_setting_the_scope_has_none() -> None:
    runtime = _runtime(max_request_duration=None, keepalive_interval=None)
    scope = runtime.scope(_request(), ReplyWriter(_send, "json"), ScopeObserver())
    assert scope.time_left() is None
    assert scope._keepalive_interval == 0  # RequestScope's "no keep-alives"
    assert scope._cancel_on_disconnect is True
