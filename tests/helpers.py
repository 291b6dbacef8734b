"""What the tests share: waiting on the server's thread, probes that record what a handler
saw, the in-memory OpenTelemetry pipeline, the app McpMiddleware wraps, scripted ASGI (one
request driven straight into an app, no sockets), and a few live-server and process helpers.

The servers the tests run against (and their clients) are in `tests/servers.py`; fixtures
are in `tests/conftest.py` (global) and a folder's own conftest.py (tests/bus, tests/lifecycle).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
import threading
from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Iterator,
    Mapping,
    Sequence,
)
from contextlib import asynccontextmanager, contextmanager
from importlib.metadata import version
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import (
    HistogramDataPoint,
    InMemoryMetricReader,
    NumberDataPoint,
)
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from mcp_asgi import CancelReason, CancelToken, Context, McpMiddleware, McpServer, McpSettings
from mcp_asgi.http.accept import ResponseMode
from mcp_asgi.http.reply import ReplyWriter
from mcp_asgi.lifecycle.scope import RequestScope, ScopeObserver
from mcp_asgi.protocol.request import McpRequest
from mcp_asgi.testing import PROTOCOL_VERSION, McpStream, McpTestClient, serve
from mcp_asgi.testing.http_client import parse_messages

CANCEL_LOGGER = "mcp_asgi.cancellation"

# The ids of a remote parent (W3C `traceparent`), for requests that arrive inside a trace.
# jsonschema's words for an empty array or string where one item or character is the
# least: "should be non-empty" since 4.21, "is too short" before (pyproject's floor is 4.18)
JSONSCHEMA_EMPTY = (
    "should be non-empty"
    if tuple(int(part) for part in version("jsonschema").split(".")[:2]) >= (4, 21)
    else "is too short"
)
TRACE_ID = 0x0AF7651916CD43DD8448EB211C80319C
PARENT_ID = 0xB7AD6B7169203331

# -- waiting -------------------------------------------------------------------------------


async def wait_for(event: threading.Event, limit: float = 10.0) -> None:
    """Wait for a `threading.Event` set on the server's thread, without blocking the loop."""
    assert await anyio.to_thread.run_sync(event.wait, limit), "timed out waiting"


async def eventually(check: Callable[[], bool], limit: float = 10.0, what: str = "it") -> None:
    """Poll a predicate until it holds (for state with no event to wait on, e.g. in another
    thread or on another loop); never asserts on how long it took."""
    with anyio.move_on_after(limit):
        while not check():  # noqa: ASYNC110 - the state lives on another thread
            await anyio.sleep(0.01)
        return
    raise AssertionError(f"timed out waiting for {what}")


@asynccontextmanager
async def watchdog(seconds: float = 5.0, what: str = "something") -> AsyncIterator[None]:
    """Fail (instead of hanging) if the block takes longer than `seconds`."""
    with anyio.move_on_after(seconds) as scope:
        yield
    assert not scope.cancelled_caught, f"watchdog fired: {what} hung"


# -- what handlers saw -----------------------------------------------------------------------


class Probe:
    """What a handler saw; set on the server's thread, read on the test's."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.exited = threading.Event()
        self.release = threading.Event()
        self.reason: CancelReason | None = None
        self.ctx: Context | None = None
        self.token: CancelToken | None = None
        self.pgid: int | None = None
        self.notes: list[str] = []

    def exit(self, reason: CancelReason | None) -> None:
        """Record the handler's exit (call it from its `finally`)."""
        self.reason = reason
        self.exited.set()

    @contextmanager
    def running(self, source: Context | CancelToken) -> Iterator[None]:
        """Mark the handler started; however it leaves the block, record its exit with the
        reason `source` (its context or its token) gives."""
        self.started.set()
        try:
            yield
        finally:
            self.exit(source.cancel_reason if isinstance(source, Context) else source.reason)


class Probes:
    """One probe per name (a tool, or a key the test chooses), made on first use."""

    def __init__(self) -> None:
        self.by_name: dict[str, Probe] = {}

    def __getitem__(self, name: str) -> Probe:
        return self.by_name.setdefault(name, Probe())


