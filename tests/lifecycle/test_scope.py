"""The request scope driven with scripted receive/send (no sockets): the write choke point,
the exact moments of a signal, thread accounting, and cancellation from outside.

Every test runs under a watchdog that must not fire: a hang is a failure, not a timeout.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Awaitable, Callable
from contextlib import AbstractContextManager

import anyio
import anyio.lowlevel
import anyio.to_thread
import pytest
from starlette.types import Message

from mcp_asgi import CancelReason, CancelToken, Context, McpServer
from mcp_asgi.lifecycle.armed import plain
from mcp_asgi.lifecycle.scope import Phase, ScopeObserver
from mcp_asgi.protocol.jsonrpc import JsonObject

from ..helpers import (
    CANCEL_LOGGER,
    Otel,
    Wire,
    attrs,
    cancel_records,
    mcp_app,
    request_scope,
    watchdog,
    wire_for,
)

SSE = "text/event-stream"
JSON = "application/json"


class Seen:
    """What the handlers did, on the test's own event loop."""

    def __init__(self) -> None:
        self.started = anyio.Event()
        self.exited = anyio.Event()
        self.late_writes: list[bool] = []
        self.reason: CancelReason | None = None
        self.thread_ran = threading.Event()
        self.token: CancelToken | None = None


def build_server(seen: Seen) -> McpServer:
    server = McpServer("scripted")

    @server.tool()
    async def talker(ctx: Context) -> str:
        """Reports progress, waits forever, then tries to write from its `finally`."""
        await ctx.report_progress(1)
        seen.started.set()
        try:
            await anyio.sleep_forever()
        finally:
            with anyio.CancelScope(shield=True):
                seen.reason = ctx.cancel_reason
                await ctx.report_progress(2)
                await ctx.log("error", "late")
                seen.late_writes.append(ctx.cancelled)
            seen.exited.set()
        return "never"

    @server.tool()
    async def quick() -> str:
        """Returns at once."""
        return "done"

    @server.tool()
    async def grouped() -> str:
        """Waits, then ends a task group of its own by cancelling it (as a streaming
        response does once its body is sent): a cancellation sent from within."""
        async with anyio.create_task_group() as tg:
            tg.start_soon(anyio.sleep_forever)
            await anyio.sleep(0.001)
            tg.cancel_scope.cancel()
        return "grouped"

    @server.tool()
    def threaded(token: CancelToken) -> str:
        """A sync tool; records whether it ever ran."""
        seen.thread_ran.set()
        token.wait(30)
        return "ran"

    @server.tool()
    async def offloaded(ctx: Context) -> str:
        """Hands a token-polling function to a worker thread."""
        seen.token = ctx.cancel_token
        seen.started.set()

        def work(token: CancelToken) -> str:
            token.wait(30)
            return "stopped"

        try:
            return await ctx.run_sync(work, ctx.cancel_token)
        finally:
            seen.reason = ctx.cancel_reason
            seen.exited.set()

    return server


async def test_nothing_is_written_after_a_disconnect(otel: Otel) -> None:
    """After the disconnect every write of the handler (progress, log) is dropped at the
    choke point, even from a shielded `finally`."""
    seen = Seen()
    app = mcp_app(build_server(seen), otel, response_mode="sse")
    wire = wire_for("tools/call", {"name": "talker"}, accept=SSE, progress=True, log_level="debug")
    async with watchdog(), anyio.create_task_group() as tg:
        tg.start_soon(wire.run, app)
        await seen.started.wait()
        wire.disconnect()
        await seen.exited.wait()
    assert seen.reason is CancelReason.CLIENT_DISCONNECT
    assert seen.late_writes == [True]
    assert wire.disconnected_at is not None
    after = wire.sent[wire.disconnected_at :]
    # at most the empty last chunk that completes the HTTP exchange: no JSON-RPC message
    assert [m.get("body") for m in after] in ([], [b""])
    assert [m.get("method") for m in wire.messages] == ["notifications/progress"]


