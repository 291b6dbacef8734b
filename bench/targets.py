"""The benchmark servers: one per target, each serving the same three tools.

Run as ``python -m bench.targets NAME --port PORT --exits FILE [--server SERVER]`` by
`bench.run`, with the interpreter of the venv the target lives in (the project's `.venv`
for mcp_asgi and the Starlette floor, `bench/.venv-peers` for the official SDK and
FastMCP). That process becomes the server (`bench.servers`: uvicorn h11 by default), which
builds the app with `from_env()`.

The tools:

* ``echo(text)`` returns `text`; ``echo_sync(text)`` the same from a plain `def` (a worker
  thread: the cost of the thread hop); ``echo_awaiting(text)`` (mcp_asgi only) the same
  after one turn of the event loop (a handler that waits: the request's watcher runs);
* ``slow(seconds)`` (async) reports progress once a second and sleeps;
* ``slow_sync(seconds)`` (a plain `def`, run in a worker thread) sleeps in 10 ms steps and,
  where the framework gives it a cancel token (mcp_asgi only), polls it between steps.

`slow` and `slow_sync` append ``start|cancel|done REQUEST_ID MONOTONIC`` lines to the exits
file. `time.monotonic()` is CLOCK_MONOTONIC, shared by every process of the machine, so the
driver can subtract its own close time from the tool's exit time.
"""

import argparse
import asyncio
import contextlib
import json
import math
import os
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Protocol

POLL_INTERVAL = 0.01  # how often a thread tool looks at its cancel token
# The load comes from one address, standing for many clients: mcp_asgi's per-client rate
# and in-flight limits (429 beyond 100 req/s by default) are turned off in every target.
ONE_CLIENT_IS_MANY: dict[str, Any] = {"rate_limit": None, "max_requests_per_client": None}
# ... or on, but far above the load (10^6 req/s, 10^6 burst, 10^4 in flight): what they cost
# when nobody reaches them (issue 27 measures its goals so; target `mcp_asgi-limits`)
FAR_ABOVE_THE_LOAD: dict[str, Any] = {
    "rate_limit": 1e6,
    "rate_limit_burst": 1_000_000,
    "max_requests_per_client": 10_000,
}
# Everything optional off: no per-client limits, no deadline, no keep-alive, no 2025 era
# (target `mcp_asgi-core`, with the telemetry observer removed too; bench.features' "off")
ALL_OFF: dict[str, Any] = {
    **ONE_CLIENT_IS_MANY,
    "max_request_duration": None,
    "keepalive_interval": None,
    "legacy_enabled": False,
}


class ExitLog:
    """Appends one line per tool event; the timestamp is taken before the write."""

    def __init__(self, path: str) -> None:
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self._pending: list[str] = []
        self._flusher: threading.Thread | None = None

    def __call__(self, kind: str, request_id: object) -> None:
        now = time.monotonic()
        os.write(self._fd, f"{kind} {request_id} {now:.6f}\n".encode())

    def later(self, kind: str, request_id: object) -> None:
        """Record now, write from a background thread (for hooks on the cancel path)."""
        self._pending.append(f"{kind} {request_id} {time.monotonic():.6f}\n")
        if self._flusher is None:
            self._flusher = threading.Thread(target=self._flush, daemon=True)
            self._flusher.start()

    def _flush(self) -> None:
        while True:
            time.sleep(0.05)
            if self._pending:
                lines, self._pending = self._pending, []
                os.write(self._fd, "".join(lines).encode())


class _Token(Protocol):
    """What a thread tool polls: mcp_asgi's `CancelToken`."""

    @property
    def cancelled(self) -> bool: ...

    def raise_if_cancelled(self) -> None: ...


def _sleep_sync(
    seconds: float, cancelled: Callable[[], bool], nap: Callable[[float], object] = time.sleep
) -> bool:
    """Sleep `seconds` in 10 ms naps; True if `cancelled()` turned true first. (`nap` may
    return early, as `CancelToken.wait` does when the request is cancelled.)"""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if cancelled():
            return True
        nap(POLL_INTERVAL)
    return False