class Clock:
    """A wall clock the test moves by hand."""

    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


# -- OpenTelemetry -------------------------------------------------------------------------


def attrs(span: ReadableSpan) -> dict[str, Any]:
    """The span's attributes as a plain dict."""
    return dict(span.attributes or {})


class Otel:
    """Providers wired to in-memory exporters, passed into the middleware (never global)."""

    def __init__(self) -> None:
        self.spans = InMemorySpanExporter()
        self.tracer_provider = TracerProvider()
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.spans))
        self.reader = InMemoryMetricReader()
        self.meter_provider = MeterProvider(metric_readers=[self.reader])

    def finished(self, name: str) -> list[ReadableSpan]:
        """The finished spans called `name`."""
        return [span for span in self.spans.get_finished_spans() if span.name == name]

    def span(self, name: str) -> ReadableSpan:
        """The one finished span called `name`."""
        spans = self.finished(name)
        assert len(spans) == 1, [s.name for s in self.spans.get_finished_spans()]
        return spans[0]

    def attribute_by_span(self, key: str) -> dict[str, Any]:
        """The attribute `key` of each finished span (None where it has none), by span name."""
        return {span.name: attrs(span).get(key) for span in self.spans.get_finished_spans()}

    async def wait_span(self, name: str) -> ReadableSpan:
        """Wait until a span called `name` has ended, in any thread; the first such span."""
        await eventually(lambda: bool(self.finished(name)), what=f"the span {name!r}")
        return self.finished(name)[0]

    def points(self, name: str) -> list[object]:
        """The data points of the metric `name`."""
        data = self.reader.get_metrics_data()
        found: list[object] = []
        for rm in data.resource_metrics if data else []:
            for sm in rm.scope_metrics:
                for metric in sm.metrics:
                    if metric.name == name:
                        found.extend(metric.data.data_points)
        return found

    def histograms(self, name: str) -> list[HistogramDataPoint]:
        """Histogram points of the metric `name`."""
        points = self.points(name)
        assert all(isinstance(p, HistogramDataPoint) for p in points)
        return [p for p in points if isinstance(p, HistogramDataPoint)]

    def numbers(self, name: str, *, by_method: bool = False) -> list[NumberDataPoint]:
        """Counter / up-down counter points of the metric `name`; `by_method`: only those
        with `mcp.method.name` (not an up-down counter's point at 0 from start-up)."""
        points = self.points(name)
        assert all(isinstance(p, NumberDataPoint) for p in points)
        return [
            p
            for p in points
            if isinstance(p, NumberDataPoint)
            and (not by_method or "mcp.method.name" in (p.attributes or {}))
        ]

    def total(self, name: str, match: Mapping[str, Any] | None = None) -> float:
        """The sum of a counter's points whose attributes include `match`."""
        wanted = dict(match or {})
        return sum(
            p.value
            for p in self.numbers(name)
            if all((p.attributes or {}).get(k) == v for k, v in wanted.items())
        )

    def orphans_active(self) -> float:
        """The current value of the `mcp_asgi.orphans.active` gauge."""
        return self.total("mcp_asgi.orphans.active")

    def shutdown(self) -> None:
        self.tracer_provider.shutdown()
        self.meter_provider.shutdown()


# -- log records ---------------------------------------------------------------------------


def cancel_records(
    caplog: pytest.LogCaptureFixture, *, above: int = logging.DEBUG
) -> list[logging.LogRecord]:
    """Records of the cancellation logger above `above`."""
    return [r for r in caplog.records if r.name == CANCEL_LOGGER and r.levelno > above]


def records_for(caplog: pytest.LogCaptureFixture, request_id: int | str) -> list[logging.LogRecord]:
    """Cancellation records above DEBUG about one request."""
    return [r for r in cancel_records(caplog) if getattr(r, "request_id", None) == request_id]


