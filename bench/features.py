"""The cases `bench.instructions` counts: each an app, a request and a way to drive it in
process, as `bench.inprocess` drives a request (a `receive` that hands over the body, then
waits; 32 requests at a time in one event loop).

    python -m bench.features CASE N1 N2      # warm CASE up, then serve N1, then N2 requests

Run alone this only checks that a case answers. Under `valgrind --tool=callgrind` with
`BENCH_CALLGRIND_MARKS=1` the counts are dumped after the warm-up and after each batch
(`callgrind_control`): the difference of two batches' counts over the difference of their
requests is the instructions of one request (start-up, warm-up and the dump's own cost
cancel out).

The goal cases (issue 27, point 1) serve `McpSettings` defaults with the per-client limits
on but far above the load (one client standing for many: 10^6 req/s, 10^6 burst, 10^4 in
flight). The feature rows (point 2) start from everything optional off and turn on one
thing at a time.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from . import inprocess, load, targets

MARKS_ENV = "BENCH_CALLGRIND_MARKS"
CONCURRENCY = 32
WARM_UP = 2 * CONCURRENCY  # requests before the counted ones (made in both runs)
FAR_ABOVE_THE_LOAD = targets.FAR_ABOVE_THE_LOAD
ALL_OFF = targets.ALL_OFF
RESOURCE = "http://127.0.0.1:8000/mcp"
ISSUER = "https://issuer.example"
LEGACY_VERSION = "2025-11-25"

Headers = list[tuple[bytes, bytes]]


@dataclass(frozen=True)
class Request:
    """What one counted call sends."""

    headers: Headers
    payload: bytes
    expect: bytes = load.ECHO_TEXT.encode()
    numbered: bool = False
    """Each call has an id of its own (`payload` holds `%d`): a session refuses an id
    still in flight."""


@dataclass(frozen=True)
class Case:
    """One row: the app, how the request is prepared (after the lifespan started), and why
    the row costs what it costs (filled in docs/benchmarks.md from the measurement)."""

    label: str
    build: Callable[[], Any]
    tool: str = "echo"
    prepare: Callable[[Any, str], Awaitable[Request]] | None = None
    cancelled: bool = False
    fill_threads: bool = False
    """Grow the worker pool to `CONCURRENCY` threads before the warm-up (a `def` tool)."""
    extra: dict[str, Any] = field(default_factory=dict)


# -- the apps ----------------------------------------------------------------------------


class _Started:
    """Counts the `hang` tool's starts; `wait(n)` until n have started."""

    def __init__(self) -> None:
        self.count = 0
        self._event = asyncio.Event()
        self._target = 0

    def __call__(self) -> None:
        self.count += 1
        if self.count >= self._target:
            self._event.set()

    async def wait(self, target: int) -> None:
        self._target = target
        if self.count < target:
            self._event.clear()
            await self._event.wait()


STARTED = _Started()
# `all_in_threads` returns once CONCURRENCY calls of it are in their threads together: one
# round of it grows the worker pool to the load's size before the warm-up (a thread's start
# is a one-off of the pool growing, not a cost of each call; left to the warm-up, the pool
# grows over the counted batches too, as the threads' turns fall under valgrind)
ALL_IN = threading.Barrier(CONCURRENCY)


