"""Cancel latency of mcp_asgi alone, by tool kind, response mode and concurrency.

    python -m bench.cancel_latency            # the full run (part of `make bench`)
    python -m bench.cancel_latency --quick    # one short round (part of `make bench-quick`)

Latency = the tool's real exit - the client's close of its TCP socket, per call, for:

* ``async``: an `async def` tool in an `await anyio.sleep(...)` loop;
* ``thread``: a plain `def` tool (a worker thread) polling its `CancelToken` every 10 ms
  between `time.sleep(0.01)` steps;
* ``thread-wait``: the same with `token.wait(0.01)` steps, which also return at once when
  the request is cancelled (the way the cancellation guide recommends);
* ``subprocess``: ``ctx.run_process(["sleep", "30"])``, which obeys SIGTERM;
* ``subprocess-ignores-term``: ``ctx.run_process(["/bin/sh", "-c", "trap '' TERM; sleep
  30"])``, which ignores it and is SIGKILLed once `process_kill_grace` has passed;

each in `response_mode="json"` and `response_mode="sse"`, at concurrency 1 (one call at a
time, closed 300 ms + 0-10 ms into it: `load.cancel_samples`) and 200 (200 calls open and
running, then all 200 sockets closed in one loop, each with its own close time), plus a
mass cancel of 500 open async calls (`load.mass_cancel`, as in `bench.run`).

The server is its own process (``python -m bench.cancel_latency --serve MODE``, which
becomes the ASGI server: uvicorn h11/asyncio unless ``--servers`` names others of
`bench.servers`, each with the floor beside it in the same round; one worker, 127.0.0.1,
a free port); the load comes from this process over raw sockets.
The tools append ``start|cancel|done ID T`` lines to a file (`targets.ExitLog`), with `T`
from `time.monotonic()` (CLOCK_MONOTONIC, one clock for every process of the machine).
Bench-only wrappers in the server record when the request scope got its signal
(`targets._record_signals`) and when uvicorn's `connection_lost` ran (`trace_connections`),
and the client sockets record their close per request id (`TracedSocket`), which splits
each latency into close -> connection lost (kernel, VM, event loop), lost -> signal
(uvicorn, mcp_asgi's watcher) and signal -> exit (the handler unwinding). A *floor*
server, a bare ASGI app on the same uvicorn that only awaits `http.disconnect`, gives the
async rows their lower bound; beside it two bare apps stop the async tool itself: the
least stop (the tool in a task, `Task.cancel()`) and the anyio stop (in an anyio task
group, its scope cancelled).

Results: ``bench/results/cancel-latency-[quick-]<timestamp>.{json,md}``; the markdown
table is also printed.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import re
import shlex
import socket
import sys
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import anyio
import anyio.to_thread
from starlette.applications import Starlette
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from mcp_asgi import CancelToken, Context, McpMiddleware, McpServer, McpSettings
from mcp_asgi.http.accept import ResponseMode

from . import env, load, report, run, servers
from .targets import (
    ONE_CLIENT_IS_MANY,
    POLL_INTERVAL,
    ExitLog,
    _record_signals,
    sleep_steps_sync,
    slow_steps,
    stop_in_task_group,
    stop_on_disconnect,
)

if TYPE_CHECKING:
    from _typeshed import ReadableBuffer

MODES = ("json", "sse")
FLOOR = "floor"  # a bare ASGI app on the same uvicorn (async and thread kinds): the lower bound
# the least stop: the async tool in a task of a bare app, cancelled (`Task.cancel`) when its
# `receive()` returns `http.disconnect` — what stopping the work costs with nothing else
TASK_FLOOR = "floor-task"
# the plain anyio stop: the same tool in an anyio task group of a bare app, whose scope a task
# beside it cancels on the disconnect — what the handler's cancel scope alone costs in anyio
ANYIO_FLOOR = "floor-anyio"
FLOOR_KINDS = {FLOOR: ("async", "thread"), TASK_FLOOR: ("async",), ANYIO_FLOOR: ("async",)}
STOPS = {  # each bare stop's name, and how it stops the tool (every bench's label of it)
    TASK_FLOOR: ("least stop", "the tool in a task, `Task.cancel()`"),
    ANYIO_FLOOR: ("anyio stop", "the tool in an anyio task group, its scope cancelled"),
}
KINDS = ("async", "thread", "thread-wait", "subprocess", "subprocess-ignores-term")
TOOLS = {
    "async": "slow",  # `load.mass_cancel` calls `slow`
    "thread": "slow_sync",
    "thread-wait": "slow_sync_wait",
    "subprocess": "slow_process",
    "subprocess-ignores-term": "slow_process_ignoring_term",
}
LABELS = {
    "async": "async (`anyio.sleep` loop)",
    "thread": "thread (token polled every 10 ms)",
    "thread-wait": "thread (`token.wait(0.01)` steps: polls, and wakes on the cancel)",
    "subprocess": 'subprocess (`run_process(["sleep", "30"])`)',
    "subprocess-ignores-term": "subprocess ignoring SIGTERM (`trap '' TERM`)",
}
TOOL_SECONDS = 30.0  # how long each tool would run if nobody cancelled it
THREAD_TOKENS = 1024  # max_threads, and anyio's worker-thread limit, in the server (default 40)
SETTLE = 0.5  # seconds between all calls running and the closes, and after each phase

# the goals of issue 4 ("How it is shown to work"), in ms; subprocess: grace + 50 ms
GOAL_ASYNC_P99 = 2.0
GOAL_THREAD_P99 = 12.0
GOAL_PROCESS_OVER_GRACE = 50.0
GOAL_MASS_P99 = 75.0
# issue 18, with `--burst` calls in flight: within this many ms of the floor's own p99
GOAL_BURST_ASYNC_OVER_FLOOR = 2.0
GOAL_BURST_THREAD_OVER_FLOOR = 5.0


@dataclass(frozen=True)
class Plan:
    rounds: int
    samples: int  # concurrency-1 samples per kind, mode and round
    term_samples: int  # the same for the kind that waits out the kill grace
    burst: int  # concurrent calls closed at once
    mass: int  # open async calls of the mass cancel
    kill_grace: float  # McpSettings.process_kill_grace
    modes: tuple[str, ...]
    kinds: tuple[str, ...]
    floor: bool  # also measure the bare-ASGI floor (async kind, bursts, mass)
    stacks: tuple[str, ...] = (servers.DEFAULT,)  # the ASGI servers (`bench.servers`)
    code: str = ""  # where mcp_asgi's modes import it from (`bench.compiled --build`); "": here

    @property
    def servers(self) -> tuple[str, ...]:
        floors = (f for f, kinds in FLOOR_KINDS.items() if set(kinds) & set(self.kinds))
        return self.modes + (tuple(floors) if self.floor else ())


# -- the server (its own process) ------------------------------------------------------


def build_app(log: ExitLog, mode: str, kill_grace: float) -> Any:
    """mcp_asgi with the four tools, `response_mode=mode`, and a worker-thread limit big
    enough for every thread call of a burst to run at once. (The tools' annotations are
    resolved in this module's globals: the mcp_asgi names are imported at the top.)"""
    mcp = McpServer("bench-cancel", version="1.0.0")

    @mcp.tool()
    async def echo(text: str) -> str:
        """Return the text (the readiness check)."""
        return text

    @mcp.tool()
    async def slow(seconds: float, ctx: Context) -> str:
        """Await `anyio.sleep` in a loop, a progress event before each step (the first
        one starts an SSE reply)."""

        async def progress(step: int, total: int) -> None:
            await ctx.report_progress(step, total=total)

        return await slow_steps(log, ctx.request_id, seconds, progress)

    @mcp.tool()
    def slow_sync(seconds: float, token: CancelToken, ctx: Context) -> str:
        """Sleep in 10 ms steps in a worker thread, polling the token between steps."""
        return sleep_steps_sync(log, ctx.request_id, seconds, token)

    @mcp.tool()
    def slow_sync_wait(seconds: float, token: CancelToken, ctx: Context) -> str:
        """Sleep in 10 ms steps of `token.wait`, which returns at once when cancelled."""
        return sleep_steps_sync(log, ctx.request_id, seconds, token, nap=token.wait)

    async def in_process(argv: list[str], ctx: Context) -> str:
        request_id = ctx.request_id
        await ctx.report_progress(0)
        log("start", request_id)
        try:
            await ctx.run_process(argv, check=False)
        except anyio.get_cancelled_exc_class():
            log("cancel", request_id)  # run_process returns once the group is gone
            raise
        log("done", request_id)
        return "done"

    @mcp.tool()
    async def slow_process(seconds: float, ctx: Context) -> str:
        """`sleep SECONDS` in a subprocess (obeys SIGTERM)."""
        return await in_process(["sleep", f"{seconds:g}"], ctx)

    @mcp.tool()
    async def slow_process_ignoring_term(seconds: float, ctx: Context) -> str:
        """A shell ignoring SIGTERM, and its `sleep`: stopped only by the SIGKILL."""
        return await in_process(["/bin/sh", "-c", f"trap '' TERM; sleep {seconds:g}"], ctx)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        anyio.to_thread.current_default_thread_limiter().total_tokens = THREAD_TOKENS
        yield

    settings = McpSettings(
        response_mode=cast(ResponseMode, mode),
        process_kill_grace=kill_grace,
        max_threads=THREAD_TOKENS,
        **ONE_CLIENT_IS_MANY,
    )
    middleware = McpMiddleware(Starlette(lifespan=lifespan), server=mcp, settings=settings)
    _record_signals(log)
    return middleware


def floor_app(log: ExitLog, mode: str = FLOOR) -> ASGIApp:
    """The floor: a bare ASGI app on the same uvicorn that logs `start` once it has a
    call's body and `cancel` when `receive()` returns `http.disconnect` — the earliest any
    framework on this server can learn of the close (only `echo` is answered). A call of
    the thread tool also starts a thread that sleeps in 10 ms steps until the disconnect:
    the load the thread tool puts on the server, without any framework.

    In `mode` `TASK_FLOOR`, a call of the async tool runs its body (`slow_steps`, which
    logs) in a task of its own, which the disconnect cancels: the least work that stops a
    tool, with no reason, deadline or scope (`targets.stop_on_disconnect`). With
    `ANYIO_FLOOR`, in an anyio task group whose scope the disconnect cancels: the plain
    anyio way (`targets.stop_in_task_group`)."""
    stops = {TASK_FLOOR: stop_on_disconnect, ANYIO_FLOOR: stop_in_task_group}
    stop_tool = stops.get(mode)

    async def app(asgi_scope: Scope, receive: Receive, send: Send) -> None:
        if asgi_scope["type"] == "lifespan":
            while (message := await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        body = b""
        more = True
        while more:
            message = await receive()
            body += message.get("body", b"")
            more = message.get("more_body", False)
        call = json.loads(body)
        if call["params"]["name"] == "echo":
            text = call["params"]["arguments"]["text"]
            result = {"content": [{"type": "text", "text": text}]}
            reply = json.dumps({"jsonrpc": "2.0", "id": call["id"], "result": result}).encode()
            head = [(b"content-type", b"application/json")]
            await send({"type": "http.response.start", "status": 200, "headers": head})
            await send({"type": "http.response.body", "body": reply})
            return
        if stop_tool is not None and call["params"]["name"] == TOOLS["async"]:
            await stop_tool(log, call["id"], receive, TOOL_SECONDS)
            return
        stop = threading.Event()
        if call["params"]["name"] == TOOLS["thread"]:  # the thread tool's load, no framework
            threading.Thread(target=_poll_until, args=(stop,), daemon=True).start()
        log("start", call["id"])
        while (await receive())["type"] != "http.disconnect":
            pass
        log("cancel", call["id"])
        stop.set()

    return app


def _poll_until(stop: threading.Event) -> None:
    """What the thread tool does to the server, minus the token: wake every 10 ms."""
    while not stop.is_set():
        time.sleep(POLL_INTERVAL)


_REQUEST_ID = re.compile(rb'"id":(\d+)')


def _uvicorn_protocol(stack: str) -> Any:
    """uvicorn's protocol class on `stack` (None on the other servers: no split there)."""
    if stack == "uvicorn-h11":
        from uvicorn.protocols.http.h11_impl import H11Protocol

        return H11Protocol
    if stack == "uvicorn-httptools":
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

        return HttpToolsProtocol
    return None


def trace_connections(app: ASGIApp, log: ExitLog, stack: str = servers.DEFAULT) -> ASGIApp:
    """Bench-only: also log "lost ID T" when uvicorn's `connection_lost` runs for a call's
    connection (the event loop has read the FIN), written off the path by `log.later`.
    With the "signal" lines this splits "noticed" into close -> connection lost (kernel,
    VM, event loop) and connection lost -> signal (uvicorn's event, mcp_asgi's watcher).
    Only on uvicorn (h11 or httptools): the other servers' rows have no split."""
    protocol = _uvicorn_protocol(stack)
    if protocol is None:
        return app
    ids_by_port: dict[int, str] = {}
    original = protocol.connection_lost

    def connection_lost(self: Any, exc: Exception | None) -> None:
        request_id = ids_by_port.pop(self.client[1], None) if self.client else None
        if request_id is not None:
            log.later("lost", request_id)
        original(self, exc)

    protocol.connection_lost = connection_lost

    async def traced(asgi_scope: Scope, receive: Receive, send: Send) -> None:
        client = asgi_scope.get("client") if asgi_scope["type"] == "http" else None
        if not client:
            return await app(asgi_scope, receive, send)
        first = True

        async def receive_first_body() -> Message:
            nonlocal first
            message = await receive()
            if first:
                first = False
                match = _REQUEST_ID.search(message.get("body", b""))
                if match:
                    ids_by_port[client[1]] = match.group(1).decode()
            return message

        await app(asgi_scope, receive_first_body, send)

    return traced


_ENV = "BENCH_CANCEL"  # mode, exits file, kill grace and server, for `from_env`


def from_env() -> ASGIApp:
    """The app factory the server is given (`serve` puts its arguments in the environment)."""
    mode, exits, kill_grace, stack = json.loads(os.environ[_ENV])
    log = ExitLog(exits)
    app = floor_app(log, mode) if mode in FLOOR_KINDS else build_app(log, mode, kill_grace)
    return trace_connections(app, log, stack)


def serve(mode: str, port: int, exits: str, kill_grace: float, stack: str) -> None:
    """Become `stack` serving this module's app (as `bench.targets` serves every target)."""
    settings = json.dumps([mode, str(Path(exits).resolve()), kill_grace, stack])
    servers.exec_server(stack, "bench.cancel_latency:from_env", port, {_ENV: settings})


class CancelServer(run.Server):
    """`run.Server` (free port, exits file, SIGINT stop), started as this module's server."""

    def __init__(
        self, mode: str, workdir: Path, kill_grace: float, stack: str, code: Path = env.ROOT
    ) -> None:
        target = run.Target(f"cancel-{mode}", f"mcp_asgi {mode}", False, mode, frozenset())
        super().__init__(target, workdir, server=stack, code=code)
        self.mode = mode
        self.kill_grace = kill_grace

    def start(self) -> float:
        command = [str(self.target.python), "-m", "bench.cancel_latency", "--serve", self.mode]
        command += ["--port", str(self.port), "--exits", str(self.exits_path)]
        command += ["--kill-grace", str(self.kill_grace), "--server", self.server]
        started = time.monotonic()
        self.spawn(command)
        assert self.proc is not None
        deadline = time.monotonic() + 60
        while True:  # as run.Server, but give up at once if the server process died
            try:
                load.wait_until_up(self.port, min(deadline, time.monotonic() + 1))
                break
            except RuntimeError:
                if self.proc.poll() is None and time.monotonic() < deadline:
                    continue
            self.stop()
            raise RuntimeError(
                f"{self.target.name} did not start: {self.log_path.read_text()[-2000:]}"
            ) from None
        return time.monotonic() - started


# -- the driver ---------------------------------------------------------------------------


CLOSES: dict[int, float] = {}  # request id -> when its client socket was closed


class TracedSocket(socket.socket):
    """A client socket that records, under the JSON-RPC id it sent, when it was closed
    (a microsecond after the close time `load` takes itself)."""

    request_id: int | None = None

    def sendall(self, data: ReadableBuffer, flags: int = 0, /) -> None:
        match = _REQUEST_ID.search(bytes(data))
        if match:
            self.request_id = int(match.group(1))
        super().sendall(data, flags)

    def close(self) -> None:
        if self.request_id is not None:
            CLOSES[self.request_id] = time.monotonic()
        super().close()


def traced_connect(port: int, _connect: Any = load._connect) -> socket.socket:
    return TracedSocket(fileno=_connect(port).detach())


def split(summary: dict[str, Any], exits: load.ExitTimes, request_ids: list[int]) -> None:
    """Add close -> connection lost ("kernel_ms") and connection lost -> signal
    ("uvicorn_ms"; for the floor, connection lost -> exit) per cancelled call."""
    exits.poll()
    kernel, server = [], []
    for request_id in request_ids:
        closed, lost = CLOSES.get(request_id), exits.get(request_id, "lost")
        after = exits.get(request_id, "signal") or exits.get(request_id, "cancel")
        if closed is not None and lost is not None and after is not None:
            kernel.append(round((lost - closed) * 1000, 3))
            server.append(round(max(0.0, after - lost) * 1000, 3))
    if kernel:
        summary["kernel_ms"], summary["uvicorn_ms"] = kernel, server


def tap(ids: Iterator[int], drawn: list[int]) -> Iterator[int]:
    """`ids`, remembering which were drawn."""
    for request_id in ids:
        drawn.append(request_id)
        yield request_id


def descendants(pid: int) -> list[int]:
    """Live (non-zombie) processes descended from `pid` (the server's subprocesses)."""
    parents: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            stat = Path(f"/proc/{name}/stat").read_bytes()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2 :].split()
        if fields[0] not in (b"Z", b"X"):
            parents.setdefault(int(fields[1]), []).append(int(name))
    found: list[int] = []
    todo = [pid]
    while todo:
        children = parents.get(todo.pop(), [])
        found += children
        todo += children
    return found


def wait_for_children(pid: int, count: int, timeout: float) -> int:
    """Wait until the server has at least `count` live descendants; how many it has."""
    deadline = time.monotonic() + timeout
    while (found := len(descendants(pid))) < count and time.monotonic() < deadline:
        time.sleep(0.02)
    return found


def settle(pid: int, own: int = 0) -> int:
    """Let the last cancels finish; the server's live subprocesses left (should be 0)."""
    time.sleep(SETTLE)
    return len(descendants(pid)) - own  # less the server's own processes (its workers)


def burst(
    port: int,
    pid: int,
    exits: load.ExitTimes,
    tool: str,
    request_ids: list[int],
    *,
    grace: float,
    own: int = 0,
) -> dict[str, Any]:
    """Open `len(request_ids)` calls of `tool`, wait until every one runs, close all the
    sockets in one loop (each close timed just before `close()`); latency = exit - close."""
    socks: list[socket.socket] = []
    for request_id in request_ids:
        sock = traced_connect(port)
        sock.sendall(
            load.tool_call(tool, {"seconds": TOOL_SECONDS}, request_id, port, progress=True)
        )
        socks.append(sock)
    all_started = exits.wait_for(request_ids, ("start",), 60.0)
    started = sum(1 for i in request_ids if exits.get(i, "start") is not None)
    children = None
    if "process" in tool:  # the tool logs `start` before it spawns: wait for the processes
        children = wait_for_children(pid, len(request_ids) + own, 30.0) - own
    time.sleep(SETTLE)
    closed_at: list[float] = []
    for sock in socks:
        closed_at.append(time.monotonic())
        sock.close()
    exits.wait_for(request_ids, ("cancel", "done"), grace + 10.0)
    summary = load.closed_calls_summary(exits, request_ids, closed_at, started=started)
    summary["all_started"] = all_started
    summary["close_span_ms"] = (closed_at[-1] - closed_at[0]) * 1000
    if children is not None:
        summary["children_running"] = children
    return summary


def measure_mode(
    mode: str,
    plan: Plan,
    round_no: int,
    ids: itertools.count[int],
    workdir: Path,
    stack: str = servers.DEFAULT,
) -> dict[str, Any]:
    """One server (`stack`) in `mode`: every kind at concurrency 1 and `plan.burst`, then
    the mass cancel; kinds in an order that rotates with the round (the floor: async and
    thread only)."""
    code = Path(plan.code) if plan.code and mode in MODES else env.ROOT
    server = CancelServer(mode, workdir, plan.kill_grace, stack, code)
    record: dict[str, Any] = {"mode": mode, "server": stack, "round": round_no}
    record["loadavg_before"] = env.loadavg()
    kinds = tuple(k for k in plan.kinds if k in FLOOR_KINDS.get(mode, plan.kinds))
    shift = round_no % max(1, len(kinds))
    kinds = kinds[shift:] + kinds[:shift]
    with run.recording(server, record):
        record["startup_s"] = server.start()
        record["content_type"] = load.check_echo(server.port)
        own = len(descendants(server.pid))  # the server's workers (Granian, Hypercorn)
        exits = load.ExitTimes(server.exits_path)
        for kind in kinds:
            tool = TOOLS[kind]
            samples = plan.term_samples if kind == "subprocess-ignores-term" else plan.samples
            drawn: list[int] = []
            one = load.cancel_samples(
                server.port, exits, tool, tap(ids, drawn), samples=samples, seconds=TOOL_SECONDS
            )
            one["children_left"] = settle(server.pid, own)
            split(one, exits, drawn)
            record[f"{kind}@1"] = one
            env.log(f"  {stack} {mode} {kind:24s} c=1   {run.fmt_latency(one)}")
            if plan.burst:
                request_ids = [next(ids) for _ in range(plan.burst)]
                many = burst(
                    server.port,
                    server.pid,
                    exits,
                    tool,
                    request_ids,
                    grace=plan.kill_grace,
                    own=own,
                )
                many["children_left"] = settle(server.pid, own)
                split(many, exits, request_ids)
                record[f"{kind}@{plan.burst}"] = many
                env.log(f"  {stack} {mode} {kind:24s} c={plan.burst} {run.fmt_latency(many)}")
        if plan.mass:
            request_ids = [next(ids) for _ in range(plan.mass)]
            mass = load.mass_cancel(
                server.port, server.pid, exits, request_ids, seconds=TOOL_SECONDS
            )
            time.sleep(SETTLE)
            split(mass, exits, request_ids)
            record[f"mass@{plan.mass}"] = mass
            env.log(f"  {stack} {mode} mass cancel of {plan.mass}: {run.fmt_latency(mass)}")
    return record


# -- aggregation and the table ---------------------------------------------------------------


def goal_ms(kind: str, mode: str, grace: float) -> float | None:
    if mode == FLOOR:
        return None
    return {
        "async": GOAL_ASYNC_P99,
        "thread": GOAL_THREAD_P99,
        "thread-wait": GOAL_THREAD_P99,
        "subprocess": grace * 1000 + GOAL_PROCESS_OVER_GRACE,
        "subprocess-ignores-term": grace * 1000 + GOAL_PROCESS_OVER_GRACE,
        "mass": GOAL_MASS_P99,
    }[kind]


def aggregate(records: list[dict[str, Any]], plan: Plan) -> list[dict[str, Any]]:
    """One row per kind, mode and concurrency: samples pooled over the rounds, plus each
    round's p99 (a burst's closes all share one moment of machine load)."""
    rows: list[dict[str, Any]] = []
    cells = [(kind, 1) for kind in plan.kinds]
    cells += [(kind, plan.burst) for kind in plan.kinds if plan.burst]
    cells += [("mass", plan.mass)] if plan.mass else []
    for stack, kind, concurrency, mode in (
        (stack, kind, concurrency, mode)
        for stack in plan.stacks
        for kind, concurrency in cells
        for mode in plan.servers
    ):
        key = f"{kind}@{concurrency}"
        mine = [
            r
            for r in records
            if r["mode"] == mode and r.get("server", servers.DEFAULT) == stack and key in r
        ]
        runs = [r[key] for r in mine]
        if runs:
            pooled = report.pool(runs)
            noticed, unwound = pooled.pop("noticed_ms"), pooled.pop("unwound_ms")
            pooled.pop("latencies_ms")
            goal = goal_ms(kind, mode, plan.kill_grace)
            p99 = pooled["p99_ms"]
            by_round = {r["round"]: r[key]["p99_ms"] for r in mine if r[key]["p99_ms"] is not None}
            parts = {
                "noticed": noticed,
                "unwound": unwound,
                "kernel": [x for r in runs for x in r.get("kernel_ms", [])],
                "uvicorn": [x for r in runs for x in r.get("uvicorn_ms", [])],
            }
            rows.append(
                {
                    "server": stack,
                    "kind": kind,
                    "mode": mode,
                    "concurrency": concurrency,
                    **pooled,
                    "round_p99_ms": list(by_round.values()),
                    "rounds": list(by_round),
                    **{
                        f"{name}_p{q}_ms": load.percentile(values, q) if values else None
                        for name, values in parts.items()
                        for q in (50, 99)
                    },
                    "close_span_ms": report.med([r.get("close_span_ms", 0.0) for r in runs]),
                    "children_left": max(r.get("children_left", 0) for r in runs),
                    "rss_per_call_kib": report.med(
                        [r["rss_per_stream_kib"] for r in runs if "rss_per_stream_kib" in r]
                    ),
                    "goal_p99_ms": goal,
                    "goal_met": None
                    if p99 is None or goal is None
                    else bool(p99 <= goal and not pooled["never"]),
                }
            )
    relative_goals(rows, plan)
    return rows


def relative_goals(rows: list[dict[str, Any]], plan: Plan) -> None:
    """Issue 18's goals for a burst, against the floor on the same server in the same run:
    async within `GOAL_BURST_ASYNC_OVER_FLOOR` ms of the bare app's own p99, threads within
    `GOAL_BURST_THREAD_OVER_FLOOR` ms of the floor carrying the same thread load.

    Read two ways: the p99 of every round's closes pooled against the floor's pooled
    (`goal_met`), and paired by round (`paired_over_ms`, `paired_met`: the median over
    rounds of the row's p99 less that round's floor p99), as `bench.stacks` reads its
    ratios; a burst's closes share one moment of the machine's load, so one slow round
    sets a pooled p99, and the floor's slow round need not be the target's."""
    floors = {
        (r["server"], r["kind"]): r
        for r in rows
        if r["mode"] == FLOOR and r["concurrency"] == plan.burst
    }
    for row in rows:
        if row["mode"] == FLOOR or row["concurrency"] != plan.burst or row["kind"] == "mass":
            continue
        if row["kind"] == "async":
            floor_row, over = floors.get((row["server"], "async")), GOAL_BURST_ASYNC_OVER_FLOOR
        elif row["kind"].startswith("thread"):
            floor_row, over = floors.get((row["server"], "thread")), GOAL_BURST_THREAD_OVER_FLOOR
        else:
            continue
        floor = None if floor_row is None else floor_row["p99_ms"]
        goal = None if floor is None else floor + over
        row["goal_p99_ms"] = None if goal is None else round(goal, 2)
        p99 = row["p99_ms"]
        row["goal_met"] = None if goal is None or p99 is None else p99 <= goal and not row["never"]
        overs = [] if floor_row is None else _paired_overs(row, floor_row)
        paired = round(report.med(overs), 2) if overs else None
        row["paired_over_ms"] = paired
        row["paired_met"] = None if paired is None else paired <= over and not row["never"]
        if len(overs) >= 3:  # the 95% bootstrap interval of that median (`bench.ab`)
            row["paired_over_interval_ms"] = [round(v, 2) for v in report.median_interval(overs)]


def _paired_overs(row: dict[str, Any], floor: dict[str, Any]) -> list[float]:
    """`row`'s p99 less the floor's p99 of the same round, for each round of both."""
    floors = dict(zip(floor["rounds"], floor["round_p99_ms"], strict=True))
    mine = zip(row["rounds"], row["round_p99_ms"], strict=True)
    return [p99 - floors[n] for n, p99 in mine if n in floors]


def table(rows: list[dict[str, Any]], plan: Plan) -> str:
    fmt = report.fmt
    lines = [
        "| server | tool kind | mode | in flight | n | p50 ms | p99 ms | max ms "
        "| close → conn. lost | lost → signal | signal → exit | goal (p99) | met? "
        "| over the floor, paired by round | met? |",
        "|---|---|---|---:|---:|---:|---:|---:|---|---|---|---|---|---:|---|",
    ]
    for row in rows:
        kind = row["kind"]
        label = f"mass cancel of {plan.mass} async" if kind == "mass" else LABELS[kind]
        if row["mode"] == FLOOR:
            label = "floor: bare ASGI app awaiting `http.disconnect`"
            label += f", {plan.mass} open" if kind == "mass" else ""
            label += ", and a thread per call in 10 ms sleeps" if kind == "thread" else ""
        elif row["mode"] in STOPS:
            name, how = STOPS[row["mode"]]
            label = f"{name}: bare ASGI app, {how}, on the disconnect"
            label += f", {plan.mass} open" if kind == "mass" else ""
        goal = report.DASH if row["goal_p99_ms"] is None else f"≤ {row['goal_p99_ms']:g}"
        never = f" ({row['never']} never)" if row["never"] else ""
        verdicts = {None: report.DASH, True: "yes", False: "**no**"}
        met, paired_met = verdicts[row["goal_met"]], verdicts[row.get("paired_met")]
        paired = row.get("paired_over_ms")
        paired_text = report.DASH if paired is None else f"{paired:+.2f}"
        if row.get("paired_over_interval_ms"):
            low, high = row["paired_over_interval_ms"]
            paired_text += f" [{low:+.2f}, {high:+.2f}]"
        lines.append(
            f"| {servers.LABELS[row.get('server', servers.DEFAULT)]} | {label} | {row['mode']} "
            f"| {row['concurrency']} | {row['cancelled']}{never} "
            f"| {fmt(row['p50_ms'])} | {fmt(row['p99_ms'])} | {fmt(row['max_ms'])} "
            f"| {fmt(row['kernel_p50_ms'])} / {fmt(row['kernel_p99_ms'])} "
            f"| {fmt(row['uvicorn_p50_ms'])} / {fmt(row['uvicorn_p99_ms'])} "
            f"| {fmt(row['unwound_p50_ms'])} / {fmt(row['unwound_p99_ms'])} "
            f"| {goal} | {met} | {paired_text} | {paired_met} |"
        )
    return "\n".join(lines) + "\n"


def summary_text(meta: dict[str, Any], rows: list[dict[str, Any]], plan: Plan) -> str:
    m = meta["machine"]
    head = [
        f"Run: `{meta['command']}` — {meta['started']} → {meta['finished']} ({meta['wall_s']} s)",
        "",
        f"Machine: {m['nproc']} CPUs ({m['cpu']}), {m['memory_gib']} GiB RAM, Linux "
        f"{m['kernel']}; load average {m['loadavg']} at the start, {m['loadavg_end']} at "
        "the end.",
        f"mcp_asgi tree: {meta['git']}. process_kill_grace = {plan.kill_grace:g} s; "
        f"{plan.rounds} round(s), samples pooled over the rounds; per-round p99 of the "
        "bursts in the JSON.",
        "",
        "Latency = the tool's exit - the client's `close()`, in ms, p50 / p99 for its parts: "
        "close → conn. lost = until uvicorn's `connection_lost` runs (kernel, VM, event "
        "loop); lost → signal = until mcp_asgi's request scope is cancelled (uvicorn's "
        "disconnect event, the watcher task; for the floor: until its `receive()` returned "
        "`http.disconnect`); signal → exit = the handler unwinding (threads: the token poll; "
        "subprocesses: SIGTERM until the group is gone, or the kill grace and SIGKILL). "
        "The split needs uvicorn (its `connection_lost`): on the other servers only the "
        "signal → exit part is there. Goals with "
        f"{plan.burst} in flight: async within {GOAL_BURST_ASYNC_OVER_FLOOR:g} ms of the "
        f"floor's own p99 on the same server, threads within {GOAL_BURST_THREAD_OVER_FLOOR:g} "
        "ms of the floor carrying the same thread load (issue 18); read on the rounds' "
        "closes pooled, and paired by round (the median over rounds of the row's p99 less "
        "that round's floor p99; with three rounds or more, its 95% bootstrap interval).",
        "",
    ]
    return "\n".join(head) + "\n" + table(rows, plan)


# -- main ----------------------------------------------------------------------------------


def raise_fd_limit() -> None:
    """A burst needs a descriptor per socket here, and sockets plus pipes in the server
    (which inherits the limit)."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="mcp_asgi's cancel latency by tool kind.")
    parser.add_argument("--quick", action="store_true", help="one short round (~2 minutes)")
    parser.add_argument("--rounds", type=int, help="default 3 (1 with --quick)")
    parser.add_argument("--samples", type=int, help="concurrency-1 samples per kind and round")
    parser.add_argument("--burst", type=int, default=200, help="calls closed at once (0: none)")
    parser.add_argument("--mass", type=int, default=500, help="async calls of the mass cancel")
    parser.add_argument("--kill-grace", type=float, default=2.0, help="process_kill_grace")
    parser.add_argument("--modes", default=",".join(MODES), help="json,sse")
    parser.add_argument("--kinds", default=",".join(KINDS), help=",".join(KINDS))
    parser.add_argument("--no-floor", action="store_true", help="skip the bare-ASGI floor")
    parser.add_argument(
        "--servers", default=servers.DEFAULT, help="ASGI servers, comma-separated, or all"
    )
    parser.add_argument(
        "--code", help="import mcp_asgi from this copy (python -m bench.compiled --build DIR)"
    )
    parser.add_argument("--server", default=servers.DEFAULT, help=argparse.SUPPRESS)
    parser.add_argument("--serve", choices=(*MODES, *FLOOR_KINDS), help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--exits", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve:
        serve(args.serve, args.port, args.exits, args.kill_grace, args.server)
        return

    modes = tuple(args.modes.split(","))
    kinds = tuple(args.kinds.split(","))
    if set(modes) - set(MODES) or set(kinds) - set(KINDS):
        parser.error(f"modes: {', '.join(MODES)}; kinds: {', '.join(KINDS)}")
    samples = args.samples or (5 if args.quick else 20)
    plan = Plan(
        rounds=args.rounds or (1 if args.quick else 3),
        samples=samples,
        term_samples=max(2, samples // 4),
        burst=args.burst,
        mass=args.mass,
        kill_grace=args.kill_grace,
        modes=modes,
        kinds=kinds,
        floor=not args.no_floor,
        stacks=servers.parse(args.servers),
        code=str(Path(args.code).resolve()) if args.code else "",
    )
    raise_fd_limit()
    # `load.cancel_samples` and `load.mass_cancel` connect through `load._connect`: let them
    # use sockets that record per call when they were closed (see `split`)
    load._connect = traced_connect
    command = "python -m bench.cancel_latency " + shlex.join(
        argv if argv is not None else sys.argv[1:]
    )
    meta: dict[str, Any] = {
        "command": command.strip(),
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "quick": args.quick,
        "plan": asdict(plan),
        "machine": env.machine(),
        "versions": env.versions(env.PROJECT_PYTHON, env.PROJECT_DISTS),
        "git": run.git_state(),
        "tool_seconds": TOOL_SECONDS,
        "thread_poll_s": POLL_INTERVAL,
        "thread_tokens": THREAD_TOKENS,
        "close_after_ms": load.CLOSE_AFTER * 1000,
        "close_jitter_ms": load.CLOSE_JITTER * 1000,
    }
    env.log(f"cancel latency: {plan}")
    started = time.monotonic()
    records: list[dict[str, Any]] = []
    ids = itertools.count(1000)
    with tempfile.TemporaryDirectory(prefix="mcp-asgi-cancel-") as tmp:
        for round_no in range(plan.rounds):
            shift = round_no % len(plan.stacks)
            stacks = plan.stacks[shift:] + plan.stacks[:shift]
            order = list(plan.servers[::-1] if round_no % 2 else plan.servers)
            for stack in stacks:  # the floor on the same server, in the same round
                env.log(f"round {round_no + 1}/{plan.rounds} on {stack}: {', '.join(order)}")
                for mode in order:
                    record = measure_mode(mode, plan, round_no, ids, Path(tmp), stack)
                    records.append(record)
    meta["finished"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    meta["wall_s"] = round(time.monotonic() - started, 1)
    meta["machine"]["loadavg_end"] = env.loadavg()

    good = [r for r in records if "error" not in r]
    rows = aggregate(good, plan) if good else []
    text = summary_text(meta, rows, plan)
    run.RESULTS.mkdir(parents=True, exist_ok=True)
    stem = "cancel-latency-" + ("quick-" if args.quick else "") + time.strftime("%Y%m%d-%H%M%S")
    path = run.RESULTS / f"{stem}.json"
    path.write_text(json.dumps({"meta": meta, "rows": rows, "records": records}, indent=1) + "\n")
    path.with_suffix(".md").write_text(text)
    print(text)
    env.log(f"wrote {path.relative_to(env.ROOT)} and .md ({meta['wall_s']} s)")
    if len(good) < len(records):
        raise SystemExit(f"{len(records) - len(good)} server(s) failed: see the JSON")


if __name__ == "__main__":
    main()
