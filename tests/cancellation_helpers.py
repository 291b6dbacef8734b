"""Shared helpers for the cancellation tests: a live app, probes set from the server's thread,
process-group checks, and reads of spans, metrics and log records."""

from __future__ import annotations

import contextlib
import ctypes
import json
import logging
import os
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from opentelemetry.sdk.metrics.export import NumberDataPoint
from opentelemetry.sdk.trace import ReadableSpan
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from mcp_asgi import CancelReason, CancelToken, McpMiddleware, McpServer, McpSettings
from mcp_asgi.testing import McpTestClient

from .conftest import Otel

CANCEL_LOGGER = "mcp_asgi.cancellation"
_PR_SET_CHILD_SUBREAPER = 36


class Probe:
    """What a handler saw; set from the server's thread, read from the test's."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.exited = threading.Event()
        self.release = threading.Event()
        self.reason: CancelReason | None = None
        self.token: CancelToken | None = None
        self.pgid: int | None = None
        self.notes: list[str] = []

    def exit(self, reason: CancelReason | None) -> None:
        """Record the handler's exit (call it from its `finally`)."""
        self.reason = reason
        self.exited.set()


async def wait_for(event: threading.Event, limit: float = 10.0) -> None:
    """Wait for a `threading.Event` set on the server's thread, without blocking the loop."""
    assert await anyio.to_thread.run_sync(event.wait, limit), "timed out waiting"


async def eventually(check: Callable[[], bool], limit: float = 10.0, what: str = "it") -> None:
    """Poll a predicate until it holds (for states with no event to wait on); never asserts
    on how long it took."""
    with anyio.move_on_after(limit):
        while not check():  # noqa: ASYNC110 - the state lives on another thread
            await anyio.sleep(0.01)
        return
    raise AssertionError(f"timed out waiting for {what}")


def build_app(
    server: McpServer, otel: Otel | None = None, *, lifespan: Any = None, **settings: Any
) -> tuple[McpMiddleware, Starlette]:
    """The middleware over a Starlette app with a plain `/` route; returns both."""

    async def home(request: Request) -> PlainTextResponse:
        return PlainTextResponse("home")

    inner = Starlette(routes=[Route("/", home)], lifespan=lifespan)
    middleware = McpMiddleware(
        inner,
        server=server,
        settings=McpSettings(**settings),
        tracer_provider=otel.tracer_provider if otel else None,
        meter_provider=otel.meter_provider if otel else None,
    )
    return middleware, inner


async def get_home(url: str) -> int:
    """GET the app's own `/` route; the status code."""
    async with httpx.AsyncClient() as client:
        response = await client.get(url + "/")
        return response.status_code


def span_of(otel: Otel, tool: str) -> ReadableSpan:
    """The one finished span of `tools/call {tool}`."""
    spans = [s for s in otel.spans.get_finished_spans() if s.name == f"tools/call {tool}"]
    assert len(spans) == 1, [s.name for s in otel.spans.get_finished_spans()]
    return spans[0]


def has_span(otel: Otel, tool: str) -> bool:
    """Whether `tools/call {tool}` has ended."""
    return any(s.name == f"tools/call {tool}" for s in otel.spans.get_finished_spans())


def metric_sum(otel: Otel, name: str, **attributes: Any) -> float:
    """The sum of a counter's (or up-down counter's) points matching `attributes`."""
    total = 0.0
    for point in otel.points(name):
        assert isinstance(point, NumberDataPoint)
        point_attrs = dict(point.attributes or {})
        if all(point_attrs.get(k) == v for k, v in attributes.items()):
            total += point.value
    return total


def orphans_active(otel: Otel) -> float:
    """The current value of the `mcp_asgi.orphans.active` gauge."""
    return metric_sum(otel, "mcp_asgi.orphans.active")


def cancel_records(
    caplog: pytest.LogCaptureFixture, *, above: int = logging.DEBUG
) -> list[logging.LogRecord]:
    """Records of the cancellation logger above `above`."""
    return [r for r in caplog.records if r.name == CANCEL_LOGGER and r.levelno > above]


def records_for(caplog: pytest.LogCaptureFixture, request_id: int | str) -> list[logging.LogRecord]:
    """Cancellation records above DEBUG about one request."""
    return [r for r in cancel_records(caplog) if getattr(r, "request_id", None) == request_id]


# -- process groups ----------------------------------------------------------------------


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


def shell(script: str) -> list[str]:
    """argv running `script` with /bin/sh."""
    return ["/bin/sh", "-c", script]


# -- scripted ASGI (no sockets) ------------------------------------------------------------


class Wire:
    """A scripted client for one request: the body first, then `receive` blocks until
    `disconnect()`. `send` records every message; `on_body` runs before each body is
    recorded (to inject a disconnect at an exact moment)."""

    def __init__(self, body: dict[str, Any], headers: dict[str, str]) -> None:
        self.sent: list[dict[str, Any]] = []
        self.gone = anyio.Event()
        self.disconnected_at: int | None = None  # len(sent) when the client left
        self.on_body: Any = None
        self.fail_sends = False
        self._body = json.dumps(body).encode()
        self._delivered = False
        self.scope: dict[str, Any] = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": "POST",
            "scheme": "http",
            "path": "/mcp",
            "raw_path": b"/mcp",
            "root_path": "",
            "query_string": b"",
            "headers": [(k.encode(), v.encode()) for k, v in headers.items()]
            + [(b"host", b"127.0.0.1:8000")],
            "client": ("127.0.0.1", 50000),
            "server": ("127.0.0.1", 8000),
        }

    def disconnect(self) -> None:
        if not self.gone.is_set():
            self.disconnected_at = len(self.sent)
            self.gone.set()

    async def receive(self) -> dict[str, Any]:
        if not self._delivered:
            self._delivered = True
            return {"type": "http.request", "body": self._body, "more_body": False}
        await self.gone.wait()
        return {"type": "http.disconnect"}

    async def send(self, message: Any) -> None:
        if message["type"] == "http.response.body" and self.on_body is not None:
            await self.on_body(message)
        if self.fail_sends:
            raise OSError("connection lost")
        self.sent.append(dict(message))

    @property
    def bodies(self) -> list[dict[str, Any]]:
        return [m for m in self.sent if m["type"] == "http.response.body"]

    @property
    def ended(self) -> bool:
        """The response is complete (its last body has no `more_body`)."""
        return bool(self.bodies) and not self.bodies[-1].get("more_body", False)

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The JSON-RPC messages sent (SSE events or one JSON body)."""
        raw = b"".join(m.get("body", b"") for m in self.bodies)
        start = next((m for m in self.sent if m["type"] == "http.response.start"), None)
        headers = dict(start["headers"]) if start else {}
        if headers.get(b"content-type", b"").startswith(b"text/event-stream"):
            found = []
            for line in raw.decode().splitlines():
                if line.startswith("data:"):
                    found.append(json.loads(line[5:].strip()))
            return found
        return [json.loads(raw)] if raw else []


def wire_for(
    method: str, params: dict[str, Any], *, accept: str, request_id: int | str = 1, **options: Any
) -> Wire:
    """A `Wire` carrying one well-formed 2026-07-28 request."""
    client = McpTestClient("http://127.0.0.1:8000/mcp")
    body = client.build(method, params, id=request_id, **options)
    headers = client.headers_for(body)
    headers["accept"] = accept
    return Wire(body, headers)