async def test_a_timeout_error_is_the_last_thing_written(otel: Otel) -> None:
    """A timeout writes one error event that ends the stream; the handler's late writes
    after the signal are dropped."""
    seen = Seen()
    app = mcp_app(build_server(seen), otel, response_mode="sse", max_request_duration=0.1)
    wire = wire_for("tools/call", {"name": "talker"}, accept=SSE, progress=True, log_level="debug")
    async with watchdog():
        await wire.run(app)
    assert seen.reason is CancelReason.TIMEOUT
    methods = [m.get("method", "response") for m in wire.messages]
    assert methods == ["notifications/progress", "response"]
    assert wire.messages[-1]["error"]["data"] == {"reason": "timeout"}
    assert wire.ended
    assert sum(1 for m in wire.sent if m["type"] == "http.response.start") == 1


@pytest.mark.parametrize("accept", [JSON, SSE])
async def test_a_disconnect_while_the_final_response_is_sent_is_no_cancel(
    otel: Otel, caplog: pytest.LogCaptureFixture, accept: str
) -> None:
    """The client leaving exactly while the result is being written: the work is done, so
    there is nothing to cancel and nothing to log."""
    caplog.set_level(logging.DEBUG, logger=CANCEL_LOGGER)
    seen = Seen()
    app = mcp_app(build_server(seen), otel)
    wire = wire_for("tools/call", {"name": "quick"}, accept=accept)

    async def leave_mid_write(message: Message) -> None:
        if not message.get("more_body", False):
            wire.disconnect()
            await anyio.wait_all_tasks_blocked()  # the watcher sees it now

    wire.on_body = leave_mid_write
    async with watchdog():
        await wire.run(app)
    assert wire.messages[-1]["result"]["content"][0]["text"] == "done"
    assert cancel_records(caplog, above=logging.NOTSET) == []
    [span] = otel.spans.get_finished_spans()
    assert "mcp_asgi.cancellation.reason" not in attrs(span)


async def test_a_final_response_that_cannot_be_sent_is_too_late(
    otel: Otel, caplog: pytest.LogCaptureFixture
) -> None:
    """The handler finished but the connection broke while sending the result: a cancel
    with outcome `too_late`, recorded once."""
    caplog.set_level(logging.DEBUG, logger=CANCEL_LOGGER)
    seen = Seen()
    app = mcp_app(build_server(seen), otel)
    wire = wire_for("tools/call", {"name": "quick"}, accept=JSON, request_id="late")
    wire.fail_sends = True
    async with watchdog():
        await wire.run(app)
    [span] = otel.spans.get_finished_spans()
    assert attrs(span)["mcp_asgi.cancellation.reason"] == "client_disconnect"
    assert attrs(span)["mcp_asgi.cancellation.outcome"] == "too_late"
    assert [getattr(r, "outcome", None) for r in cancel_records(caplog)] == ["too_late"]


async def test_a_thread_cancelled_before_it_started_is_not_counted(otel: Otel) -> None:
    """A sync tool still waiting for a worker thread when the client leaves: the request
    exits at once, its function never runs, and it is not left counted as running. (The
    only thread of `max_threads=1` is held by another call's `ctx.run_sync`.)"""
    seen = Seen()
    app = mcp_app(build_server(seen), otel, cancel_grace=0.2, process_kill_grace=0.2, max_threads=1)
    holder = wire_for("tools/call", {"name": "offloaded"}, accept=JSON)
    waiting = wire_for("tools/call", {"name": "threaded"}, accept=JSON)
    async with watchdog(), anyio.create_task_group() as tg:
        tg.start_soon(holder.run, app)
        await seen.started.wait()
        tg.start_soon(waiting.run, app)
        await anyio.wait_all_tasks_blocked()
        waiting.disconnect()
        await anyio.wait_all_tasks_blocked()
        holder.disconnect()
        await seen.exited.wait()
    assert not seen.thread_ran.is_set()
    [span] = [s for s in otel.spans.get_finished_spans() if s.name == "tools/call threaded"]
    assert attrs(span)["mcp_asgi.cancellation.outcome"] == "exited"
    assert not app._inflight


