"""`RequestRuntime`: how a request's scope and its handler's `Context` are built, on every
transport (the 2026-07-28 endpoint, 2025-era sessions, stdio, tasks).

One per endpoint (or stdio connection), made from its settings at start-up: it holds the
per-request settings (`McpSettings.runtime`) and the worker-thread slots (`max_threads`)
that every request of the endpoint shares, tasks included. A per-request setting is added
here (and to `RuntimeSettings`), once::

    runtime = RequestRuntime(server, settings.runtime)
    scope = runtime.scope(request, writer, observer=observer)   # deadline, grace, threads
    ctx = runtime.context(scope, inputs=..., asgi_scope=..., body=...)

The options the server's results and input rounds take from the settings are made here
too (`result_options`, `input_rounds`), for the same reason.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from starlette.types import Scope

from mcp_asgi._loop import Clock
from mcp_asgi.http.reply import ReplyWriter
from mcp_asgi.input.asking import Asking
from mcp_asgi.input.rounds import InputRounds
from mcp_asgi.lifecycle.outcome import ScopeObserver
from mcp_asgi.lifecycle.scope import RequestScope
from mcp_asgi.lifecycle.work import ThreadSlots
from mcp_asgi.protocol.request import McpRequest
from mcp_asgi.server.context import Context
from mcp_asgi.server.listen import LISTEN
from mcp_asgi.server.mcp_server import McpServer, ResultOptions
from mcp_asgi.settings import InputSettings, ResultSettings, RuntimeSettings


class RequestRuntime:
    """Builds the scope and context of each request of one endpoint."""

    __slots__ = ("_server", "_settings", "_threads")

    def __init__(self, server: McpServer, settings: RuntimeSettings) -> None:
        self._server = server
        self._settings = settings
        self._threads = ThreadSlots(settings.max_threads)

    @property
    def cancel_grace(self) -> float:
        """Seconds a cancelled handler has to exit (`cancel_grace`)."""
        return self._settings.cancel_grace

    @property
    def threads(self) -> ThreadSlots:
        """The worker-thread slots of this endpoint's `def` handlers."""
        return self._threads

    def scope(
        self,
        request: McpRequest,
        writer: ReplyWriter,
        observer: ScopeObserver,
        started: float | None = None,
        clock: Clock | None = None,
        task: asyncio.Task[object] | None = None,
        cancel_on_disconnect: bool = True,
    ) -> RequestScope:
        """A request's scope: its deadline (`max_request_duration` or the tool's own; none
        for a listen stream, which the server ends gracefully instead), grace period,
        keep-alives and thread slots. `started` (on the loop's clock, default now) is when
        it arrived: the deadline counts from it; `clock` the clock it was read on (default
        the running loop's); `task` the task it will run in, where the caller has it
        (`native_task()`; default: asked when needed)."""
        settings, server = self._settings, self._server
        listen = request.method == LISTEN
        limit = settings.max_request_duration
        return RequestScope(  # positional, in its order: see `context`
            request,
            writer,
            None if listen else shortest(limit, server.timeout_for(request)),  # timeout
            settings.cancel_grace,
            settings.keepalive_interval or 0,  # keepalive_interval; RequestScope's 0: none
            observer,
            cancel_on_disconnect,
            server.subscriptions.server_end(request) if listen else None,  # on_server_end
            clock,
            started,
            self._threads,
            task,
        )

    def task_scope(
        self,
        request: McpRequest,
        writer: ReplyWriter,
        *,
        observer: ScopeObserver,
        timeout: float | None,
    ) -> RequestScope:
        """The scope of a task's work: its own deadline, no connection to lose, so no
        keep-alives either."""
        return RequestScope(
            request,
            writer,
            timeout=timeout,
            cancel_grace=self._settings.cancel_grace,
            keepalive_interval=0,
            observer=observer,
            cancel_on_disconnect=False,
            threads=self._threads,
        )

    def context(
        self,
        request_scope: RequestScope,
        inputs: Asking | None = None,
        asgi_scope: Scope | None = None,
        body: bytes = b"",
        task_id: str | None = None,
        start_task: Callable[[], Awaitable[bool]] | None = None,
    ) -> Context:
        """The `Context` a request's handler gets."""
        settings = self._settings
        # positional, in the parameters' order: a call with keywords matches each name
        # against the parameters (Python 3.11: ≈ 400 instructions a keyword, for this one
        # and `RequestScope`'s a few percent of a request; docs/benchmarks.md)
        return Context(
            request_scope,
            settings.progress_min_interval,
            settings.process_kill_grace,
            settings.cancel_grace,
            inputs,
            asgi_scope,
            body,
            task_id,
            start_task,
        )


def result_options(settings: ResultSettings, *, private: bool = False) -> ResultOptions:
    """How results are paged, cached and how long a listen stream lasts (`private`: the
    endpoint authenticates, so list results are never shared between callers)."""
    return ResultOptions(
        page_size=settings.page_size,
        ttl_ms=round(settings.list_ttl * 1000),
        cache_scope="private" if private else settings.cache_scope,
        listen_max_duration=settings.listen_max_duration,
    )


def input_rounds(settings: InputSettings) -> InputRounds:
    """The 2026-07-28 input rounds, sealed with `request_state_key` when it is set."""
    key = settings.key
    return InputRounds(key.encode() if key else None, ttl=settings.ttl)


def shortest(a: float | None, b: float | None) -> float | None:
    """The shorter of two durations, None standing for no limit."""
    if a is None:
        return b
    return a if b is None else min(a, b)
