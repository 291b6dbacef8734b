"""`RequestScope`: the one owner of a JSON-RPC request's fate.

Only the scope cancels (`cancel`, the first signal wins), ends the request and settles its
outcome. Its helpers report to it and never act on it: the watcher returns why it stopped,
the running work calls back once when it is idle. Observers (telemetry, the cancellation
log) get a frozen `RequestRecord`, never the scope. Its state is private behind read-only
properties, like trio's `CancelScope`; how far the request has got is one `Phase`.

`write` is the single choke point: after a signal it drops everything, which is where
"nothing more is ever written for a cancelled request" is enforced.

Running the tasks is `lifecycle.runner`'s (`run` hands over to it): on asyncio it calls
`handle` in the request's own task (which starts `watch` in a task of its own once the
handler waits, and hears first what that task is thrown: `thrown`), elsewhere `handle` in
a child task and `watch` in the request's; and `stopped_from_outside` when the request's
task is cancelled from outside, as trio's nursery carries out what its `CancelScope`
decides.
"""

from __future__ import annotations

import asyncio
import contextvars
import enum
import math
import sys
import threading
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Final, TypeVar

import anyio
from starlette.types import Message, Receive

from mcp_asgi._loggers import errors_logger as _errors
from mcp_asgi._loop import (
    Begun,
    Clock,
    Task,
    add_deadline,
    at_once,
    cancel_from_outside,
    cancelling,
    cheap_scope,
    checkpoint,
    discard_deadline,
    drop_redelivery,
    entered_cancelling,
    loop_clock,
    native_task,
    sent_from_within,
)
from mcp_asgi.http.reply import ReplyWriter
from mcp_asgi.lifecycle import runner
from mcp_asgi.lifecycle.armed import ANYWHERE, NOT_PLAIN, ArmedWatch, plainness
from mcp_asgi.lifecycle.cancel import CancelReason, CancelToken, RequestCancelled, signal_token
from mcp_asgi.lifecycle.cancel_log import listens, log_cancelled, log_ignored, log_orphan_exited
from mcp_asgi.lifecycle.lazy_event import LazyEvent
from mcp_asgi.lifecycle.outcome import (
    Outcome,
    RequestRecord,
    ScopeObserver,
    SideEffect,
    signalled_after,
)
from mcp_asgi.lifecycle.unclaimed import Unclaimed, without_message
from mcp_asgi.lifecycle.watcher import Received, WatchEnd, Watcher, quiet_for
from mcp_asgi.lifecycle.work import RunningWork, ThreadSlots
from mcp_asgi.protocol import jsonrpc
from mcp_asgi.protocol.jsonrpc import INTERNAL_ERROR, JsonObject, McpError
from mcp_asgi.protocol.request import McpRequest

__all__ = ["Outcome", "Phase", "RequestRecord", "RequestScope", "ScopeObserver", "SideEffect"]

T = TypeVar("T")
_ERROR_WRITE_TIMEOUT: Final = 1.0  # bound on ending the reply after a signal


class Phase(enum.IntEnum):
    """How far a request has got. It only moves forward, but for a final reply that cannot
    be written (back to RETURNED). Whether it was cancelled is its `reason`, apart."""

    RUNNING = 0
    """The handler runs (or was cancelled before it returned)."""
    RETURNED = 1
    """The handler returned a result or an error; its final reply is not written yet."""
    ANSWERING = 2
    """The final reply is being written: a disconnect now changes nothing."""
    ANSWERED = 3
    """The final reply is written: the handler's, or a server-side cancel's error."""
    ENDED = 4
    """Settled and told to the observer: nothing changes any more."""


# a member looked up on an Enum class costs ~0.4 µs (Python 3.11); a module global, little
_RUNNING, _RETURNED, _ANSWERING, _ANSWERED, _ENDED = Phase
_CLIENT_DISCONNECT, _TIMEOUT = CancelReason.CLIENT_DISCONNECT, CancelReason.TIMEOUT
_CLIENT_GONE, _DEADLINE, _STOPPED = WatchEnd