async def test_an_outside_anyio_cancel_is_a_server_shutdown(otel: Otel) -> None:
    """Cancelling the task that runs the request (from an enclosing scope): the reply
    ends with the shutdown error, the thread is told, the span is ended."""
    seen = Seen()
    app = mcp_app(build_server(seen), otel, response_mode="sse")
    wire = wire_for("tools/call", {"name": "offloaded"}, accept=SSE)
    async with watchdog(), anyio.create_task_group() as tg:
        tg.start_soon(wire.run, app)
        await seen.started.wait()
        await anyio.wait_all_tasks_blocked()
        tg.cancel_scope.cancel()
    assert seen.token is not None
    assert seen.token.reason is CancelReason.SERVER_SHUTDOWN
    assert seen.reason is CancelReason.SERVER_SHUTDOWN  # seen in the handler's `finally`
    assert wire.messages[-1]["error"]["data"] == {"reason": "server_shutdown"}
    assert wire.ended
    [span] = otel.spans.get_finished_spans()
    assert attrs(span)["mcp_asgi.cancellation.reason"] == "server_shutdown"
    assert not app._inflight


@pytest.mark.parametrize(
    "message",
    [
        pytest.param("Task cancelled, timeout graceful shutdown exceeded", id="uvicorn"),
        pytest.param(None, id="hypercorn-daphne"),
    ],
)
async def test_a_native_task_cancel_is_a_server_shutdown(otel: Otel, message: str | None) -> None:
    """What an ASGI server does at its graceful-shutdown timeout: `task.cancel()` on the
    ASGI task, with a message (uvicorn's) or none (Hypercorn's, Daphne's, like asyncio's
    own for a handler's `asyncio.timeout`). Same outcome: the handler hears the reason in
    its `finally`, the shutdown error is written, the thread told, the span ended, and
    the cancel propagates."""
    seen = Seen()
    app = mcp_app(build_server(seen), otel, response_mode="sse")
    wire = wire_for("tools/call", {"name": "offloaded"}, accept=SSE)
    async with watchdog():
        task = asyncio.get_running_loop().create_task(wire.run(app))
        await seen.started.wait()
        await anyio.wait_all_tasks_blocked()
        task.cancel(message)
        await asyncio.wait([task])
    assert task.cancelled()
    assert seen.token is not None
    assert seen.token.reason is CancelReason.SERVER_SHUTDOWN
    assert seen.reason is CancelReason.SERVER_SHUTDOWN  # seen in the handler's `finally`
    assert wire.messages[-1]["error"]["data"] == {"reason": "server_shutdown"}
    [span] = otel.spans.get_finished_spans()
    assert attrs(span)["mcp_asgi.cancellation.reason"] == "server_shutdown"
    assert not app._inflight


async def test_a_cancellation_the_handler_sends_itself_is_no_shutdown(otel: Otel) -> None:
    """The handler runs in the request's task on asyncio: a cancellation that a scope of
    its own delivers there (its task group ending itself) is not taken for one from
    outside; the call answers."""
    app = mcp_app(build_server(Seen()), otel)
    wire = wire_for("tools/call", {"name": "grouped"}, accept=JSON)
    async with watchdog():
        await wire.run(app)
    assert wire.result["content"][0]["text"] == "grouped"
    [span] = otel.spans.get_finished_spans()
    assert "mcp_asgi.cancellation.reason" not in attrs(span)


async def test_the_phase_follows_the_request() -> None:
    """Running while the handler runs, answering while its reply is written, then ended."""
    wire = wire_for("tools/call", {"name": "x"}, accept=JSON)
    await wire.receive()  # the body was read by the middleware
    phases: list[Phase] = []

    async def send(message: Message) -> None:
        phases.append(scope.phase)
        await wire.send(message)

    scope = request_scope(send)

    async def handler() -> JsonObject:
        phases.append(scope.phase)
        return {"content": []}

    async with watchdog():
        await scope.run(wire.receive, handler)
    assert phases[0] is Phase.RUNNING
    assert set(phases[1:]) == {Phase.ANSWERING}
    assert scope.phase is Phase.ENDED
    assert scope.answered