def log_to_stderr(level: int) -> None:
    """In a worker process the tests start: mcp_asgi's records from `level` up on stderr,
    one per line, `LEVEL logger message` (what `is_ours` and the fault tests read)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s %(message)s"))
    logger = logging.getLogger("mcp_asgi")
    logger.addHandler(handler)
    logger.setLevel(level)


def is_ours(line: str) -> bool:
    """Whether a line of such a worker's stderr is one of mcp_asgi's records (not the
    server's own lines, nor a traceback's)."""
    fields = line.split(" ", 2)
    return len(fields) > 1 and fields[1].startswith("mcp_asgi")


# -- the app McpMiddleware wraps -----------------------------------------------------------


async def _home(request: Request) -> PlainTextResponse:
    return PlainTextResponse("home")


async def _not_found(request: Request, exc: Exception) -> PlainTextResponse:
    return PlainTextResponse("host app", status_code=404)


def host_app(routes: Sequence[BaseRoute] = (), lifespan: Any = None) -> Starlette:
    """The host app of the tests: `/` answers "home", `routes` whatever they answer, and
    every other path 404 "host app"; `lifespan` is the host's own."""
    return Starlette(
        routes=[Route("/", _home), *routes],
        lifespan=lifespan,
        exception_handlers={404: _not_found},
    )


def mcp_app(
    server: McpServer,
    otel: Otel | None = None,
    *,
    routes: Sequence[BaseRoute] = (),
    lifespan: Any = None,
    **settings: Any,
) -> McpMiddleware:
    """`server` served by McpMiddleware with `settings` (and the test's providers, if any),
    in front of the host app."""
    return McpMiddleware(
        host_app(routes, lifespan),
        server=server,
        settings=McpSettings(**settings),
        tracer_provider=otel.tracer_provider if otel else None,
        meter_provider=otel.meter_provider if otel else None,
    )


# -- scripted ASGI (no sockets) --------------------------------------------------------------

Headers = Mapping[str, str] | Sequence[tuple[str, str]]


def http_scope(
    headers: Headers = (),
    *,
    method: str = "POST",
    path: str = "/mcp",
    root_path: str = "",
    server: tuple[str, int] = ("127.0.0.1", 8000),
) -> dict[str, Any]:
    """The scope of one HTTP request; a Host header naming `server` unless one is given."""
    items = list(headers.items()) if isinstance(headers, Mapping) else list(headers)
    if not any(k.lower() == "host" for k, _ in items):
        items.insert(0, ("host", f"{server[0]}:{server[1]}"))
    return {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.4"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": root_path + path,
        "raw_path": (root_path + path).encode(),
        "root_path": root_path,
        "query_string": b"",
        "headers": [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in items],
        "client": ("127.0.0.1", 123),  # the client address httpx.ASGITransport reports
        "server": server,
    }