async def slow_steps(
    log: ExitLog,
    request_id: object,
    seconds: float,
    progress: Callable[[int, int], Awaitable[object]],
) -> str:
    """The body of every async `slow` tool: log `start`, sleep in steps of at most a
    second with a progress report (the framework's own call) before each, log `cancel`
    (and re-raise) or `done`."""
    import anyio

    log("start", request_id)
    steps = max(1, math.ceil(seconds))
    try:
        for step in range(steps):
            await progress(step, steps)
            await anyio.sleep(min(1.0, seconds - step))
    except anyio.get_cancelled_exc_class():
        log("cancel", request_id)
        raise
    log("done", request_id)
    return "done"


async def no_progress(step: int, steps: int) -> None:
    """A `slow_steps` progress report that reports nothing (the bare apps')."""


async def stop_on_disconnect(
    log: ExitLog, request_id: object, receive: Callable[[], Awaitable[Any]], seconds: float
) -> None:
    """The least stop (the cancel benches' bare app beside their floor): `slow_steps` in a
    task of its own, cancelled (`Task.cancel`) once `receive()` returns `http.disconnect`
    (logged as its `signal`) — no reason, no deadline, no scope."""
    tool = asyncio.ensure_future(slow_steps(log, request_id, seconds, no_progress))
    while (await receive())["type"] != "http.disconnect":
        pass
    log("signal", request_id)
    tool.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await tool


async def stop_in_task_group(
    log: ExitLog, request_id: object, receive: Callable[[], Awaitable[Any]], seconds: float
) -> None:
    """The plain anyio way to stop a handler when its client leaves (what an anyio app
    writes, with nothing of its own): `slow_steps` in an anyio task group, beside a task
    that awaits `http.disconnect` (logged as its `signal`) and cancels the group's scope."""
    import anyio

    async def watch(group: anyio.abc.TaskGroup) -> None:
        while (await receive())["type"] != "http.disconnect":
            pass
        log("signal", request_id)
        group.cancel_scope.cancel()

    async with anyio.create_task_group() as group:
        group.start_soon(watch, group)
        await slow_steps(log, request_id, seconds, no_progress)


def sleep_steps_sync(
    log: ExitLog,
    request_id: object,
    seconds: float,
    token: _Token | None = None,
    nap: Callable[[float], object] = time.sleep,
) -> str:
    """The body of every `slow_sync` tool (in a worker thread): log `start`, sleep in 10 ms
    naps, looking at `token` between them where the framework gives one, log `cancel` (and
    raise) or `done`."""
    log("start", request_id)
    if token is None:
        _sleep_sync(seconds, lambda: False, nap)
    elif _sleep_sync(seconds, lambda: token.cancelled, nap):
        log("cancel", request_id)
        token.raise_if_cancelled()
    log("done", request_id)
    return "done"


# -- mcp_asgi ------------------------------------------------------------------------


def mcp_asgi_app(log: ExitLog, variant: str) -> Any:
    from starlette.applications import Starlette

    from mcp_asgi import Context, McpMiddleware, McpServer, McpSettings

    mcp = McpServer("bench", version="1.0.0")

    @mcp.tool()
    async def echo(text: str) -> str:
        """Return the text."""
        return text

    @mcp.tool()
    def echo_sync(text: str) -> str:
        """Return the text, from a worker thread."""
        return text

    @mcp.tool()
    async def echo_awaiting(text: str) -> str:
        """Return the text after one turn of the event loop (the request's watcher runs)."""
        import anyio.lowlevel

        await anyio.lowlevel.checkpoint()
        return text

    @mcp.tool()
    async def slow(seconds: float, ctx: Context) -> str:
        """Sleep, reporting progress once a second."""

        async def progress(step: int, total: int) -> None:
            await ctx.report_progress(step, total=total)

        return await slow_steps(log, ctx.request_id, seconds, progress)

    @mcp.tool()
    def slow_sync(seconds: float, ctx: Context) -> str:
        """Sleep in a worker thread, polling the cancel token every 10 ms."""
        return sleep_steps_sync(log, ctx.request_id, seconds, ctx.cancel_token)

    mode: Any = "json" if variant == "json" else "auto"
    options = {"limits": FAR_ABOVE_THE_LOAD, "core": ALL_OFF}.get(variant, ONE_CLIENT_IS_MANY)
    settings = McpSettings(response_mode=mode, **options)
    kwargs: dict[str, Any] = {}
    if variant == "otel":
        kwargs.update(_otel_sdk_providers())
    middleware = McpMiddleware(Starlette(), server=mcp, settings=settings, **kwargs)
    if variant in ("notel", "core"):
        _disable_telemetry(middleware)
    _record_signals(log)
    return middleware