def mcp_app(
    settings: dict[str, Any],
    *,
    tasks: bool = False,
    routes: bool = False,
    auth: bool = False,
    otel: bool = False,
    telemetry_off: bool = False,
) -> Any:
    """mcp_asgi serving `echo`, `echo_sync` and `hang` with `settings`, and the feature
    asked for."""
    import anyio
    from starlette.applications import Starlette

    from mcp_asgi import McpMiddleware, McpServer, McpSettings

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
    async def hang() -> str:
        """Wait until cancelled."""
        STARTED()
        await anyio.sleep_forever()
        return "never"

    @mcp.tool()
    def all_in_threads() -> str:
        """Return once every call of the round is in a thread of its own."""
        ALL_IN.wait(timeout=120)
        return "all in"

    if tasks:

        @mcp.tool(task="optional")
        async def echo_task(text: str) -> str:
            """Return the text; may run as a task."""
            return text

    host: Any = Starlette()
    if routes:
        host = _routes_host()
        from mcp_asgi.routes import AppRoutes

        mcp.add_source(AppRoutes())
    kwargs: dict[str, Any] = {}
    if otel:
        from .otel_sinks import noop_providers

        tracer_provider, meter_provider = noop_providers(export_interval_millis=5_000)
        kwargs = {"tracer_provider": tracer_provider, "meter_provider": meter_provider}
    if auth:
        settings = {**settings, "auth_resource": RESOURCE, "auth_issuers": [ISSUER]}
        kwargs["token_verifier"] = _jwt_verifier()
    middleware = McpMiddleware(host, server=mcp, settings=McpSettings(**settings), **kwargs)
    if telemetry_off:
        targets._disable_telemetry(middleware)
    return middleware


def _routes_host() -> Any:
    """A FastAPI app with two GET routes: they are tools beside the decorated ones."""
    from fastapi import FastAPI

    app = FastAPI()

    @app.get("/orders/{order_id}", operation_id="get_order")
    async def get_order(order_id: int) -> dict[str, int]:
        return {"id": order_id}

    @app.get("/orders", operation_id="list_orders")
    async def list_orders(limit: int = 10) -> list[int]:
        return list(range(limit))

    return app


# -- bearer tokens -----------------------------------------------------------------------

_KEYS: dict[str, Any] = {}


def _signing_key() -> Any:
    if "private" not in _KEYS:
        from cryptography.hazmat.primitives.asymmetric import ec

        _KEYS["private"] = ec.generate_private_key(ec.SECP256R1())
    return _KEYS["private"]


class _Jwks:
    """The issuer's JWKS, served from memory (fetched once, at the first request)."""

    async def get_json(self, url: str) -> dict[str, Any]:
        from jwt.algorithms import ECAlgorithm

        jwk = json.loads(ECAlgorithm.to_jwk(_signing_key().public_key()))
        return {"keys": [{**jwk, "kid": "k1", "alg": "ES256", "use": "sig"}]}


def _jwt_verifier() -> Any:
    from mcp_asgi.auth.jwt import JwtVerifier

    return JwtVerifier(
        issuers=[ISSUER],
        audiences=[RESOURCE],
        algorithms=["ES256"],
        jwks_url=f"{ISSUER}/jwks",
        http=_Jwks(),  # type: ignore[arg-type]
    )


def _token() -> str:
    import jwt

    now = int(time.time())
    claims = {
        "iss": ISSUER,
        "aud": RESOURCE,
        "sub": "bench",
        "client_id": "bench-client",
        "scope": "tools:read",
        "iat": now,
        "exp": now + 3600,
    }
    return str(
        jwt.encode(
            claims, _signing_key(), algorithm="ES256", headers={"kid": "k1", "typ": "at+jwt"}
        )
    )


# -- the requests ------------------------------------------------------------------------


def _modern(tool: str, arguments: dict[str, Any]) -> Request:
    raw = load.tool_call(tool, arguments, 1, inprocess.PORT)
    scope = inprocess._scope_of(raw)
    return Request(scope["headers"], raw.partition(b"\r\n\r\n")[2])


async def _bearer(app: Any, tool: str) -> Request:
    plain = _modern(tool, {"text": load.ECHO_TEXT})
    authorization = (b"authorization", b"Bearer " + _token().encode())
    return Request([*plain.headers, authorization], plain.payload)