class Wire:
    """A scripted client for one request: `receive` hands over the body (whole or in
    chunks; none at all for an empty sequence), then blocks until the client leaves, which
    it does on `disconnect()`, once `leave_on` is set, or (with `leave_when_done`) once the
    response is complete.

    `send` records every message; `on_body` runs before each body is recorded (to act at an
    exact moment); with `fail_sends` every send raises, as on a connection already gone.
    Unlike `httpx.ASGITransport` it controls every scope field (the server address,
    duplicate headers, a Content-Length that lies) and shows the response as it was sent.
    """

    def __init__(
        self,
        body: bytes | Sequence[bytes] = b"",
        headers: Headers = (),
        *,
        leave_on: threading.Event | None = None,
        leave_when_done: bool = False,
        **scope: Any,
    ) -> None:
        self.scope = http_scope(headers, **scope)
        self.sent: list[Message] = []
        self.gone = anyio.Event()
        self.disconnected_at: int | None = None  # len(sent) when the client left
        self.on_body: Callable[[Message], Awaitable[None]] | None = None
        self.fail_sends = False
        self._chunks = [body] if isinstance(body, bytes) else list(body)
        self._leave_on = leave_on
        self._leave_when_done = leave_when_done
        self._receive_failure: Exception | None = None

    def disconnect(self, *, broken_pipe: bool = False) -> None:
        """The client leaves (with `broken_pipe`, every later send fails)."""
        self.fail_sends = self.fail_sends or broken_pipe
        if not self.gone.is_set():
            self.disconnected_at = len(self.sent)
            self.gone.set()

    def fail_receive(self) -> None:
        """`receive` itself fails from now on (a broken server), instead of a disconnect."""
        self._receive_failure = OSError("receive failed")
        self.gone.set()

    async def receive(self) -> Message:
        if self._chunks:
            chunk = self._chunks.pop(0)
            return {"type": "http.request", "body": chunk, "more_body": bool(self._chunks)}
        if self._leave_on is not None:
            await wait_for(self._leave_on)
            self.disconnect()
        await self.gone.wait()
        if self._receive_failure is not None:
            raise self._receive_failure
        return {"type": "http.disconnect"}

    async def send(self, message: Message) -> None:
        if message["type"] == "http.response.body" and self.on_body is not None:
            await self.on_body(message)
        if self.fail_sends:
            raise OSError("connection lost")
        self.sent.append(dict(message))
        if self._leave_when_done and self.ended:
            self.disconnect()

    async def run(self, app: ASGIApp) -> Wire:
        """Drive `app` with this request until it returns."""
        await app(self.scope, self.receive, self.send)
        return self

    @property
    def status(self) -> int:
        return next((m["status"] for m in self.sent if m["type"] == "http.response.start"), 0)

    @property
    def headers(self) -> dict[str, str]:
        """The response headers (lower-case names)."""
        start = next((m for m in self.sent if m["type"] == "http.response.start"), {})
        return {k.decode(): v.decode() for k, v in start.get("headers", [])}

    @property
    def content_type(self) -> str:
        return self.headers.get("content-type", "")

    @property
    def bodies(self) -> list[Message]:
        return [m for m in self.sent if m["type"] == "http.response.body"]

    @property
    def body(self) -> bytes:
        return b"".join(m.get("body", b"") for m in self.bodies)

    @property
    def written_after_disconnect(self) -> list[bytes]:
        """Body bytes sent after the client left (there must never be any)."""
        if self.disconnected_at is None:
            return []
        return [m["body"] for m in self.sent[self.disconnected_at :] if m.get("body")]

    @property
    def ended(self) -> bool:
        """The response is complete (its last body has no `more_body`)."""
        return bool(self.bodies) and not self.bodies[-1].get("more_body", False)

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The JSON-RPC messages sent: one JSON body, or every SSE `data:` event."""
        return parse_messages(self.headers, self.body)

    @property
    def final(self) -> dict[str, Any]:
        """The last JSON-RPC message (the response)."""
        return self.messages[-1]

    @property
    def error(self) -> dict[str, Any]:
        """The JSON-RPC `error` member of the final message."""
        error: dict[str, Any] = self.final["error"]
        return error

    @property
    def result(self) -> dict[str, Any]:
        """The JSON-RPC `result` member of the final message."""
        result: dict[str, Any] = self.final["result"]
        return result


async def asgi_request(
    app: ASGIApp, *, body: bytes | Sequence[bytes] = b"", headers: Headers = (), **scope: Any
) -> Wire:
    """Send one request to `app` (the client stays until the response is complete) and
    return the whole exchange."""
    wire = Wire(body, headers, leave_when_done=True, **scope)
    with anyio.fail_after(10):
        return await wire.run(app)


_builder = McpTestClient("http://127.0.0.1:8000/mcp")


def mcp_body(
    method: str,
    params: Mapping[str, Any] | None = None,
    *,
    id: int | str = 7,
    progress: bool = False,
    log_level: str | None = None,
    meta: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A valid 2026-07-28 request body (with the `_meta` envelope, plus `meta`)."""
    payload = dict(params or {})
    if meta:
        payload["_meta"] = dict(meta)
    return _builder.build(method, payload, id=id, progress=progress, log_level=log_level)