def _record_signals(log: ExitLog) -> None:
    """Also record when mcp_asgi's request scope receives the cancel signal ("signal"), so
    the report can split close→exit into "server noticed the close" and "handler unwound".

    Bench-only wrapper around a private method; skipped if it is not there. The line is
    written by a background thread, off the cancel path.
    """
    from mcp_asgi.lifecycle import scope as scope_module

    request_scope = getattr(scope_module, "RequestScope", None)
    original = getattr(request_scope, "_signal", None)  # every signal's one way in
    if request_scope is None or original is None:
        return

    def signal(self: Any, reason: Any, **how: Any) -> Any:
        accepted = original(self, reason, **how)
        if accepted:  # (a signal refused, for a request already answered, is none)
            log.later("signal", self.request.id)
        return accepted

    request_scope._signal = signal


def _otel_sdk_providers() -> dict[str, Any]:
    """SDK tracer + BatchSpanProcessor and SDK meter + periodic reader, both to no-op sinks."""
    from .otel_sinks import noop_providers

    tracer_provider, meter_provider = noop_providers(export_interval_millis=5_000)
    return {"tracer_provider": tracer_provider, "meter_provider": meter_provider}


def _disable_telemetry(middleware: Any) -> None:
    """Telemetry off: replace the middleware's per-request observer by the no-op base.

    Bench-only surgery on a private attribute; the "off" baseline of the overhead ratios.
    """
    from mcp_asgi.lifecycle.outcome import ScopeObserver

    class Off:
        def begin(self, scope: Any, request: Any) -> ScopeObserver:
            return ScopeObserver()

    inflight: Any = getattr(middleware, "_inflight", None)
    if not hasattr(middleware, "_telemetry") or not hasattr(inflight, "_telemetry"):
        raise SystemExit("mcp_asgi-notel: the middleware's telemetry is no longer where it was")
    middleware._telemetry = inflight._telemetry = Off()  # rejections, and requests


# -- the official SDK --------------------------------------------------------------------


def sdk_app(log: ExitLog, json_response: bool) -> Any:
    from mcp.server.mcpserver import Context, MCPServer

    mcp = MCPServer("bench", version="1.0.0")

    @mcp.tool()
    async def echo(text: str) -> str:
        """Return the text."""
        return text

    @mcp.tool()
    def echo_sync(text: str) -> str:
        """Return the text, from a worker thread."""
        return text

    @mcp.tool()
    async def slow(seconds: float, ctx: Context) -> str:
        """Sleep, reporting progress once a second."""
        return await slow_steps(log, ctx.request_id, seconds, ctx.report_progress)

    @mcp.tool()
    def slow_sync(seconds: float, ctx: Context) -> str:
        """Sleep in a worker thread; the SDK gives thread code nothing to poll."""
        return sleep_steps_sync(log, ctx.request_id, seconds)

    return mcp.streamable_http_app(json_response=json_response)


# -- FastMCP -----------------------------------------------------------------------------


def fastmcp_app(log: ExitLog, json_response: bool) -> Any:
    from fastmcp import Context, FastMCP  # type: ignore[import-not-found,unused-ignore]

    mcp = FastMCP("bench")

    async def echo(text: str) -> str:
        """Return the text."""
        return text

    def echo_sync(text: str) -> str:
        """Return the text, from a worker thread."""
        return text

    async def slow(seconds: float, ctx: Context) -> str:
        """Sleep, reporting progress once a second."""
        return await slow_steps(log, ctx.request_id, seconds, ctx.report_progress)

    def slow_sync(seconds: float, ctx: Context) -> str:
        """Sleep in a worker thread; FastMCP gives thread code nothing to poll."""
        return sleep_steps_sync(log, ctx.request_id, seconds)

    for tool in (
        echo,
        echo_sync,
        slow,
        slow_sync,
    ):  # decorator syntax would hide the types from mypy
        mcp.tool(tool)
    return mcp.http_app(path="/mcp", stateless_http=True, json_response=json_response)