async def _session(app: Any, tool: str) -> Request:
    """Open a 2025-era session (initialize, notifications/initialized); the counted call
    is a `tools/call` in it."""
    base: Headers = [
        (b"host", f"127.0.0.1:{inprocess.PORT}".encode()),
        (b"accept", b"application/json, text/event-stream"),
        (b"content-type", b"application/json"),
    ]
    initialize = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {
            "protocolVersion": LEGACY_VERSION,
            "capabilities": {},
            "clientInfo": {"name": "bench", "version": "1.0.0"},
        },
    }
    messages = await call(app, base, json.dumps(initialize).encode())
    start = next(m for m in messages if m["type"] == "http.response.start")
    session = dict(start["headers"]).get(b"mcp-session-id")
    if session is None:
        raise RuntimeError(f"no session: {messages}")
    headers = [*base, (b"mcp-session-id", session), (b"mcp-protocol-version", b"2025-11-25")]
    initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    await call(app, headers, json.dumps(initialized).encode())
    payload = {
        "jsonrpc": "2.0",
        "id": 1_000_000_000,
        "method": "tools/call",
        "params": {"name": tool, "arguments": {"text": load.ECHO_TEXT}},
    }
    text = json.dumps(payload, separators=(",", ":")).encode()
    return Request(headers, text.replace(b"1000000000", b"%d"), numbered=True)


# -- the cases ---------------------------------------------------------------------------


def _defaults() -> Any:
    return mcp_app(FAR_ABOVE_THE_LOAD)


def _off(**features: Any) -> Callable[[], Any]:
    settings = {**ALL_OFF, **features.pop("settings", {})}
    return lambda: mcp_app(settings, **features)


GOALS: dict[str, Case] = {
    "floor": Case("Starlette route (floor)", targets.starlette_floor_app),
    "async": Case("`async` echo (defaults)", _defaults),
    "def": Case("`def` echo (defaults)", _defaults, tool="echo_sync", fill_threads=True),
    "cancelled": Case("call cancelled by its client (defaults)", _defaults, cancelled=True),
}
FEATURES: dict[str, Case] = {
    "off": Case("everything optional off", _off()),
    "off-notel": Case(
        "… and the telemetry observer removed (bench surgery)", _off(telemetry_off=True)
    ),
    "defaults": Case("the defaults (limits far above the load)", _defaults),
    "deadline": Case(
        "+ max_request_duration=300 (default)", _off(settings={"max_request_duration": 300.0})
    ),
    "keepalive": Case(
        "+ keepalive_interval=15 (default)", _off(settings={"keepalive_interval": 15.0})
    ),
    "legacy": Case(
        "+ legacy_enabled (default), a 2026 request", _off(settings={"legacy_enabled": True})
    ),
    "limits": Case("+ per-client limits", _off(settings=FAR_ABOVE_THE_LOAD)),
    "auth": Case("+ bearer auth, JWT (ES256, keys cached)", _off(auth=True), prepare=_bearer),
    "tasks": Case("+ a task-capable tool on the server", _off(tasks=True)),
    "routes": Case("+ routes as tools (2 FastAPI routes)", _off(routes=True)),
    "session": Case(
        "+ a 2025-era session (legacy on)",
        _off(settings={"legacy_enabled": True}),
        prepare=_session,
    ),
    "otel": Case("+ OpenTelemetry SDK, no-op exporters", _off(otel=True)),
}
CASES: dict[str, Case] = {**GOALS, **FEATURES}


# -- driving -----------------------------------------------------------------------------


async def call(
    app: Any, headers: Headers, payload: bytes, gone: asyncio.Event | None = None
) -> list[dict[str, Any]]:
    """One request; the client leaves once the reply is complete or when `gone` is set.
    Returns every message sent."""
    return await inprocess.exchange(app, inprocess.http_scope(headers), payload, gone)


_body = inprocess.body_of


_ids = iter(range(1_000_000_000, 2_000_000_000))