_OVER = LazyEvent()
_OVER.set()
# signals vs. side-effect marks and the token made from threads: one lock for every request
# (each holds it for a few assignments, never across a wait), not one made per request
_SIGNALS = threading.Lock()


class RequestScope:
    """Owns one request from dispatch to the handler's real exit."""

    __slots__ = (
        "__weakref__",
        "_armed",
        "_cancel_grace",
        "_cancel_on_disconnect",
        "_clock",
        "_deadline",
        "_error",
        "_exception",
        "_exited_at",
        "_graced",
        "_handler_scope",
        "_in_task",
        "_keepalive_interval",
        "_observer",
        "_on_server_end",
        "_outcome",
        "_over",
        "_phase",
        "_reason",
        "_request",
        "_result",
        "_side_effects",
        "_signalled_at",
        "_started",
        "_threads",
        "_timeout",
        "_token",
        "_unclaimed",
        "_unwatched",
        "_watcher",
        "_work",
        "_writer",
        "watcher_task",
    )

    def __init__(
        self,
        request: McpRequest,
        writer: ReplyWriter,
        timeout: float | None,
        cancel_grace: float,
        keepalive_interval: float,
        observer: ScopeObserver,
        cancel_on_disconnect: bool = True,
        on_server_end: Callable[[CancelReason], JsonObject] | None = None,
        clock: Clock | None = None,
        started: float | None = None,
        threads: ThreadSlots | None = None,
        task: asyncio.Task[object] | None = None,
    ) -> None:
        """`on_server_end`, when given, makes the final message sent when the server ends
        the request (timeout, shutdown) instead of the JSON-RPC error; a listen stream
        ends with its `subscriptions/listen` result this way. `clock` defaults to the
        running event loop's: deadlines are absolute times on it. `started` (on that clock,
        default now) is when the request arrived: the deadline counts from it. `threads`
        bounds the worker threads of the endpoint's sync handlers. `task` is the task `run`
        will be called in, where the caller has it (`native_task()`); None: asked when
        needed."""
        self._request = request
        self._writer = writer
        self._token: CancelToken | None = None  # made when asked for (most never are)
        self._clock = clock or loop_clock()
        self._started = self._clock() if started is None else started
        self._timeout = timeout
        self._deadline = math.inf if timeout is None else self._started + timeout
        self._observer = observer
        self._cancel_grace = cancel_grace
        self._cancel_on_disconnect = cancel_on_disconnect
        self._on_server_end = on_server_end
        # what happened
        self._reason: CancelReason | None = None
        self._unclaimed: Unclaimed | None = None  # a message-less cancellation (`thrown`)
        self._signalled_at: float | None = None
        self._exited_at: float | None = None
        self._outcome: Outcome | None = None
        self._side_effects: tuple[SideEffect, ...] = ()  # (a list made per request, else)
        self._error: McpError | None = None
        self._exception: BaseException | None = None
        self._result: JsonObject | None = None
        # how far it got
        self._phase = _RUNNING
        self._over: LazyEvent | None = None  # run() has returned: made by a wait for it
        self._work: RunningWork | None = None  # made when first needed (`_running_work`)
        self._threads = threads
        self._in_task = task is not None  # (a flag: the scope does not keep the task alive)
        self._handler_scope = cheap_scope(task)
        self._keepalive_interval = keepalive_interval
        self._watcher: Watcher | None = None  # made when it first watches (most never do)
        self._unwatched = False  # stopped before the watcher was made
        self.watcher_task: Task | None = None
        """The watcher's own task, once the handler has waited in the request's task (read
        it; only the scope sets it)."""
        self._armed: ArmedWatch | None = None  # watched from the handler's task (asyncio)
        self._graced = False  # the loop's timer holds the grace period (`received`)

    # -- read-only state ---------------------------------------------------------------

    @property
    def request(self) -> McpRequest:
        """The validated request."""
        return self._request

    @property
    def token(self) -> CancelToken:
        """The token thread code polls; set when the request is cancelled (made on the
        first ask, already set if the request is cancelled by then). Thread-safe."""
        token = self._token
        if token is None:
            with _SIGNALS:  # against a signal, and a thread asking at the same time
                token = self._token
                if token is None:
                    token = self._token = CancelToken()
                    if self._reason is not None:
                        signal_token(token, self._reason)
        return token

    @property
    def work(self) -> RunningWork:
        """The handler's running work (threads, owned subprocesses)."""
        return self._running_work()

    def _running_work(self) -> RunningWork:
        """The handler's running work, made when first needed: a thread, a resource owned,
        a wait for the handler to exit. Until then the handler is all of it (most requests
        never need it), running until `work_returned`."""
        work = self._work
        if work is None:
            if self._exited_at is None:  # counting the handler from here
                work = self._work = RunningWork(self, self._threads)
            else:
                work = self._work = RunningWork(None, self._threads, 0)
        return work

    def _work_running(self) -> bool:
        """Whether the handler or a thread of its is still running."""
        work = self._work
        return self._exited_at is None if work is None else work.running > 0

    @property
    def clock(self) -> Clock:
        """The clock the request's times and deadline are read on."""
        return self._clock

    @property
    def cancel_called(self) -> bool:
        """Whether a cancel signal has reached this request."""
        return self._reason is not None

    @property
    def reason(self) -> CancelReason | None:
        """Why the request was cancelled, or None: what the handler is told. A server's
        cancellation with no message counts from when it reaches the handler, as long as
        nothing in the handler has taken it back (`thrown`)."""
        reason = self._reason
        if reason is None and self._told_unrecorded():
            return CancelReason.SERVER_SHUTDOWN
        return reason

    @property
    def phase(self) -> Phase:
        """How far the request has got."""
        return self._phase

    @property
    def answered(self) -> bool:
        """Whether the final response has been, or is being, written (or the request is
        over)."""
        return self._phase >= _ANSWERING

    @property
    def result(self) -> JsonObject | None:
        """The handler's result, once it has returned one."""
        return self._result

    def time_left(self) -> float | None:
        """Seconds until the deadline (0 once past it), or None without one."""
        if self._timeout is None:
            return None
        return max(0.0, self._deadline - self._clock())

    def record(self) -> RequestRecord:
        """A frozen snapshot of the request as it is now."""
        replaced = self._writer.replaced_by
        return RequestRecord(
            request=self._request,
            started=self._started,
            at=self._clock(),
            reason=self._reason,
            signalled_at=self._signalled_at,
            exited_at=self._exited_at,
            outcome=self._outcome,
            side_effects=self._side_effects,
            error=replaced if replaced is not None else self._error,
            exception=self._exception,
            result=self._result,
        )

    # -- signals -----------------------------------------------------------------------

    def cancel(self, reason: CancelReason) -> bool:
        """Cancel the request; False (logged at DEBUG) if it was already cancelled or its
        final response has been, or is being, written."""
        return self._signal(reason, from_watcher=False)

    def _signal(self, reason: CancelReason, *, from_watcher: bool, at: float | None = None) -> bool:
        """`cancel`; `from_watcher`: called by the watcher, whose task runs nothing inside
        the handler's scope (`_loop.cancel_from_outside`), and which needs no stop; `at`:
        when the signal came, if before now (on the request's clock)."""
        with _SIGNALS:
            accepted = self._reason is None and self._phase < _ANSWERING
            if accepted:
                self._reason = reason
                self._signalled_at = self._clock() if at is None else at
            token = self._token  # one made from now on is made set
        if not accepted:
            log_ignored(self._request, reason)
            return False
        if self._phase is _RETURNED and not self._work_running():
            self._outcome = "too_late"  # the work was done; only the reply was left
        if reason is _CLIENT_DISCONNECT:
            self._writer.abandon()
        if token is not None:
            signal_token(token, reason)
        if from_watcher:  # the watcher is not waiting, and will not again: no stop needed
            cancel_from_outside(self._handler_scope)
        else:
            self._handler_scope.cancel()
            self._stop_watching()
        if self._observer.observes_signal:  # else no record to make (no SDK)
            self._tell(self._observer.signalled)
        return True

    def mark_side_effect(self, name: str, idempotency_key: str | None) -> SideEffect:
        """Record an irreversible step; raises `RequestCancelled` if the request is already
        cancelled, so a step is never started after the signal. Thread-safe."""
        with _SIGNALS:
            if self._reason is not None:
                raise RequestCancelled(self._reason)
            effect = SideEffect(name, idempotency_key, self._clock())
            self._side_effects = (*self._side_effects, effect)
        self._tell(lambda record: self._observer.side_effect(record, effect))
        return effect

    # -- the write choke point ---------------------------------------------------------

    async def write(self, message: JsonObject, *, final: bool = False) -> bool:
        """Write a message for this request; dropped (False) once it is cancelled.

        The check and the start of the send happen with no checkpoint in between, so no
        write starts after a cancel signal (nor while the handler is told of one that is
        not recorded yet: `reason`).
        """
        if self._reason is not None or (  # (`_told_unrecorded`'s call only for one)
            self._unclaimed is not None and self._told_unrecorded()
        ):
            return False
        if not final:
            ok = await self._writer.notify(message)
        else:
            self._phase = _ANSWERING  # a disconnect now changes nothing: the work is done
            ok = False
            try:
                status = self._error.http_status if self._error is not None else 200
                ok = await self._writer.finish(message, status)
            finally:
                self._phase = _ANSWERED if ok else _RETURNED
        if not ok and self._reason is None:
            self._client_gone()
        return ok

    async def close_early(self) -> bool:
        """End the HTTP response while the handler goes on, where the reply can be resumed
        later (`ReplyWriter.close_early`); False when it cannot, or once cancelled."""
        if self._reason is not None or self.answered:
            return False
        return await self._writer.close_early()

    async def wait_exited(self) -> None:
        """Wait until the request is over: its reply ended, and its handler exited or was
        given up as an orphan after the grace period (a thread still running is then only
        counted). An async handler that ignores its cancellation keeps this waiting."""
        if self._over is None:
            self._over = LazyEvent()
        await self._over.wait()

    def run_sync(self, fn: Callable[..., T], kwargs: dict[str, Any] | None = None) -> Awaitable[T]:
        """`await scope.run_sync(fn)`: run `fn(**kwargs)` in a worker thread. On cancel the
        request moves on at once: the thread is abandoned (told through `token`) and
        counted as running work until it returns. A plain function returning the
        awaitable: call it only to await it at once."""
        return self._running_work().run_sync(fn, kwargs)

    # -- lifecycle: the runner's steps -------------------------------------------------

    def run(
        self, receive: Receive, call: Callable[..., Awaitable[JsonObject]], *args: Any
    ) -> Coroutine[Any, Any, None]:
        """`await scope.run(receive, call, *args)`: run the handler, `call(*args)`, under
        this scope until it exits (or is orphaned). The arguments are passed on, not put in
        a closure: no function made per request.

        A cancellation from outside (an ASGI server's graceful-shutdown timeout cancelling
        the request's task) is heard by the scope first: it is recorded as
        `server_shutdown`, the handler sees that reason (`ctx.cancel_reason`, its threads'
        token) before its own cancellation arrives, the reply gets its error, the grace
        period is waited out, and the cancellation propagates (`lifecycle.runner`).
        """
        return runner.run(self, receive, call, args, self._in_task)

    async def handle(
        self,
        call: Callable[..., Awaitable[JsonObject]],
        args: tuple[Any, ...],
        receive: Receive | None,
    ) -> bool:
        """The handler: call it (under the handler's cancel scope, with the observer's
        context active), write its final reply, then stop the watcher. True when the
        request was cancelled (`cancel_called`, asked once it is over).

        Its first step is taken at once. With `receive` (asyncio: this is the request's own
        task), a handler that then waits is watched from here until something happens
        (`_watch_from_here`), and what this task is thrown while the handler waits is heard
        here first (`thrown`): a cancellation from outside is recorded before the handler
        sees it. Without (`receive` None), the watcher is already running in another task."""
        try:
            final: JsonObject | None = None  # stays None if cancelled
            # the observer's context current while the handler runs, where there is one to
            # make current (an SDK, a trace context): entered and left by hand, as a `with`
            # of a shared no-op costs two calls on every request
            activation = None
            # `with self._handler_scope:`, written out: a `with` calls `__enter__` through C
            # (Python 3.11), a frame of its own on every request; a method call does not
            handler_scope = self._handler_scope
            try:
                handler_scope.__enter__()
                try:
                    if self._observer.activates:
                        activation = self._observer.activate()
                        activation.__enter__()
                    try:
                        result = at_once(call(*args))
                        if isinstance(result, Begun):
                            if receive is not None:
                                result.tell(self)
                                self._watch_from_here(receive)
                            result = await result
                        final = self._answer(result)
                    except Exception as exc:
                        final = self._raised(exc)
                    finally:
                        if activation is not None:
                            activation.__exit__(None, None, None)
                except BaseException as left:  # the scope swallows a cancellation of its own
                    if not handler_scope.__exit__(type(left), left, left.__traceback__):
                        raise
                else:
                    handler_scope.__exit__(None, None, None)
            finally:
                if self._reason is not None:  # the scope was cancelled, and is left
                    drop_redelivery(handler_scope)
                work = self._work
                if work is None:  # no thread, nothing owned, no wait: the handler was all
                    self.work_returned()
                elif not work.handler_returned():  # (most leave nothing open)
                    await work.handler_exited()
            if self._unclaimed is not None and self._told_unrecorded():
                self._claim()  # the server's, which the handler swallowed
            if final is not None:
                await self.write(final, final=True)
        finally:
            if self._reason is None:
                self._stop_watching()
        return self._reason is not None

    def thrown(self, thrown: BaseException) -> None:
        """The waiting handler, in the request's task, is about to be thrown `thrown`
        (`Begun.tell`): a cancellation that none of ours sent came from outside (the
        server's, or an outer scope's), and is recorded as `server_shutdown` first, so the
        handler sees the reason when it arrives.

        Except one with no message (on Python 3.11+), which asyncio's own tools in the
        handler send too: it is `Unclaimed` (`lifecycle.unclaimed`). While it is pending
        the handler is told so (`reason`) and its writes are dropped; the request is
        cancelled, as of when it came, once it leaves the handler (the runner's
        `stopped_from_outside`), when the handler returns having swallowed it, or when it
        is still pending at the grace period's end (`time_up`). One that came with no
        `cancel()` of this task at all (a task the handler awaits hands its own on) is
        nobody's."""
        if self._reason is not None or not isinstance(thrown, asyncio.CancelledError):
            return
        if without_message(thrown):
            task = native_task()
            if task is not None:
                if cancelling(task) <= entered_cancelling(self._handler_scope):
                    return  # nobody called the task's cancel(): a task awaited handed it on
                if not self._told_unrecorded():  # (the first still pending counts)
                    unclaimed = self._unclaimed = Unclaimed(task, thrown, self._clock())
                    self._graced = True
                    add_deadline(self, unclaimed.since + self._cancel_grace)
                return
        if not sent_from_within(self._handler_scope, thrown):
            self.cancel(CancelReason.SERVER_SHUTDOWN)

    def _told_unrecorded(self) -> bool:
        """Whether the handler is told of a message-less cancellation not recorded yet
        (`thrown`): one still pending."""
        unclaimed = self._unclaimed
        return unclaimed is not None and unclaimed.pending()

    def _claim(self) -> None:
        """The message-less cancellation `thrown` saw was the server's: the request is
        cancelled as `server_shutdown`, as of when it came."""
        unclaimed, self._unclaimed = self._unclaimed, None
        assert unclaimed is not None
        self._signal(CancelReason.SERVER_SHUTDOWN, from_watcher=False, at=unclaimed.since)

    @property
    def watcher_busy(self) -> bool:
        """Whether the watcher, once the handler has returned, still has something to do
        before the request ends: tell the client of a cancel other than its own leaving,
        or wait out the grace period of threads still running. (Stopped with nothing to
        do, it ends on its next step by itself.)"""
        reason = self._reason
        if reason is None:
            return False
        return reason is not _CLIENT_DISCONNECT or self._work_running()

    def _watch_failed(self) -> None:
        """The watcher failed (the runner raises why): nothing would watch the handler any
        more, so it is stopped, with no reason of its own (unless it has one). The watcher
        never runs inside the handler's scope."""
        if self._reason is None and self._phase < _ANSWERING:
            cancel_from_outside(self._handler_scope)

    async def watch(
        self,
        receive: Receive,
        first: Received | None = None,
        since: float | None = None,
    ) -> None:
        """Watch the request, and act on why the watcher stopped (in the request's own
        task, or in one of its own beside the handler; `first` and `since` as
        `Watcher.watch`: a `receive()` begun in the handler's task). If watching fails
        (`receive()` raised), the handler is stopped (with no reason of its own) and the
        failure raised; once the request has ended (a watcher in a task of its own that
        nobody waits for any more) it is logged instead."""
        self._ungrace()  # (in the handler's task, once the handler has left)
        watcher = None
        if first is None and self._unwatched and self._watcher is None:
            end = _STOPPED  # what a watcher made now would say at once (none is made)
        else:
            watcher = self._watching()
            try:
                end = await watcher.watch(receive, first, since)
            except Exception:  # (a cancellation from outside is the runner's to handle)
                if self._phase is _ENDED:  # the request is over: nobody waits for this task
                    _errors.warning(
                        "receive() failed after the request ended",
                        exc_info=True,
                        extra=self._log_fields(),
                    )
                    return
                self._watch_failed()
                raise
        if end is _CLIENT_GONE:
            if self._phase >= _ANSWERING:
                return  # the reply is complete (ASGI servers then report a disconnect)
            if self._client_gone(from_watcher=True):
                assert watcher is not None  # (it said so)
                end = await watcher.until_deadline()
        if end is _DEADLINE:
            self._signal(_TIMEOUT, from_watcher=True)
        reason = self._reason
        if reason is None:
            return
        # after the signal (written out: no coroutine of its own): tell the client what
        # it must hear, then give the work its grace period
        if reason is _CLIENT_DISCONNECT:
            pass  # nobody to tell
        elif reason.client_initiated:
            # the client asked but is still connected: end its reply, with no message
            with anyio.CancelScope(shield=True), anyio.move_on_after(_ERROR_WRITE_TIMEOUT):
                await self._writer.close()
        else:
            await self._reply_server_error()
        if self._outcome == "too_late" or self._phase is _ENDED:  # (ended: orphaned already)
            return
        if self._work_running():  # (`wait_idle`'s first turn, written out: no coroutine)
            await checkpoint()  # a cancelled async handler usually returns as it runs again
            if self._work_running() and not await self._running_work().wait_idle(
                self._grace_left(), turned=True
            ):
                self._end()  # the span ends now; the orphan is counted until the work returns

    def _grace_left(self) -> float:
        """Seconds left of the grace period, which counts from the signal."""
        signalled_at = self._signalled_at
        if signalled_at is None:
            return self._cancel_grace
        return max(0.0, signalled_at + self._cancel_grace - self._clock())

    def _watching(self) -> Watcher:
        """The watcher, made on its first watch (stopped at once if the request was)."""
        watcher = self._watcher
        if watcher is None:
            writer = self._writer
            watcher = self._watcher = Watcher(
                deadline=self._deadline,
                keepalive=writer.keepalive if writer.streams else None,
                keepalive_interval=self._keepalive_interval,
                clock=self._clock,
            )
            if self._unwatched:
                watcher.stop()
        return watcher

    def _stop_watching(self) -> None:
        """Stop the watcher (or the one to come). A watch from the handler's task ends: in
        that task if the request was answered, else in the watcher's task, which tells the
        client. Idempotent."""
        armed = self._armed
        if armed is not None:
            self._armed = None
            if self._reason is not None:
                self._unwatched = True  # the watcher's task starts stopped
                armed.fire()
                return
            try:
                armed.finish()
            except Exception:
                _errors.warning(
                    "receive() failed after the reply",
                    exc_info=True,
                    extra=self._log_fields(),
                )
        elif self._watcher is not None:
            self._watcher.stop()
        else:
            self._unwatched = True

    def _watch_from_here(self, receive: Receive) -> None:
        """The handler waits in this, the request's own task: the client is watched from
        here (`ArmedWatch`) until something happens, then by the watcher's task. By the
        watcher's task from the start where `receive` is not known to be plain
        (`plainness`), waits on anything but an asyncio future or answers at once, or
        the request was signalled in the handler's first step (and on Python 3.10, whose
        tasks cannot be given a context)."""
        since = self._clock()
        how_plain = NOT_PLAIN if self._reason is not None else plainness(receive)
        if how_plain == NOT_PLAIN or sys.version_info < (3, 11):
            self.start_watcher(receive, None, since, None)
            return
        context = contextvars.copy_context()  # the request's, for the watcher's task
        try:
            first: Received = at_once(receive())
        except Exception:  # never the handler's failure: the watcher's task meets it again
            self.start_watcher(receive, None, since, context)
            return
        if isinstance(first, Begun) and isinstance(first.pending, asyncio.Future):
            interval = quiet_for(self._keepalive_interval, self._writer.streams)
            self._armed = ArmedWatch(
                self,
                receive,
                first,
                since=since,
                until=min(self._deadline, since + interval),
                context=context,
                anywhere=how_plain == ANYWHERE,
            )
        else:
            self.start_watcher(receive, first, since, context)

    def start_watcher(
        self,
        receive: Receive,
        first: Received | None,
        since: float,
        context: contextvars.Context | None,
    ) -> None:
        """The watcher's own task, beside the handler waiting in the request's task, going
        on with `first` (a `receive()` begun there) in the request's `context` (None: a
        copy of the current one, the request's own task's)."""
        self._armed = None
        self.watcher_task = runner.watch_beside(self, receive, first, since, context)

    def received(
        self,
        message: Message,
        receive: Receive,
        since: float,
        context: contextvars.Context,
    ) -> None:
        """The `receive()` watched from the handler's task answered `message`, finished on
        the loop where it woke (`ArmedWatch`). The client leaving cancels the request here,
        with no watcher's task: the handler's task waits out the grace period once the
        handler has left (`watch`), and a handler that outlives it is given up by the
        loop's timer (`time_up`). Anything else goes on in the watcher's task."""
        if message["type"] != "http.disconnect" or not self._cancel_on_disconnect:
            self.start_watcher(receive, message, since, context)
            return
        self._unwatched = True  # its receive() is over: nothing is left to watch
        if self._signal(_CLIENT_DISCONNECT, from_watcher=True) and self._work_running():
            self._graced = True
            add_deadline(self, self._clock() + self._cancel_grace)

    def time_up(self) -> None:
        """The grace period is over (`Due`, on the loop) with no watcher's task to see to
        it: since the client left (`received`), or since a message-less cancellation
        reached the handler (`thrown`), which, still pending, was the server's. A handler
        still running ends now as an orphan (the span, the record), counted until its work
        returns."""
        self._graced = False
        try:
            if self._reason is None:
                if not self._told_unrecorded():
                    return  # taken back: the handler's own
                self._claim()
            if self._work_running():
                self._end()
        except Exception:  # (on the loop's one timer: never kept from the other deadlines)
            _errors.warning("ending a request at its grace period failed", exc_info=True)

    def _ungrace(self) -> None:
        """The grace period's timer (`received`) is no longer needed."""
        if self._graced:
            self._graced = False
            discard_deadline(self)

    def _client_gone(self, *, from_watcher: bool = False) -> bool:
        """The client went away: cancel, unless this scope outlives disconnects (then only
        stop writing). True if the request goes on."""
        if self._cancel_on_disconnect:
            self._signal(_CLIENT_DISCONNECT, from_watcher=from_watcher)
            return False
        self._writer.abandon()
        return self._reason is None

    async def stopped_from_outside(self) -> None:
        """The request's task itself is being cancelled (call it shielded): a server
        shutdown, answered as one, with the grace period waited out here."""
        self._ungrace()
        if self._unclaimed is not None and self._reason is None:
            self._claim()  # the message-less cancellation it heard of first: this one
        else:
            self.cancel(CancelReason.SERVER_SHUTDOWN)
        # also when a lifespan shutdown signalled first: its watcher was cancelled with us
        await self._reply_server_error()
        if self._outcome is None and not await self._running_work().wait_idle(self._grace_left()):
            self._end()  # the span ends now; the orphan is counted until the work returns

    async def _reply_server_error(self) -> None:
        """End the reply of a server-side cancel with its error (or `on_server_end`'s
        message), once."""
        reason = self._reason
        if reason is None or reason.client_initiated or self._phase >= _ANSWERED:
            return  # after a signal only this writes a final reply: once
        self._phase = _ANSWERED
        if self._on_server_end is not None:
            message = self._on_server_end(reason)
        else:
            self._error = _server_cancel_error(reason, self._timeout)
            message = jsonrpc.error_response(self._request.id, self._error)
        with anyio.CancelScope(shield=True), anyio.move_on_after(_ERROR_WRITE_TIMEOUT):
            await self._writer.finish(message)

    def finish(self) -> None:
        """`run` is over: end the request (if not yet), and wake `wait_exited`."""
        self._ungrace()
        self._end()
        if self._over is None:
            self._over = _OVER  # nobody waits yet: one set for every request
        else:
            self._over.set()

    def _end(self) -> None:
        """End the request once: settle the outcome, tell the observer, log the cancel
        (with the request's span current, so a logging bridge puts it in the trace)."""
        if self._phase is _ENDED:
            return
        self._phase = _ENDED
        if self._reason is not None and self._outcome is None:
            self._outcome = "orphaned" if self._work_running() else "exited"
        if not self._observer.observes_end and (  # the common case without an SDK
            self._reason is None
            or not listens(signalled_after(self._side_effects, self._signalled_at))
        ):
            return  # nobody to tell: no record to make
        record = self._tell(self._observer.ended)
        if self._reason is not None:
            with self._observer.activate():
                log_cancelled(record)

    def _answer(self, result: JsonObject) -> JsonObject:
        """The handler returned `result`: its reply."""
        self._result = result
        self._returned()
        return jsonrpc.response(self._request.id, result)

    def _raised(self, exc: Exception) -> JsonObject:
        """The handler raised `exc` (in the handler's scope and context): its error reply."""
        self._returned()
        if isinstance(exc, McpError):
            return self._failed(exc, None)
        if self._reason is None:
            _errors.exception(
                "handler failed",
                extra=self._log_fields(),
            )
        else:
            _errors.debug("handler raised after cancellation", exc_info=True)
        return self._failed(McpError(INTERNAL_ERROR, "Internal error"), exc)

    def _log_fields(self) -> dict[str, Any]:
        """The request's fields on a log record of ours."""
        return {"request_id": self._request.id, "method": self._request.method}

    def _returned(self) -> None:
        """The handler returned, not cancelled (after a signal, the phase has moved on)."""
        if self._phase is _RUNNING:
            self._phase = _RETURNED

    def _failed(self, error: McpError, exc: Exception | None) -> JsonObject:
        if self._reason is None:  # after a signal, the error that counts is the signal's
            # the protocol error's traceback would hold our frame, and so ourselves: a cycle
            self._error, self._exception = error.with_traceback(None), exc
        return jsonrpc.error_response(self._request.id, error)

    def work_returned(self) -> None:
        """The handler and all its threads have returned (on the loop, or in the last
        thread if the loop is gone)."""
        self._exited_at = self._clock()
        if self._outcome == "orphaned":
            record = self._tell(self._observer.orphan_exited)
            with self._observer.activate():
                log_orphan_exited(record)

    def _tell(self, hook: Callable[[RequestRecord], None]) -> RequestRecord:
        """Give an observer hook a record of now; its failure is never ours."""
        record = self.record()
        try:
            hook(record)
        except Exception:
            _errors.debug("observer failed", exc_info=True)
        return record


def _server_cancel_error(reason: CancelReason, timeout: float | None) -> McpError:
    if reason is CancelReason.TIMEOUT:
        message = f"Request timed out after {timeout:g} seconds"
    else:
        message = "Request cancelled: the server is shutting down"
    return McpError(INTERNAL_ERROR, message, {"reason": reason.value})
