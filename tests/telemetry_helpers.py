"""Shared helpers for the telemetry tests: an instrumented app, in-process calls, polling."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping
from typing import Any

import anyio
import httpx
from opentelemetry import baggage, trace
from opentelemetry.sdk.metrics.export import HistogramDataPoint, NumberDataPoint
from opentelemetry.sdk.trace import ReadableSpan

from mcp_asgi import Context, McpError, McpMiddleware, McpServer, McpSettings
from mcp_asgi._asgi import ASGIApp, Receive, Scope, Send
from mcp_asgi.testing import McpTestClient

from .helpers import Otel

SECRET = "s3cret-argument-value"


class Handlers:
    """What the tools saw; set from the server's thread, read from the test's."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.exited = threading.Event()
        self.release = threading.Event()
        self.ctx: Context | None = None


def build_server(handlers: Handlers) -> McpServer:
    """A server whose tools cover every telemetry path."""
    server = McpServer("telemetry", version="1.0.0")

    @server.tool()
    async def echo(text: str) -> str:
        """Returns its input."""
        return text

    @server.tool()
    async def broken() -> str:
        """Fails: the failure becomes an `isError` result."""
        raise ValueError("nope")

    @server.tool()
    async def quota() -> str:
        """Answers with an application JSON-RPC error."""
        raise McpError(1001, "quota exceeded")

    @server.tool()
    async def whoami() -> dict[str, str]:
        """The span and baggage the handler runs under."""
        context = trace.get_current_span().get_span_context()
        return {
            "trace_id": f"{context.trace_id:032x}",
            "span_id": f"{context.span_id:016x}",
            "tenant": str(baggage.get_baggage("tenant")),
        }

    @server.tool()
    async def slow(ctx: Context) -> str:
        """Waits until cancelled, after one progress notification."""
        handlers.ctx = ctx
        handlers.started.set()
        try:
            await ctx.report_progress(1)
            await anyio.sleep(30)
        finally:
            handlers.exited.set()
        return "never"

    @server.tool()
    async def charge(ctx: Context) -> str:
        """Charges a card, then waits until cancelled."""
        ctx.side_effect("charge_card", idempotency_key="order-1")
        handlers.started.set()
        await anyio.sleep(30)
        return "never"

    @server.tool(timeout=0.2)
    async def stuck() -> str:
        """Runs past its own timeout."""
        await anyio.sleep(30)
        return "never"

    @server.tool()
    def hog() -> str:
        """A thread that ignores its cancel token until released: an orphan."""
        handlers.started.set()
        handlers.release.wait(20)
        return "late"

    @server.resource("boom://{name}")
    async def boom(name: str) -> str:
        """Raises an unhandled exception."""
        raise RuntimeError(f"kaboom {name}")

    @server.resource("notes://{name}")
    async def note(name: str) -> str:
        """A resource that reads fine."""
        return f"note {name}"

    return server


async def plain(scope: Scope, receive: Receive, send: Send) -> None:
    """The app behind the middleware: lifespan, and 404 for every HTTP request."""
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    if scope["type"] != "http":
        return
    await send({"type": "http.response.start", "status": 404, "headers": []})
    await send({"type": "http.response.body", "body": b""})


def build_app(
    otel: Otel,
    handlers: Handlers | None = None,
    *,
    app: ASGIApp = plain,
    **settings: Any,
) -> McpMiddleware:
    """The middleware with the test's providers injected."""
    return McpMiddleware(
        app,
        server=build_server(handlers or Handlers()),
        settings=McpSettings(**settings),
        tracer_provider=otel.tracer_provider,
        meter_provider=otel.meter_provider,
    )


def body_and_headers(
    method: str,
    params: Mapping[str, Any] | None = None,
    *,
    meta: Mapping[str, Any] | None = None,
    request_id: int = 7,
) -> tuple[dict[str, Any], dict[str, str]]:
    """A request body with the `_meta` envelope, and its standard headers."""
    client = McpTestClient("http://testserver/mcp")
    payload = dict(params or {})
    if meta:
        payload["_meta"] = dict(meta)
    body = client.build(method, payload, id=request_id)
    return body, client.headers_for(body)