def test_a_scope_calls_only_the_observer_hooks_a_class_overrides() -> None:
    """What an observer class overrides is worked out once, for the class: the base class
    overrides nothing, and a subclass what it defines (its own subclasses inherit it)."""

    class Ends(ScopeObserver):
        def ended(self, record: object) -> None:
            pass

    class EndsAndSignals(Ends):
        def signalled(self, record: object) -> None:
            pass

    def hooks(observer: type[ScopeObserver]) -> tuple[bool, bool, bool]:
        return observer.activates, observer.observes_signal, observer.observes_end

    assert hooks(ScopeObserver) == (False, False, False)
    assert hooks(Ends) == (False, False, True)
    assert hooks(EndsAndSignals) == (False, True, True)


async def test_an_observer_failing_to_activate_still_counts_the_handler_out() -> None:
    """The observer's `activate()` raising (a broken telemetry bridge) fails the handler's
    run, but the handler is counted out: the request does not stay running."""
    wire = wire_for("tools/call", {"name": "x"}, accept=JSON)
    await wire.receive()

    class Failing(ScopeObserver):
        def activate(self) -> AbstractContextManager[None]:
            raise RuntimeError("broken")

    scope = request_scope(wire.send)
    scope._observer = Failing()

    async def handler() -> JsonObject:
        return {"content": []}

    raised: BaseException | None = None
    try:
        async with watchdog():
            await scope.run(wire.receive, handler)
    except Exception as failed:  # (on plain anyio, in the task group's exception group)
        raised = failed
    assert "RuntimeError('broken')" in repr(raised)
    assert scope.work.running == 0
    assert scope.phase is Phase.ENDED