# -- the floor ---------------------------------------------------------------------------


def starlette_floor_app() -> Any:
    """A bare Starlette route: parse the JSON-RPC body, answer what mcp_asgi's echo answers."""
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route

    server_info = {"io.modelcontextprotocol/serverInfo": {"name": "bench", "version": "1.0.0"}}

    async def mcp(request: Request) -> Response:
        message = json.loads(await request.body())
        text = message["params"]["arguments"]["text"]
        result = {
            "content": [{"type": "text", "text": text}],
            "resultType": "complete",
            "_meta": server_info,
        }
        body = json.dumps(
            {"jsonrpc": "2.0", "id": message["id"], "result": result},
            separators=(",", ":"),
            ensure_ascii=False,
        )
        return Response(body, media_type="application/json")

    return Starlette(routes=[Route("/mcp", mcp, methods=["POST"])])


BUILDERS: dict[str, Callable[[ExitLog], Any]] = {
    "starlette-floor": lambda log: starlette_floor_app(),
    "mcp_asgi": lambda log: mcp_asgi_app(log, "default"),
    "mcp_asgi-notel": lambda log: mcp_asgi_app(log, "notel"),
    "mcp_asgi-otel": lambda log: mcp_asgi_app(log, "otel"),
    "mcp_asgi-json": lambda log: mcp_asgi_app(log, "json"),
    "mcp_asgi-limits": lambda log: mcp_asgi_app(log, "limits"),
    "mcp_asgi-core": lambda log: mcp_asgi_app(log, "core"),
    "sdk-sse": lambda log: sdk_app(log, json_response=False),
    "sdk-json": lambda log: sdk_app(log, json_response=True),
    "fastmcp-sse": lambda log: fastmcp_app(log, json_response=False),
    "fastmcp-json": lambda log: fastmcp_app(log, json_response=True),
}


def _profile_on_signals(path: str) -> None:
    """cProfile of exactly a window the driver chooses (e.g. a mass cancel)."""
    import cProfile
    import signal

    profiler = cProfile.Profile()

    def start(signum: int, frame: object) -> None:
        profiler.enable()

    def stop(signum: int, frame: object) -> None:
        profiler.disable()
        profiler.dump_stats(path)

    signal.signal(signal.SIGUSR1, start)
    signal.signal(signal.SIGUSR2, stop)


TARGET_ENV, EXITS_ENV, CPROFILE_ENV = "BENCH_TARGET", "BENCH_EXITS", "BENCH_CPROFILE"


def from_env() -> Any:
    """The app factory every server is given: the target named in `BENCH_TARGET`, logging
    to `BENCH_EXITS` (and cProfile on SIGUSR1/SIGUSR2 into `BENCH_CPROFILE`, if set)."""
    if os.environ.get(CPROFILE_ENV):
        _profile_on_signals(os.environ[CPROFILE_ENV])
    return BUILDERS[os.environ[TARGET_ENV]](ExitLog(os.environ[EXITS_ENV]))


def main() -> None:
    from .servers import COMMANDS, DEFAULT, exec_server

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("target", choices=sorted(BUILDERS))
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--exits", required=True, help="file the tools append exit times to")
    parser.add_argument("--cprofile", help="SIGUSR1 starts cProfile, SIGUSR2 dumps it here")
    parser.add_argument("--server", choices=sorted(COMMANDS), default=DEFAULT)
    args = parser.parse_args()
    environ = {TARGET_ENV: args.target, EXITS_ENV: str(Path(args.exits).resolve())}
    if args.cprofile:
        environ[CPROFILE_ENV] = str(Path(args.cprofile).resolve())
    exec_server(args.server, "bench.targets:from_env", args.port, environ)


if __name__ == "__main__":
    main()
