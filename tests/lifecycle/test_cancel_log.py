"""The cancellation log record is emitted while the request's span is current, so an
OpenTelemetry logging bridge stamps it with the MCP span's trace and span id."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator

import anyio
import pytest
from opentelemetry import trace
from opentelemetry.trace import SpanContext

from mcp_asgi import Context, McpMiddleware, McpServer

from ..helpers import (
    CANCEL_LOGGER,
    PARENT_ID,
    TRACE_ID,
    Otel,
    Wire,
    attrs,
    eventually,
    mcp_app,
    wire_for,
)

JSON = "application/json"


class SpanOfRecords(logging.Handler):
    """What an OTel logging bridge sees: the span current when each record is emitted."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.seen: list[tuple[logging.LogRecord, SpanContext]] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.seen.append((record, trace.get_current_span().get_span_context()))

    def of(self, message_start: str) -> list[SpanContext]:
        """The span contexts of the records whose message starts with `message_start`."""
        return [c for r, c in self.seen if r.getMessage().startswith(message_start)]

    def above_debug(self) -> list[tuple[logging.LogRecord, SpanContext]]:
        """The records above DEBUG (the one per cancelled request), with their spans."""
        return [(r, c) for r, c in self.seen if r.levelno > logging.DEBUG]


@pytest.fixture
def bridge() -> Iterator[SpanOfRecords]:
    """A handler on the cancellation logger, removed afterwards."""
    handler = SpanOfRecords()
    logger = logging.getLogger(CANCEL_LOGGER)
    saved = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
        logger.setLevel(saved)


def build_server(started: anyio.Event, released: threading.Event | None = None) -> McpServer:
    server = McpServer("logged")

    @server.tool()
    async def waits(ctx: Context, charge: bool = False) -> str:
        """Waits until cancelled; optionally marks a side effect first."""
        if charge:
            ctx.side_effect("charge_card", idempotency_key="k-1")
        started.set()
        await anyio.sleep_forever()
        return "never"

    @server.tool()
    def hog() -> str:
        """A thread that ignores its token until released: an orphan."""
        anyio.from_thread.run_sync(started.set)
        assert released is not None
        released.wait(5)
        return "late"

    return server


async def disconnect_once_started(app: McpMiddleware, wire: Wire, started: anyio.Event) -> None:
    """Run one request and drop the client once its handler has started."""
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(wire.run, app)
            await started.wait()
            wire.disconnect()


def ids(context: SpanContext) -> tuple[int, int]:
    return context.trace_id, context.span_id


@pytest.mark.parametrize(
    ("charge", "level", "message"),
    [
        (False, logging.INFO, "tools/call waits cancelled: client_disconnect (exited) after "),
        (
            True,
            logging.WARNING,
            "tools/call waits cancelled after side effect 'charge_card' "
            "(client_disconnect, exited): reconcile",
        ),
    ],
)
async def test_the_cancellation_record_is_in_the_request_span(
    otel: Otel, bridge: SpanOfRecords, charge: bool, level: int, message: str
) -> None:
    """A disconnect's record (WARNING after a side effect) names the tool and carries the
    MCP span's ids."""
    started = anyio.Event()
    app = mcp_app(build_server(started), otel)
    params = {"name": "waits", "arguments": {"charge": charge}}
    await disconnect_once_started(app, wire_for("tools/call", params, accept=JSON), started)
    [span] = otel.spans.get_finished_spans()
    assert span.context is not None
    [(record, context)] = bridge.above_debug()
    assert record.levelno == level
    assert record.getMessage().startswith(message)
    assert ids(context) == ids(span.context)
    assert not trace.get_current_span().get_span_context().is_valid  # detached again


async def test_an_orphans_late_exit_is_in_the_request_span(
    otel: Otel, bridge: SpanOfRecords
) -> None:
    """The DEBUG record of an orphan that finally returns also carries the span's ids."""
    started, released = anyio.Event(), threading.Event()
    app = mcp_app(build_server(started, released), otel, cancel_grace=0.05, process_kill_grace=0.05)
    await disconnect_once_started(
        app, wire_for("tools/call", {"name": "hog"}, accept=JSON), started
    )
    [span] = otel.spans.get_finished_spans()
    assert span.context is not None
    assert attrs(span)["mcp_asgi.cancellation.outcome"] == "orphaned"
    assert bridge.of("orphaned handler exited") == []
    released.set()
    await eventually(lambda: bool(bridge.of("orphaned handler exited")), what="the orphan's exit")
    [context] = bridge.of("orphaned handler exited")
    assert ids(context) == ids(span.context)


async def test_without_an_sdk_the_record_joins_the_callers_trace(bridge: SpanOfRecords) -> None:
    """No providers recording: the record still carries the trace of `_meta.traceparent`."""
    started = anyio.Event()
    app = mcp_app(build_server(started))
    meta = {"traceparent": f"00-{TRACE_ID:032x}-{PARENT_ID:016x}-01"}
    params = {"name": "waits", "_meta": meta}
    await disconnect_once_started(app, wire_for("tools/call", params, accept=JSON), started)
    [(_, context)] = bridge.above_debug()
    assert context.trace_id == TRACE_ID