async def call(
    app: ASGIApp,
    method: str,
    params: Mapping[str, Any] | None = None,
    *,
    meta: Mapping[str, Any] | None = None,
    headers: Mapping[str, str] | None = None,
) -> httpx.Response:
    """Send one request to the app in process (no network)."""
    body, standard = body_and_headers(method, params, meta=meta)
    standard.update(headers or {})
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as http:
        return await http.post("/mcp", content=json.dumps(body), headers=standard)


async def disconnect_after(
    app: ASGIApp,
    method: str,
    params: Mapping[str, Any],
    signal: threading.Event | anyio.Event,
    *,
    broken_pipe: bool = False,
) -> list[dict[str, Any]]:
    """Drive the app in process; the client disconnects once `signal` is set (or, with
    `broken_pipe`, every `send` fails as on a connection already gone)."""
    body, headers = body_and_headers(method, params)
    pending = [{"type": "http.request", "body": json.dumps(body).encode(), "more_body": False}]
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        if pending:
            return pending.pop()
        if isinstance(signal, threading.Event):
            await wait_event(signal)
        else:
            await signal.wait()
        return {"type": "http.disconnect"}

    async def send(message: Any) -> None:
        if broken_pipe:
            raise OSError("broken pipe")
        sent.append(dict(message))

    scope: dict[str, Any] = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/mcp",
        "raw_path": b"/mcp",
        "root_path": "",
        "query_string": b"",
        "headers": [(k.encode(), v.encode()) for k, v in headers.items()],
        "client": ("127.0.0.1", 50000),
        "server": ("testserver", 80),
    }
    await app(scope, receive, send)
    return sent


def finished(otel: Otel, name: str) -> list[ReadableSpan]:
    """Finished spans called `name`."""
    return [span for span in otel.spans.get_finished_spans() if span.name == name]


def only(otel: Otel, name: str) -> ReadableSpan:
    """The one finished span called `name`."""
    spans = finished(otel, name)
    assert len(spans) == 1, [s.name for s in otel.spans.get_finished_spans()]
    return spans[0]


async def until(predicate: Callable[[], bool]) -> None:
    """Poll (bounded, 10 s) for state that another thread or event loop changes."""
    with anyio.fail_after(10):
        while not predicate():  # noqa: ASYNC110 - the state lives in another thread
            await anyio.sleep(0.01)


async def wait_span(otel: Otel, name: str) -> ReadableSpan:
    """Wait until the span called `name` has ended, in any thread."""
    await until(lambda: bool(finished(otel, name)))
    return finished(otel, name)[0]


async def wait_event(event: threading.Event) -> None:
    """Wait for a flag set in the server's thread, without blocking the event loop."""
    assert await anyio.to_thread.run_sync(event.wait, 10), "timed out"


def histograms(otel: Otel, name: str) -> list[HistogramDataPoint]:
    """Histogram points of the metric `name`."""
    points = otel.points(name)
    assert all(isinstance(p, HistogramDataPoint) for p in points)
    return [p for p in points if isinstance(p, HistogramDataPoint)]


def numbers(otel: Otel, name: str) -> list[NumberDataPoint]:
    """Counter / up-down counter points of the metric `name`."""
    points = otel.points(name)
    assert all(isinstance(p, NumberDataPoint) for p in points)
    return [p for p in points if isinstance(p, NumberDataPoint)]


def total(otel: Otel, name: str, match: Mapping[str, Any] | None = None) -> float:
    """Sum of a counter's points whose attributes include `match`."""
    wanted = dict(match or {})
    return sum(
        p.value
        for p in numbers(otel, name)
        if all((p.attributes or {}).get(k) == v for k, v in wanted.items())
    )