async def _echoes(app: Any, request: Request, calls: int) -> None:
    headers, payload, numbered = request.headers, request.payload, request.numbered

    async def worker(n: int) -> None:
        for _ in range(n):
            body = payload % next(_ids) if numbered else payload
            messages = await call(app, headers, body)
            if messages[0]["status"] != 200 or b'"result"' not in messages[-1]["body"]:
                raise RuntimeError(f"the echo failed: {messages}")

    await asyncio.gather(*(worker(calls // CONCURRENCY) for _ in range(CONCURRENCY)))


async def _cancels(app: Any, request: Request, calls: int) -> None:
    """`calls` calls of `hang`, `CONCURRENCY` at a time, each made by one of `CONCURRENCY`
    workers as `_echoes` makes its calls (no task of its own per call: the floor's and the
    echoes' calls have none either): each round waits until every handler has started,
    then every client leaves at once."""
    headers, payload = request.headers, request.payload
    rounds = [asyncio.Event() for _ in range(calls // CONCURRENCY)]

    async def worker() -> None:
        for gone in rounds:
            messages = await call(app, headers, payload, gone)
            start = next(m for m in messages if m["type"] == "http.response.start")
            if start["status"] != 499 and b'"error"' not in _body(messages):
                raise RuntimeError(f"not cancelled: {messages}")

    async def leave() -> None:
        started = STARTED.count
        for gone in rounds:  # a worker starts its next call only once its last has ended
            started += CONCURRENCY
            await STARTED.wait(started)
            gone.set()

    await asyncio.gather(leave(), *(worker() for _ in range(CONCURRENCY)))


async def _fill_threads(app: Any) -> None:
    """One round of `all_in_threads`, `CONCURRENCY` at once: the pool then has a thread for
    each call in flight."""
    fill = _modern("all_in_threads", {})
    rounds = await asyncio.gather(
        *(call(app, fill.headers, fill.payload) for _ in range(CONCURRENCY))
    )
    for messages in rounds:
        if b"all in" not in _body(messages):
            raise RuntimeError(f"the threads were not filled: {messages}")


def mark(label: str) -> None:
    """Under callgrind (`MARKS_ENV` set): switch the instrumentation on (the start-up ran
    without, several times faster), then dump the counts so far, labelled, and start again
    from zero (`callgrind_control`, which waits for each)."""
    if os.environ.get(MARKS_ENV):
        pid = str(os.getpid())
        subprocess.run(["callgrind_control", "--instr=on", pid], check=True, capture_output=True)
        subprocess.run(
            ["callgrind_control", f"--dump={label}", pid], check=True, capture_output=True
        )


async def drive(name: str, batches: list[int]) -> None:
    """Warm `name` up, then serve each batch of requests (multiples of `CONCURRENCY`),
    with a `mark` after the warm-up and after each batch."""
    case = CASES[name]
    app = case.build()
    stop = await inprocess._lifespan(app)
    try:
        tool = "hang" if case.cancelled else case.tool
        if case.prepare is not None:
            request = await case.prepare(app, tool)
        else:
            request = _modern(tool, {} if case.cancelled else {"text": load.ECHO_TEXT})
        run = _cancels if case.cancelled else _echoes
        if not case.cancelled:
            first = request.payload % 999 if request.numbered else request.payload
            reply = _body(await call(app, request.headers, first))
            if request.expect not in reply or b'"result"' not in reply:
                raise RuntimeError(f"{name}: the echo failed: {reply[:300]!r}")
        if case.fill_threads:
            await _fill_threads(app)
        await run(app, request, WARM_UP)
        mark("warm-up")
        for calls in batches:
            await run(app, request, calls)
            mark(f"{calls} requests")
    finally:
        await stop()


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if len(args) < 2 or args[0] not in CASES:
        raise SystemExit(
            f"usage: python -m bench.features CASE CALLS...; cases: {', '.join(CASES)}"
        )
    asyncio.run(drive(args[0], [int(a) for a in args[1:]]))


if __name__ == "__main__":
    main()
