"""The client watched from the request's own task while its handler waits (asyncio,
`lifecycle/armed.py`): driven through the middleware with a plain `receive` (an event's
wait, as uvicorn's), each way a watch so begun can end: the handler answers (no watcher's
task at all), the client leaves, the deadline passes, a keep-alive is due, the request is
cancelled from outside; and a `receive` not known to be plain keeps a watcher's task.

Every test runs under a watchdog that must not fire: a hang is a failure, not a timeout.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
import threading
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

import anyio
import anyio.lowlevel
import anyio.to_thread
import pytest
from starlette.types import Message

from mcp_asgi import CancelReason, CancelToken, Context, McpServer
from mcp_asgi.lifecycle import runner
from mcp_asgi.lifecycle.armed import (
    ANYWHERE,
    PLAIN,
    begins_plainly,
    plain,
    plain_anywhere,
    plainness,
)
from mcp_asgi.lifecycle.work import RunningWork
from mcp_asgi.protocol.jsonrpc import JsonObject

from ..helpers import (
    CANCEL_LOGGER,
    Otel,
    Wire,
    attrs,
    cancel_records,
    eventually,
    mcp_app,
    request_scope,
    watchdog,
    wire_for,
)

pytestmark = [
    pytest.mark.fast_paths,  # the asyncio path itself (never the plain-anyio one)
    pytest.mark.skipif(
        sys.version_info < (3, 11),
        reason="the watch is armed in the request's task on 3.11+ (tasks with a context)",
    ),
]

JSON = "application/json"
SSE = "text/event-stream"


class Seen:
    def __init__(self) -> None:
        self.started = anyio.Event()
        self.reason: CancelReason | None = None
        self.thread_started = threading.Event()
        self.thread_reason: CancelReason | None = None


def build_server(seen: Seen) -> McpServer:
    server = McpServer("armed")

    @server.tool()
    async def waiter(ctx: Context) -> str:
        """Waits until cancelled; records why."""
        seen.started.set()
        try:
            await anyio.sleep_forever()
        finally:
            seen.reason = ctx.cancel_reason
        return "never"

    @server.tool()
    async def briefly() -> str:
        """Waits one turn, then answers."""
        await anyio.lowlevel.checkpoint()
        return "done"

    @server.tool()
    def threaded(token: CancelToken) -> str:
        """A `def` tool: waits in its worker thread until its request is cancelled."""
        seen.thread_started.set()
        token.wait(30)
        seen.thread_reason = token.reason
        return "stopped"

    return server


async def run_plainly(wire: Wire, app: object, *, anywhere: bool = False) -> None:
    """Drive `app` with `wire`, its `receive` marked plain (it waits on an anyio event, and
    then makes the message: `anywhere` marks it so, as uvicorn's is)."""

    async def receive() -> Message:
        return await wire.receive()

    assert callable(app)
    mark = plain_anywhere if anywhere else plain
    await app(wire.scope, mark(receive), wire.send)


@pytest.fixture
def watchers(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Each watcher's task made (its request scope), as it is made."""
    made: list[object] = []
    real = runner.watch_beside

    def counted(steps: Any, *args: Any) -> Any:
        made.append(steps)
        return real(steps, *args)

    monkeypatch.setattr(runner, "watch_beside", counted)
    return made


PLAINNESS = [pytest.param(False, id="plain"), pytest.param(True, id="anywhere")]


def waits_until_stopped(stopped: list[bool]) -> Callable[[], Awaitable[JsonObject]]:
    """A handler that waits until cancelled, and notes in `stopped` that it was."""

    async def handler() -> JsonObject:
        try:
            await anyio.sleep_forever()
        finally:
            stopped.append(True)
        return {"content": []}

    return handler


def _keepalives(wire: Wire) -> list[Message]:
    return [m for m in wire.bodies if m.get("body", b"").startswith(b":")]


def _tasks_named(fragment: str) -> list[asyncio.Task[object]]:
    return [t for t in asyncio.all_tasks() if fragment in repr(t.get_coro())]


async def test_a_handler_that_waits_then_answers_needs_no_watcher_task() -> None:
    """The common end: the handler waits, the client stays, the handler answers. Nothing
    but the request's own task ran; the `receive()` begun there was finished there."""
    wire = wire_for("tools/call", {"name": "x"}, accept=JSON, leave_when_done=True)
    await wire.receive()  # the body was read by the middleware
    scope = request_scope(wire.send)
    ended: list[Message] = []

    @plain
    async def receive() -> Message:
        message = await wire.receive()
        ended.append(message)
        return message

    async def handler() -> JsonObject:
        await anyio.sleep(0.01)
        assert _tasks_named("RequestScope.watch") == []  # watched without a task
        return {"content": []}

    async with watchdog():
        await scope.run(receive, handler)
    assert scope.watcher_task is None
    assert wire.result == {"content": []}
    assert ended == [{"type": "http.disconnect"}]  # woken by the reply's end, finished here


async def test_a_receive_never_woken_is_given_up_at_the_end() -> None:
    """A server that does not wake a pending `receive()` when the reply ends: the one
    begun in the handler's task is given up there (cancelled, its clean-up run)."""
    wire = wire_for("tools/call", {"name": "x"}, accept=JSON)
    await wire.receive()  # the body was read by the middleware
    scope = request_scope(wire.send)
    never = anyio.Event()
    given_up: list[bool] = []

    @plain
    async def receive() -> Message:
        try:
            await never.wait()
        except asyncio.CancelledError:
            given_up.append(True)
            raise
        return {"type": "http.disconnect"}

    async def handler() -> JsonObject:
        await anyio.lowlevel.checkpoint()
        return {"content": []}

    async with watchdog():
        await scope.run(receive, handler)
    assert scope.watcher_task is None
    assert given_up == [True]


@pytest.mark.parametrize("anywhere", PLAINNESS)
@pytest.mark.parametrize("accept", [JSON, SSE])
async def test_the_client_leaving_cancels_the_waiting_handler(
    otel: Otel, accept: str, anywhere: bool, watchers: list[object]
) -> None:
    """The client leaves while the handler waits: what `receive()` waited for wakes the
    watch, and the handler is cancelled with `client_disconnect`; nothing is written
    after. The watcher's task takes over with that same `receive()`, unless it may be
    finished where it woke (`anywhere`): then no task is made at all."""
    seen = Seen()
    app = mcp_app(build_server(seen), otel)
    wire = wire_for("tools/call", {"name": "waiter"}, accept=accept)
    async with watchdog(), anyio.create_task_group() as tg:
        tg.start_soon(partial(run_plainly, wire, app, anywhere=anywhere))
        await seen.started.wait()
        await anyio.wait_all_tasks_blocked()
        assert watchers == []  # armed: no watcher's task yet
        wire.disconnect()
    assert len(watchers) == (0 if anywhere else 1)
    assert seen.reason is CancelReason.CLIENT_DISCONNECT
    assert wire.disconnected_at is not None
    after = wire.sent[wire.disconnected_at :]  # at most what completes the HTTP exchange
    assert all(m.get("body", b"") == b"" for m in after)
    assert wire.messages == []
    [span] = otel.spans.get_finished_spans()
    assert attrs(span)["mcp_asgi.cancellation.reason"] == "client_disconnect"
    assert not app._inflight


@pytest.mark.parametrize("anywhere", PLAINNESS)
async def test_the_client_leaving_cancels_a_thread(
    otel: Otel, anywhere: bool, watchers: list[object]
) -> None:
    """A `def` tool waits in its thread, the request's task on the thread's future, the
    client watched from that task: its leaving reaches the thread through its token, and
    the request's task waits for the thread's return (within the grace period)."""
    seen = Seen()
    app = mcp_app(build_server(seen), otel)
    wire = wire_for("tools/call", {"name": "threaded"}, accept=JSON)
    async with watchdog(), anyio.create_task_group() as tg:
        tg.start_soon(partial(run_plainly, wire, app, anywhere=anywhere))
        await anyio.to_thread.run_sync(seen.thread_started.wait, 5)
        await anyio.wait_all_tasks_blocked()
        assert watchers == []  # armed: no watcher's task yet
        wire.disconnect()
    assert seen.thread_reason is CancelReason.CLIENT_DISCONNECT  # returned before the end
    assert len(watchers) == (0 if anywhere else 1)
    assert wire.messages == []
    [span] = otel.spans.get_finished_spans()
    assert attrs(span)["mcp_asgi.cancellation.outcome"] == "exited"


@pytest.mark.parametrize("accept", [JSON, SSE])
async def test_a_disconnect_while_the_answer_is_written_is_no_cancel(
    otel: Otel, caplog: pytest.LogCaptureFixture, accept: str
) -> None:
    """The handler waited (armed), then the client leaves exactly while the result is
    written: the work is done, nothing is cancelled, and the `receive()` the server woke
    is finished in the request's task."""
    caplog.set_level(logging.DEBUG, logger=CANCEL_LOGGER)
    app = mcp_app(build_server(Seen()), otel)
    wire = wire_for("tools/call", {"name": "briefly"}, accept=accept)

    async def leave_mid_write(message: Message) -> None:
        if not message.get("more_body", False):
            wire.disconnect()
            await anyio.wait_all_tasks_blocked()

    wire.on_body = leave_mid_write
    async with watchdog():
        await run_plainly(wire, app)
    assert wire.messages[-1]["result"]["content"][0]["text"] == "done"
    assert cancel_records(caplog, above=logging.NOTSET) == []
    [span] = otel.spans.get_finished_spans()
    assert "mcp_asgi.cancellation.reason" not in attrs(span)


async def test_the_deadline_passes_while_the_handler_waits(otel: Otel) -> None:
    """The deadline, on the loop's timer while the watch is armed: the watcher's task
    takes over, the handler is cancelled with `timeout`, the error ends the reply."""
    seen = Seen()
    app = mcp_app(build_server(seen), otel, max_request_duration=0.05)
    wire = wire_for("tools/call", {"name": "waiter"}, accept=JSON)
    async with watchdog():
        await run_plainly(wire, app)
    assert seen.reason is CancelReason.TIMEOUT
    assert wire.messages[-1]["error"]["data"] == {"reason": "timeout"}
    assert not app._inflight


async def test_keepalives_are_written_while_the_handler_waits() -> None:
    """An SSE reply quiet for the keep-alive interval while the watch is armed: the timer
    starts the watcher's task, which writes the keep-alives from then on."""
    seen = Seen()
    app = mcp_app(build_server(seen), response_mode="sse", keepalive_interval=0.02)
    wire = wire_for("tools/call", {"name": "waiter"}, accept=SSE)
    async with watchdog(), anyio.create_task_group() as tg:
        tg.start_soon(run_plainly, wire, app)
        await seen.started.wait()
        await eventually(lambda: len(_keepalives(wire)) >= 2, what="two keep-alives")
        wire.disconnect()
    assert seen.reason is CancelReason.CLIENT_DISCONNECT
    assert wire.content_type == SSE
    assert wire.messages == []  # keep-alives only: no event was written


async def test_a_cancel_from_outside_while_armed_is_a_server_shutdown(otel: Otel) -> None:
    """The request's task cancelled from outside while the watch is armed (an enclosing
    scope, as a server's shutdown): recorded as `server_shutdown` first, the watcher's task
    takes over and the shutdown error ends the reply."""
    seen = Seen()
    app = mcp_app(build_server(seen), otel, response_mode="sse")
    wire = wire_for("tools/call", {"name": "waiter"}, accept=SSE)
    async with watchdog(), anyio.create_task_group() as tg:
        tg.start_soon(run_plainly, wire, app)
        await seen.started.wait()
        await anyio.wait_all_tasks_blocked()
        tg.cancel_scope.cancel()
    assert seen.reason is CancelReason.SERVER_SHUTDOWN
    assert wire.messages[-1]["error"]["data"] == {"reason": "server_shutdown"}
    assert not app._inflight


async def test_a_receive_not_known_to_be_plain_gets_the_watcher_task() -> None:
    """A `receive` nobody marked plain (it may take a cancel scope in its first step, as a
    `BaseHTTPMiddleware` around the app does) is called only in the watcher's own task."""
    seen = Seen()
    app = mcp_app(build_server(seen))
    wire = wire_for("tools/call", {"name": "waiter"}, accept=JSON)
    assert not begins_plainly(wire.receive)
    async with watchdog(), anyio.create_task_group() as tg:
        tg.start_soon(wire.run, app)
        await seen.started.wait()
        await anyio.wait_all_tasks_blocked()
        assert len(_tasks_named("RequestScope.watch")) == 1
        wire.disconnect()
    assert seen.reason is CancelReason.CLIENT_DISCONNECT


async def test_uvicorns_receive_is_known_to_be_plain() -> None:
    """uvicorn's request-response cycles (h11, httptools) only wait on an asyncio event in
    `receive()`: known plain, so served requests are watched from their own task."""
    from uvicorn.protocols.http.h11_impl import RequestResponseCycle as H11Cycle
    from uvicorn.protocols.http.httptools_impl import RequestResponseCycle as HttptoolsCycle

    for cycle in (H11Cycle, HttptoolsCycle):
        server: Any = object.__new__(cycle)  # (its receive is only looked at)
        assert begins_plainly(server.receive)
        assert not begins_plainly(server.send)


async def test_hypercorns_receive_is_known_to_be_plain() -> None:
    """Hypercorn on asyncio hands over its queue's `get` as `receive`: known plain."""
    queue: Any = asyncio.Queue()  # (its methods are only looked at)
    assert begins_plainly(queue.get)
    assert not begins_plainly(queue.put)


async def test_a_receive_failing_at_once_stops_the_waiting_handler_and_is_raised() -> None:
    """A plain `receive()` that raises in its first step, begun in the handler's task: it
    is not taken for the handler's failure; the watcher's task meets it, the handler is
    stopped and the failure raised (the middleware answers it as an internal error)."""
    wire = wire_for("tools/call", {"name": "x"}, accept=JSON)
    await wire.receive()  # the body was read by the middleware
    scope = request_scope(wire.send)
    stopped: list[bool] = []

    @plain
    async def receive() -> Message:
        raise RuntimeError("the connection broke")

    handler = waits_until_stopped(stopped)

    async with watchdog():
        with pytest.raises(RuntimeError, match="the connection broke"):
            await scope.run(receive, handler)
    assert stopped == [True]


async def answered_uncancelled(server: McpServer, tool: str, otel: Otel) -> str:
    """Call `tool` of `server` (its receive `ANYWHERE` plain, as uvicorn's): the text it
    answered, once it is known that nothing cancelled the request."""
    app = mcp_app(server, otel)
    wire = wire_for("tools/call", {"name": tool}, accept=JSON)
    async with watchdog():
        await run_plainly(wire, app, anywhere=True)
    [span] = otel.spans.get_finished_spans()
    assert "mcp_asgi.cancellation.reason" not in attrs(span)
    text: str = wire.result["content"][0]["text"]
    return text


async def test_a_handlers_own_asyncio_timeout_is_no_shutdown(otel: Otel) -> None:
    """A handler that bounds a wait with `asyncio.timeout` and handles its `TimeoutError`
    answers; nothing cancels the request (asyncio cancels the task with no message, as a
    server may: it is not taken for the server's)."""
    server = McpServer("timeouts")

    @server.tool()
    async def bounded() -> str:
        """Waits at most 10 ms for something that never comes."""
        try:
            async with asyncio.timeout(0.01):  # type: ignore[attr-defined,unused-ignore]
                await anyio.sleep_forever()
        except TimeoutError:
            return "timed out by itself"
        return "never"

    assert await answered_uncancelled(server, "bounded", otel) == "timed out by itself"


async def test_a_handlers_own_aborting_task_group_is_no_shutdown(otel: Otel) -> None:
    """An `asyncio.TaskGroup` whose child fails cancels the waiting handler's task (with no
    message) and takes the cancellation back: the handler handles the failure and
    answers."""
    server = McpServer("groups")

    @server.tool()
    async def grouped() -> str:
        """A child fails while the handler waits in the group."""

        async def fails() -> None:
            await asyncio.sleep(0)
            raise ValueError("the child's")

        try:
            async with asyncio.TaskGroup() as group:  # type: ignore[attr-defined,unused-ignore]
                group.create_task(fails())
                await anyio.sleep_forever()
        except Exception as group_failed:  # an ExceptionGroup (no `except*` on 3.10)
            return f"the child failed: {group_failed.exceptions[0]}"  # type: ignore[attr-defined]
        return "never"

    text = await answered_uncancelled(server, "grouped", otel)
    assert text == "the child failed: the child's"


async def leave_once_started(
    tg: anyio.abc.TaskGroup, wire: Wire, app: object, started: anyio.Event, anywhere: bool
) -> None:
    """Drive `app` with `wire` in `tg` (its receive plain, or `anywhere`); once the handler
    has set `started` and every task waits, the client leaves."""
    tg.start_soon(partial(run_plainly, wire, app, anywhere=anywhere))
    await started.wait()
    await anyio.wait_all_tasks_blocked()
    wire.disconnect()


async def cancel_once_waiting(wire: Wire, app: object) -> asyncio.Task[None]:
    """Drive `app` with `wire` in a task of its own and, once the call waits, cancel that
    task with no message, as Hypercorn and Daphne do at shutdown; the task."""
    task = asyncio.get_running_loop().create_task(run_plainly(wire, app))
    await eventually(lambda: bool(_tasks_named("run_plainly")))
    await anyio.wait_all_tasks_blocked()
    task.cancel()
    return task


async def _cancelled_without_a_message(server: McpServer, otel: Otel) -> Wire:
    """Call the tool `stays` of `server` and cancel the request's task with no message
    once it waits (`cancel_once_waiting`); the wire, after."""
    app = mcp_app(server, otel, response_mode="sse")
    wire = wire_for("tools/call", {"name": "stays"}, accept=SSE)
    async with watchdog():
        await asyncio.wait([await cancel_once_waiting(wire, app)])
    return wire


async def test_a_servers_cancel_is_still_heard_after_the_handlers_own_timeout(
    otel: Otel,
) -> None:
    """A server's message-less cancellation, then the handler's own `asyncio.timeout`
    in its cleanup: the timeout's cancellation is taken back, the server's is not; the
    handler hears `server_shutdown` before and after, and the client its error."""
    server = McpServer("cleanups")
    heard: list[CancelReason | None] = []

    @server.tool()
    async def stays(ctx: Context) -> str:
        """Waits; cleans up with a bounded wait of its own."""
        try:
            await anyio.sleep_forever()
        finally:
            heard.append(ctx.cancel_reason)
            with anyio.CancelScope(shield=True):
                try:
                    async with asyncio.timeout(0.01):  # type: ignore[attr-defined,unused-ignore]
                        await asyncio.Event().wait()
                except TimeoutError:
                    heard.append(ctx.cancel_reason)
        return "never"

    wire = await _cancelled_without_a_message(server, otel)
    assert heard == [CancelReason.SERVER_SHUTDOWN] * 2
    assert wire.messages[-1]["error"]["data"] == {"reason": "server_shutdown"}
    [span] = otel.spans.get_finished_spans()
    assert attrs(span)["mcp_asgi.cancellation.reason"] == "server_shutdown"


async def test_a_servers_cancel_the_handler_swallows_still_ends_the_request(
    otel: Otel,
) -> None:
    """A handler that swallows the server's message-less cancellation and returns: the
    request is cancelled as `server_shutdown` all the same; its answer is not written."""
    server = McpServer("swallowers")

    @server.tool()
    async def stays() -> str:
        """Waits; returns when cancelled."""
        try:
            await anyio.sleep_forever()
        except asyncio.CancelledError:
            return "swallowed"
        return "never"

    wire = await _cancelled_without_a_message(server, otel)
    assert wire.messages[-1]["error"]["data"] == {"reason": "server_shutdown"}
    assert all("result" not in m for m in wire.messages)
    [span] = otel.spans.get_finished_spans()
    assert attrs(span)["mcp_asgi.cancellation.reason"] == "server_shutdown"


async def test_a_servers_cancel_is_heard_after_a_subprocess_is_stopped(otel: Otel) -> None:
    """A server's message-less cancellation while the handler runs a subprocess: anyio's
    task group stopping it takes one cancellation back from the request's task that it
    never sent, so the task's count alone would say it was taken back; the handler's
    `finally` hears `server_shutdown` all the same."""
    server = McpServer("processes")
    heard: list[CancelReason | None] = []

    @server.tool()
    async def stays(ctx: Context) -> str:
        """Runs a shell with a background job until cancelled."""
        try:
            await ctx.run_process(["/bin/sh", "-c", "sleep 30 & wait"])
        finally:
            heard.append(ctx.cancel_reason)
        return "never"

    wire = await _cancelled_without_a_message(server, otel)
    assert heard == [CancelReason.SERVER_SHUTDOWN]
    assert wire.messages[-1]["error"]["data"] == {"reason": "server_shutdown"}


# -- a receive() finished where it woke (ANYWHERE) ------------------------------------------


async def test_servers_receives_may_be_finished_anywhere() -> None:
    """uvicorn's cycles and `asyncio.Queue.get` are `ANYWHERE` plain; a function marked
    `plain` only `PLAIN`, one marked `plain_anywhere` `ANYWHERE`."""
    queue: asyncio.Queue[Message] = asyncio.Queue()
    assert plainness(queue.get) == ANYWHERE

    async def receive() -> Message:
        return {"type": "http.disconnect"}

    assert plainness(plain(receive)) == PLAIN
    assert plainness(plain_anywhere(receive)) == ANYWHERE


@pytest.mark.parametrize("anywhere", PLAINNESS)
@pytest.mark.parametrize("accept", [JSON, SSE])
async def test_a_handler_swallowing_the_clients_cancel_is_cancelled_at_its_next_wait(
    otel: Otel, anywhere: bool, accept: str
) -> None:
    """The client leaves; the handler catches its cancellation and waits again, twice: it
    is cancelled again at each wait (anyio's rule, kept by the handler scope's own
    re-delivery) and exits well within the grace period, not as an orphan."""
    server = McpServer("swallowers")
    started = anyio.Event()
    caught: list[CancelReason | None] = []

    @server.tool()
    async def stays(ctx: Context) -> str:
        """Swallows two cancellations, then lets the third through."""
        started.set()
        for _ in range(2):
            try:
                await anyio.sleep(30)
            except asyncio.CancelledError:
                caught.append(ctx.cancel_reason)
        await anyio.sleep(30)
        return "never"

    app = mcp_app(server, otel, cancel_grace=30)
    wire = wire_for("tools/call", {"name": "stays"}, accept=accept)
    async with watchdog(), anyio.create_task_group() as tg:
        await leave_once_started(tg, wire, app, started, anywhere)
    assert caught == [CancelReason.CLIENT_DISCONNECT] * 2
    assert wire.messages == []
    [span] = otel.spans.get_finished_spans()
    assert attrs(span)["mcp_asgi.cancellation.outcome"] == "exited"
    assert not app._inflight


async def test_a_handler_that_outlives_its_grace_is_given_up_by_the_timer(
    otel: Otel, watchers: list[object]
) -> None:
    """The client leaves; the handler holds its cancellation back (a shield) past the
    grace period. With no watcher's task, the loop's timer ends the request as an orphan
    at the grace period's end (its span, while the handler still runs); the request's
    task returns once the handler does."""
    server = McpServer("stubborn")
    started, release = anyio.Event(), anyio.Event()
    exited: list[bool] = []

    @server.tool()
    async def stubborn() -> str:
        """Shields itself until released."""
        with anyio.CancelScope(shield=True):
            started.set()
            await release.wait()
        exited.append(True)
        return "late"

    app = mcp_app(server, otel, cancel_grace=0.05, process_kill_grace=0.01)
    wire = wire_for("tools/call", {"name": "stubborn"}, accept=JSON)
    async with watchdog(), anyio.create_task_group() as tg:
        await leave_once_started(tg, wire, app, started, anywhere=True)
        await eventually(lambda: bool(otel.spans.get_finished_spans()), what="the span's end")
        [span] = otel.spans.get_finished_spans()
        assert attrs(span)["mcp_asgi.cancellation.outcome"] == "orphaned"
        assert exited == []  # the handler still runs
        assert app._inflight
        release.set()
    assert exited == [True]
    assert watchers == []
    assert wire.messages == []
    assert not app._inflight


async def test_a_message_other_than_a_disconnect_goes_on_in_the_watchers_task(
    watchers: list[object],
) -> None:
    """The armed `receive()` answers something else (more of a body nobody reads): the
    watcher's task takes over, reading on until the client leaves, which cancels."""
    wire = wire_for("tools/call", {"name": "x"}, accept=JSON)
    await wire.receive()  # the body was read by the middleware
    scope = request_scope(wire.send)
    more = anyio.Event()
    reasons: list[CancelReason | None] = []

    async def receive() -> Message:
        if not more.is_set():
            await more.wait()
            return {"type": "http.request", "body": b"late", "more_body": False}
        return await wire.receive()

    async def handler() -> JsonObject:
        try:
            await anyio.sleep_forever()
        finally:
            reasons.append(scope.reason)
        return {"content": []}

    async with watchdog(), anyio.create_task_group() as tg:
        tg.start_soon(scope.run, plain_anywhere(receive), handler)
        await anyio.wait_all_tasks_blocked()
        more.set()
        await eventually(lambda: len(watchers) == 1, what="the watcher's task")
        assert reasons == []  # not cancelled by it
        wire.disconnect()
    assert reasons == [CancelReason.CLIENT_DISCONNECT]


async def test_a_receive_failing_where_it_woke_stops_the_handler_and_is_raised(
    watchers: list[object],
) -> None:
    """An `ANYWHERE` receive that raises once woken, finished on the loop: its failure is
    raised in the watcher's task, as if it had failed there; the handler is stopped and
    the failure raised."""
    wire = wire_for("tools/call", {"name": "x"}, accept=JSON)
    await wire.receive()  # the body was read by the middleware
    scope = request_scope(wire.send)
    stopped: list[bool] = []

    handler = waits_until_stopped(stopped)

    async def break_it() -> None:
        await anyio.wait_all_tasks_blocked()
        wire.fail_receive()

    async def receive() -> Message:
        return await wire.receive()

    async with watchdog():
        breaker = asyncio.get_running_loop().create_task(break_it())
        with pytest.raises(OSError, match="receive failed"):
            await scope.run(plain_anywhere(receive), handler)
        await breaker
    assert stopped == [True]
    assert len(watchers) == 1


async def test_a_burst_of_cancels_stops_every_handler_before_any_request_is_settled(
    otel: Otel,
) -> None:
    """Many clients leave on the same turn of the loop: each handler stops, then its
    request's task lets the others' stop before settling its own (the span, the reply's
    end), so the last handler stops no later than its own cancel's work allows."""
    server = McpServer("burst")
    events: list[tuple[str, int]] = []
    waiting = 0

    @server.tool()
    async def waits(key: int) -> str:
        """Waits until cancelled."""
        nonlocal waiting
        waiting += 1
        try:
            await anyio.sleep_forever()
        finally:
            events.append(("stopped", key))
        return "never"

    app = mcp_app(server, otel)
    wires = [wire_for("tools/call", {"name": "waits", "arguments": {"key": k}}) for k in range(8)]

    def settled(key: int, wire: Wire) -> Any:
        async def send(message: Message) -> None:
            if wire.disconnected_at is not None:
                events.append(("settled", key))
            await Wire.send(wire, message)

        return send

    for key, wire in enumerate(wires):
        wire.send = settled(key, wire)  # type: ignore[method-assign]
    async with watchdog(), anyio.create_task_group() as tg:
        for wire in wires:
            tg.start_soon(partial(run_plainly, wire, app, anywhere=True))
        await eventually(lambda: waiting == len(wires), what="every call waiting")
        await anyio.wait_all_tasks_blocked()
        for wire in wires:
            wire.disconnect()
    kinds = [kind for kind, _ in events]
    assert kinds.count("stopped") == len(wires)
    assert "settled" in kinds
    assert kinds.index("settled") > max(i for i, k in enumerate(kinds) if k == "stopped")


# -- a message-less cancellation that is not the server's, or that the handler swallows ----


async def test_awaiting_a_task_the_handler_cancelled_is_no_shutdown(otel: Otel) -> None:
    """The handler cancels a task of its own and awaits it: the task's cancellation comes
    through with no message, but nobody cancelled the request's task; the call answers,
    and the handler was never told it was cancelled (also after an earlier timeout of its
    own, taken back)."""
    server = McpServer("children")
    seen: list[tuple[bool, CancelReason | None]] = []

    @server.tool()
    async def tidy(ctx: Context) -> str:
        """Times out once by itself, then cancels and awaits a child task."""
        try:
            async with asyncio.timeout(0.01):  # type: ignore[attr-defined,unused-ignore]
                await asyncio.Event().wait()
        except TimeoutError:
            pass
        child = asyncio.get_running_loop().create_task(asyncio.sleep(30))
        await asyncio.sleep(0)
        child.cancel()
        try:
            await child
        except asyncio.CancelledError:
            seen.append((ctx.cancelled, ctx.cancel_reason))
        return "tidy"

    assert await answered_uncancelled(server, "tidy", otel) == "tidy"
    assert seen == [(False, None)]


async def test_a_handler_swallowing_a_servers_cancel_is_told_and_writes_nothing(
    otel: Otel,
) -> None:
    """A server's message-less cancellation (Hypercorn's, Daphne's) that the handler
    catches and goes on from: it is told `server_shutdown`, and what it writes from then
    on is dropped, as after any cancel."""
    server = McpServer("swallowers")
    told: list[tuple[bool, CancelReason | None]] = []

    @server.tool()
    async def stays(ctx: Context) -> str:
        """Swallows its cancellation, then logs."""
        try:
            await anyio.sleep_forever()
        except asyncio.CancelledError:
            told.append((ctx.cancelled, ctx.cancel_reason))
        await ctx.log("info", "after the cancel")
        return "swallowed"

    app = mcp_app(server, otel, response_mode="sse")
    wire = wire_for("tools/call", {"name": "stays"}, accept=SSE, log_level="debug")
    async with watchdog():
        await asyncio.wait([await cancel_once_waiting(wire, app)])
    assert told == [(True, CancelReason.SERVER_SHUTDOWN)]
    assert [m for m in wire.messages if m.get("method") == "notifications/message"] == []
    assert wire.messages[-1]["error"]["data"] == {"reason": "server_shutdown"}


async def test_a_handler_that_keeps_swallowing_a_servers_cancel_is_orphaned(
    otel: Otel,
) -> None:
    """The handler swallows every cancellation and carries on: once the grace period
    from the server's message-less cancellation is over, the request ends as an orphan
    (its span), while the handler still runs."""
    server = McpServer("stubborn")
    release = anyio.Event()
    returned: list[bool] = []

    @server.tool()
    async def stays() -> str:
        """Swallows cancellations until released."""
        while not release.is_set():
            with contextlib.suppress(asyncio.CancelledError):
                await anyio.sleep(0.005)
        returned.append(True)
        return "at last"

    app = mcp_app(server, otel, response_mode="sse", cancel_grace=0.05, process_kill_grace=0.01)
    wire = wire_for("tools/call", {"name": "stays"}, accept=SSE)
    async with watchdog():
        task = await cancel_once_waiting(wire, app)
        await eventually(lambda: bool(otel.spans.get_finished_spans()), what="the span's end")
        assert returned == []
        release.set()
        await asyncio.wait([task])
    [span] = otel.spans.get_finished_spans()
    assert attrs(span)["mcp_asgi.cancellation.reason"] == "server_shutdown"
    assert attrs(span)["mcp_asgi.cancellation.outcome"] == "orphaned"


@pytest.fixture
def grace_waits(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The grace each wait for a request's work to return was given, as it is given."""
    waits: list[float] = []
    real = RunningWork.wait_idle

    async def recorded(work: RunningWork, grace: float, **how: Any) -> bool:
        waits.append(grace)
        return await real(work, grace, **how)

    monkeypatch.setattr(RunningWork, "wait_idle", recorded)
    return waits


@pytest.mark.parametrize("cleanup", [0.1, 0.4], ids=["within-grace", "past-grace"])
@pytest.mark.parametrize("anywhere", PLAINNESS)
async def test_the_grace_period_counts_from_the_signal(
    otel: Otel, anywhere: bool, cleanup: float, grace_waits: list[float]
) -> None:
    """The client leaves; the handler takes a while to exit (a shielded clean-up) while
    its thread runs on (grace 0.3 s): what is left of the grace period is waited for the
    thread, never a new one; and a request the loop's timer already ended as an orphan
    (a clean-up past the grace, no watcher's task) waits for nothing more."""
    server = McpServer("graces")
    started, release = threading.Event(), threading.Event()

    def blocking() -> str:
        started.set()
        release.wait(10)  # ignores its token
        return "late"

    @server.tool()
    async def slow(ctx: Context) -> str:
        """A thread that outlives the grace; a clean-up of `cleanup` seconds."""
        try:
            return await ctx.run_sync(blocking)
        except BaseException:
            with anyio.CancelScope(shield=True):
                await anyio.sleep(cleanup)
            raise

    app = mcp_app(server, otel, cancel_grace=0.3, process_kill_grace=0.01)
    wire = wire_for("tools/call", {"name": "slow"}, accept=JSON)
    try:
        async with watchdog(), anyio.create_task_group() as tg:
            tg.start_soon(partial(run_plainly, wire, app, anywhere=anywhere))
            await anyio.to_thread.run_sync(started.wait, 5)
            await anyio.wait_all_tasks_blocked()
            wire.disconnect()
    finally:
        release.set()  # the thread returns only once the request is over
    [span] = otel.spans.get_finished_spans()
    assert attrs(span)["mcp_asgi.cancellation.outcome"] == "orphaned"
    if anywhere and cleanup > 0.3:
        assert grace_waits == []  # ended by the timer before the handler left
    else:
        assert grace_waits
        assert all(grace < 0.3 for grace in grace_waits)


@pytest.mark.parametrize("accept", [JSON, SSE])
async def test_the_client_leaving_stops_a_subprocess_with_no_task(
    otel: Otel, accept: str, watchers: list[object]
) -> None:
    """The handler waits on a subprocess; the client leaves, seen where the `receive()`
    woke (`anywhere`): the handler is told `client_disconnect`, its process group is
    stopped before the request ends, and no watcher's task was made."""
    server = McpServer("processes")
    heard: list[CancelReason | None] = []
    spawned = anyio.Event()

    @server.tool()
    async def sleeper(ctx: Context) -> str:
        """Runs a shell that sleeps until its group is stopped."""
        spawned.set()
        try:
            await ctx.run_process(["/bin/sh", "-c", "sleep 30 & wait"])
        finally:
            heard.append(ctx.cancel_reason)
        return "never"

    app = mcp_app(server, otel)
    wire = wire_for("tools/call", {"name": "sleeper"}, accept=accept)
    async with watchdog(), anyio.create_task_group() as tg:
        await leave_once_started(tg, wire, app, spawned, anywhere=True)
    assert heard == [CancelReason.CLIENT_DISCONNECT]
    assert watchers == []
    assert wire.messages == []
    [span] = otel.spans.get_finished_spans()
    assert attrs(span)["mcp_asgi.cancellation.reason"] == "client_disconnect"
    assert attrs(span)["mcp_asgi.cancellation.outcome"] == "exited"