def mcp_headers(body: Mapping[str, Any], **replace: str | None) -> list[tuple[str, str]]:
    """The standard headers matching `body`; `replace` sets (or, with None, drops) headers.

    Keyword names may use underscores for dashes: `mcp_name="x"` sets `mcp-name: x`.
    """
    headers = _builder.headers_for(body)
    for key, value in replace.items():
        name = key.replace("_", "-")
        if value is None:
            headers.pop(name, None)
        else:
            headers[name] = value
    return list(headers.items())


async def post(
    app: ASGIApp, body: Any, *, headers_of: Mapping[str, Any] | None = None, **replace: str | None
) -> Wire:
    """POST `body` as JSON with the standard headers of `headers_of` (default: `body`)."""
    headers = mcp_headers(body if headers_of is None else headers_of, **replace)
    return await asgi_request(app, headers=headers, body=json.dumps(body).encode())


async def call(
    app: ASGIApp,
    method: str,
    params: Mapping[str, Any] | None = None,
    *,
    headers: Mapping[str, str | None] | None = None,
    **options: Any,
) -> Wire:
    """POST a valid request for `method` with matching headers (`headers` replace them)."""
    body = mcp_body(method, params, **options)
    headers_sent = mcp_headers(body, **(headers or {}))
    return await asgi_request(app, headers=headers_sent, body=json.dumps(body).encode())


def wire_for(
    method: str,
    params: Mapping[str, Any],
    *,
    accept: str | None = None,
    request_id: int | str = 1,
    leave_on: threading.Event | None = None,
    leave_when_done: bool = False,
    **options: Any,
) -> Wire:
    """A `Wire` carrying one well-formed 2026-07-28 request (the client stays until it
    disconnects, or with `leave_when_done` until the response is complete)."""
    body = mcp_body(method, params, id=request_id, **options)
    headers = mcp_headers(body, accept=accept) if accept else mcp_headers(body)
    return Wire(
        json.dumps(body).encode(), headers, leave_on=leave_on, leave_when_done=leave_when_done
    )


class Exchange:
    """One HTTP exchange on the MCP path, as the wiretap saw it."""

    def __init__(self, method: str, headers: dict[str, str]) -> None:
        self.method = method
        self.headers = headers  # the request's, lower-case names
        self.body = b""  # the request's
        self.start: Message = {}  # the response's `http.response.start`
        self.chunks: list[bytes] = []  # the response's body messages

    @property
    def message(self) -> dict[str, Any] | None:
        """The JSON-RPC message the client sent, if any."""
        return json.loads(self.body) if self.body else None

    @property
    def content_type(self) -> str:
        """The response's content type."""
        return str(dict(self.start.get("headers", [])).get(b"content-type", b"").decode())

    @property
    def replies(self) -> list[dict[str, Any]]:
        """The JSON-RPC messages of the response: one JSON body, or every SSE event."""
        return parse_messages({"content-type": self.content_type}, b"".join(self.chunks))