async def test_a_cancel_after_the_reply_is_ignored_at_debug(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """`cancel()` on a finished request does nothing and logs at DEBUG only."""
    caplog.set_level(logging.DEBUG, logger=CANCEL_LOGGER)
    wire = wire_for("tools/call", {"name": "x"}, accept=JSON)
    await wire.receive()  # the body was read by the middleware
    scope = request_scope(wire.send)

    async def handler() -> JsonObject:
        return {"content": []}

    async with watchdog():
        await scope.run(wire.receive, handler)
    assert scope.cancel(CancelReason.SERVER_SHUTDOWN) is False
    assert scope.reason is None
    assert {r.levelno for r in caplog.records if r.name == CANCEL_LOGGER} == {logging.DEBUG}
    assert not await scope.write({"jsonrpc": "2.0", "method": "late", "params": {}})


async def test_a_cancel_before_the_watcher_starts_is_not_lost() -> None:
    """A signal in the handler's first step, before the request's own task first watches
    (the watcher is made then): the watcher starts stopped, the request ends with that
    reason, and nothing waits for the client."""
    wire = wire_for("tools/call", {"name": "x"}, accept=JSON)
    await wire.receive()  # the body was read by the middleware
    scope = request_scope(wire.send)

    async def handler() -> JsonObject:
        assert scope.cancel(CancelReason.SERVER_SHUTDOWN)  # the first step: nothing awaited yet
        await anyio.sleep_forever()
        return {"content": []}

    async with watchdog():
        await scope.run(wire.receive, handler)
    assert scope.reason is CancelReason.SERVER_SHUTDOWN
    assert scope.phase is Phase.ENDED


async def test_receive_failing_while_the_handler_waits_stops_it_and_is_raised() -> None:
    """`receive()` raising while the handler waits (a server's bug, a broken connection):
    nothing would watch the request any more, so the handler is stopped and the failure
    raised (the middleware answers it as an internal error)."""
    wire = wire_for("tools/call", {"name": "x"}, accept=JSON)
    await wire.receive()  # the body was read by the middleware
    scope = request_scope(wire.send)
    started = anyio.Event()
    stopped: list[bool] = []

    async def receive() -> Message:
        await started.wait()
        raise RuntimeError("the connection broke")

    async def handler() -> JsonObject:
        started.set()
        try:
            await anyio.sleep_forever()
        finally:
            stopped.append(True)
        return {"content": []}

    async with watchdog():
        with pytest.raises(Exception) as raised:  # noqa: PT011 (checked below)
            await scope.run(receive, handler)
    # in the request's task as it is (asyncio); in a task group's group elsewhere (trio,
    # the plain-anyio path): either way the middleware answers an internal error
    failure = raised.value
    failures = getattr(failure, "exceptions", (failure,))
    assert [repr(f) for f in failures] == [repr(RuntimeError("the connection broke"))]
    assert stopped == [True]
    assert scope.phase is Phase.ENDED


def _answering(wire: Wire) -> tuple[Callable[[Message], Awaitable[None]], anyio.Event]:
    """A `send` to `wire`, and the event it sets once the reply is complete."""
    answered = anyio.Event()

    async def send(message: Message) -> None:
        await wire.send(message)
        if message["type"] == "http.response.body" and not message.get("more_body"):
            answered.set()

    return send, answered


@pytest.mark.fast_paths
async def test_receive_failing_after_the_reply_is_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The handler waited, watched from the request's own task (no watcher's task), then
    answered: the `receive()` begun there is finished there, and its failure is logged
    as a warning, never raised into the finished request."""
    caplog.set_level(logging.WARNING, logger="mcp_asgi.errors")
    wire = wire_for("tools/call", {"name": "x"}, accept=JSON)
    await wire.receive()  # the body was read by the middleware
    send, answered = _answering(wire)

    @plain  # an event's wait, as uvicorn's: begun in the request's own task
    async def receive() -> Message:
        await answered.wait()
        raise RuntimeError("the connection broke")

    async def handler() -> JsonObject:
        await anyio.lowlevel.checkpoint()  # it waits: somebody must watch the client
        return {"content": []}

    scope = request_scope(send)
    async with watchdog():
        await scope.run(receive, handler)
    assert scope.watcher_task is None
    assert wire.result == {"content": []}
    [record] = [r for r in caplog.records if r.name == "mcp_asgi.errors"]
    assert record.getMessage() == "receive() failed after the reply"
    assert record.levelno == logging.WARNING


@pytest.mark.fast_paths
async def test_receive_failing_after_the_request_ended_is_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Once something happens while the handler waits (here a message after the body) the
    watcher's own task takes over; that task is not waited for once the request is over,
    and a `receive()` that raises after that is logged as a warning, not left in a task
    whose exception nobody retrieves."""
    caplog.set_level(logging.WARNING, logger="mcp_asgi.errors")
    wire = wire_for("tools/call", {"name": "x"}, accept=JSON)
    await wire.receive()  # the body was read by the middleware
    send, answered = _answering(wire)
    reading_again = anyio.Event()
    calls = 0

    async def receive() -> Message:
        nonlocal calls
        calls += 1
        if calls == 1:
            await anyio.lowlevel.checkpoint()
            return {"type": "http.request", "body": b"", "more_body": False}
        reading_again.set()
        await answered.wait()
        raise RuntimeError("the connection broke")

    async def handler() -> JsonObject:
        await reading_again.wait()  # until the watcher's task reads again
        return {"content": []}

    scope = request_scope(send)
    async with watchdog():
        await scope.run(receive, handler)
        watcher = scope.watcher_task
        assert watcher is not None
        await watcher.join()
    assert watcher.error() is None
    assert wire.result == {"content": []}
    [record] = [r for r in caplog.records if r.name == "mcp_asgi.errors"]
    assert record.getMessage() == "receive() failed after the request ended"
    assert record.levelno == logging.WARNING


async def test_the_cancel_token_is_set_whenever_it_is_first_asked_for() -> None:
    """The token is made when first asked for: one asked for before the signal is set by
    it, one first asked for after it is made set; the same token every time."""
    before = request_scope(wire_for("tools/call", {"name": "x"}, accept=JSON).send)
    token = before.token
    assert not token.cancelled
    assert before.cancel(CancelReason.SERVER_SHUTDOWN)
    assert token.cancelled
    assert token.reason is CancelReason.SERVER_SHUTDOWN
    assert before.token is token

    after = request_scope(wire_for("tools/call", {"name": "x"}, accept=JSON).send)
    assert after.cancel(CancelReason.CLIENT_NOTIFICATION)
    late = after.token
    assert late.cancelled
    assert late.reason is CancelReason.CLIENT_NOTIFICATION
    assert late.wait(0)  # a thread polling it returns at once
    assert after.token is late