class Wiretap:
    """ASGI wrapper recording every exchange on the MCP path: what the client sent, and
    every message of the response."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.exchanges: list[Exchange] = []

    async def __call__(self, asgi_scope: Scope, receive: Receive, send: Send) -> None:
        if asgi_scope["type"] != "http" or asgi_scope["path"] != "/mcp":
            await self.app(asgi_scope, receive, send)
            return
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in asgi_scope["headers"]}
        exchange = Exchange(asgi_scope["method"], headers)
        self.exchanges.append(exchange)

        async def receive_recorded() -> Message:
            message = await receive()
            exchange.body += message.get("body", b"")
            return message

        async def send_recorded(message: Message) -> None:
            if message["type"] == "http.response.start":
                exchange.start = message
            else:
                exchange.chunks.append(message.get("body", b""))
            await send(message)

        await self.app(asgi_scope, receive_recorded, send_recorded)

    def calls(self, method: str) -> list[Exchange]:
        """The POSTs of requests for `method`, in order."""
        return [
            e for e in self.exchanges if e.message is not None and e.message.get("method") == method
        ]

    def methods(self) -> list[str]:
        """What each exchange was: the JSON-RPC method, or the HTTP method."""
        return [e.message["method"] if e.message else e.method for e in self.exchanges]


def request_scope(
    send: Send,
    mode: ResponseMode = "auto",
    *,
    protocol_version: str = PROTOCOL_VERSION,
    **options: Any,
) -> RequestScope:
    """The scope of a `tools/call` whose body was already read, replying through `send`."""
    request = McpRequest(
        id=7,
        method="tools/call",
        params={"name": "slow"},
        protocol_version=protocol_version,
        client_capabilities={},
        client_info=None,
        log_level=None,
        progress_token=None,
        meta={},
    )
    return RequestScope(
        request,
        ReplyWriter(send, mode),
        timeout=None,
        cancel_grace=1.0,
        keepalive_interval=0.0,
        observer=ScopeObserver(),
        **options,
    )


# -- live servers --------------------------------------------------------------------------


@contextmanager
def serving(
    app: ASGIApp,
    *,
    headers: Mapping[str, str] | None = None,
    capabilities: Mapping[str, Any] | None = None,
    **config: Any,
) -> Iterator[McpTestClient]:
    """`serve(app, **config)`, and a client of its MCP endpoint."""
    with serve(app, **config) as server:
        yield McpTestClient(server.url + "/mcp", headers=headers, capabilities=capabilities)


async def next_message(stream: McpStream) -> dict[str, Any]:
    """The next JSON-RPC message of a stream that must not have ended."""
    with anyio.fail_after(10):
        message = await stream.next_message()
    assert message is not None, "the stream ended"
    return message


async def drop_mid_call(
    client: McpTestClient,
    tool: str,
    probe: Probe,
    arguments: Mapping[str, Any] | None = None,
    *,
    read_progress: bool = False,
    **options: Any,
) -> None:
    """Call `tool` and close the connection once its handler has started (and, with
    `read_progress`, once its first progress notification has arrived)."""
    params: dict[str, Any] = {"name": tool}
    if arguments is not None:
        params["arguments"] = dict(arguments)
    async with client.stream("tools/call", params, **options) as stream:
        await wait_for(probe.started)
        if read_progress:
            assert (await next_message(stream))["method"] == "notifications/progress"
        await stream.drop()


async def trigger(base_url: str, method: str, path: str, **params: str) -> None:
    """Make something happen through one of the host app's plain routes."""
    async with httpx.AsyncClient(base_url=base_url) as http:
        response = await http.request(method, path, params=params or None)
    assert response.status_code == 200, response.text


def request_tasks() -> list[str]:
    """uvicorn's request tasks still running on this loop."""
    return [
        repr(task.get_coro())
        for task in asyncio.all_tasks()
        if "run_asgi" in repr(task.get_coro()) and not task.done()
    ]


# -- process groups ------------------------------------------------------------------------


def shell(script: str) -> list[str]:
    """argv running `script` with /bin/sh."""
    return ["/bin/sh", "-c", script]


def group_gone(pgid: int) -> bool:
    """True when no process of the group is left (`killpg(pgid, 0)` finds none)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return True
    return False


def read_pgid(path: Path) -> int | None:
    """The pid a shell wrote with `echo $$ > path` (its process group id), once written."""
    try:
        text = path.read_text().strip()
    except FileNotFoundError:
        return None
    return int(text) if text.isdigit() else None


class Lifespan:
    """A scripted ASGI server's lifespan side: startup at once, shutdown on demand."""

    def __init__(self) -> None:
        self.sent: list[str] = []
        self.started = anyio.Event()
        self.stop = anyio.Event()
        self._step = 0

    async def receive(self) -> dict[str, Any]:
        self._step += 1
        if self._step == 1:
            return {"type": "lifespan.startup"}
        await self.stop.wait()
        return {"type": "lifespan.shutdown"}

    async def send(self, message: Any) -> None:
        self.sent.append(message["type"])
        if message["type"] == "lifespan.startup.complete":
            self.started.set()
