"""`RequestScope`: the one owner of a JSON-RPC request's fate.

Lifecycle (`run`)::

    handler task   handler ──► result/error ──► write(final) ──► stop the watcher
    request task   (on asyncio, once the handler's first step is over without an answer)
                   Watcher.watch(): CLIENT_GONE | DEADLINE | STOPPED
                       └─► the scope decides: cancel (client_disconnect, timeout) or go on
                   after a signal: tell the client ──► grace ──► exited | orphaned
                   cancelled from outside (a server's shutdown) ──► server_shutdown, before
                   the handler hears of it

Only the scope cancels (`cancel`, the first signal wins), ends the request and settles its
outcome. Its helpers report to it and never act on it: the watcher returns why it stopped,
the running work calls back once when it is idle. Observers (telemetry, the cancellation
log) get a frozen `RequestRecord`, never the scope. Its state is private behind read-only
properties, like trio's `CancelScope`.

`write` is the single choke point: after a signal it drops everything, which is where
"nothing more is ever written for a cancelled request" is enforced.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Awaitable, Callable
from typing import Final, TypeVar

import anyio
from starlette.types import Receive

from mcp_asgi._loggers import errors_logger as _errors
from mcp_asgi._loop import Clock, Task, beside, loop_clock, new_cancel_scope, on_asyncio
from mcp_asgi.http.reply import ReplyWriter
from mcp_asgi.lifecycle.cancel import CancelReason, CancelToken, RequestCancelled, signal_token
from mcp_asgi.lifecycle.cancel_log import log_cancelled, log_ignored, log_orphan_exited
from mcp_asgi.lifecycle.lazy_event import LazyEvent
from mcp_asgi.lifecycle.outcome import (
    Outcome,
    RequestRecord,
    ScopeObserver,
    SideEffect,
)
from mcp_asgi.lifecycle.watcher import WatchEnd, Watcher
from mcp_asgi.lifecycle.work import RunningWork, ThreadSlots
from mcp_asgi.protocol import jsonrpc
from mcp_asgi.protocol.jsonrpc import INTERNAL_ERROR, JsonObject, McpError
from mcp_asgi.protocol.request import McpRequest

__all__ = ["Outcome", "RequestRecord", "RequestScope", "ScopeObserver", "SideEffect"]

T = TypeVar("T")
_ERROR_WRITE_TIMEOUT: Final = 1.0  # bound on ending the reply after a signal


class RequestScope:
    """Owns one request from dispatch to the handler's real exit."""

    __slots__ = (
        "__weakref__",
        "_cancel_grace",
        "_cancel_on_disconnect",
        "_clock",
        "_deadline",
        "_ended",
        "_error",
        "_error_sent",
        "_exception",
        "_exited_at",
        "_finishing",
        "_handler_scope",
        "_lock",
        "_observer",
        "_observes_end",
        "_observes_signal",
        "_on_server_end",
        "_outcome",
        "_over",
        "_reason",
        "_replied",
        "_request",
        "_result",
        "_returned",
        "_side_effects",
        "_signalled_at",
        "_started",
        "_timeout",
        "_token",
        "_watcher",
        "_work",
        "_writer",
    )

    def __init__(
        self,
        request: McpRequest,
        writer: ReplyWriter,
        *,
        timeout: float | None,
        cancel_grace: float,
        keepalive_interval: float,
        observer: ScopeObserver,
        cancel_on_disconnect: bool = True,
        on_server_end: Callable[[CancelReason], JsonObject] | None = None,
        clock: Clock | None = None,
        started: float | None = None,
        threads: ThreadSlots | None = None,
    ) -> None:
        """`on_server_end`, when given, makes the final message sent when the server ends
        the request (timeout, shutdown) instead of the JSON-RPC error; a listen stream
        ends with its `subscriptions/listen` result this way. `clock` defaults to the
        running event loop's: deadlines are absolute times on it. `started` (on that clock,
        default now) is when the request arrived: the deadline counts from it. `threads`
        bounds the worker threads of the endpoint's sync handlers."""
        self._request = request
        self._writer = writer
        self._token = CancelToken()
        self._clock = clock or loop_clock()
        self._started = self._clock() if started is None else started
        self._timeout = timeout
        self._deadline = math.inf if timeout is None else self._started + timeout
        self._observer = observer
        self._observes_end = type(observer).ended is not ScopeObserver.ended
        self._observes_signal = type(observer).signalled is not ScopeObserver.signalled
        self._cancel_grace = cancel_grace
        self._cancel_on_disconnect = cancel_on_disconnect
        self._on_server_end = on_server_end
        # what happened
        self._reason: CancelReason | None = None
        self._signalled_at: float | None = None
        self._exited_at: float | None = None
        self._outcome: Outcome | None = None
        self._side_effects: list[SideEffect] = []
        self._error: McpError | None = None
        self._exception: BaseException | None = None
        self._result: JsonObject | None = None
        # how far it got
        self._lock = threading.Lock()  # signals vs. side-effect marks made from threads
        self._replied = False
        self._returned = False  # the handler returned (a result or an error), not cancelled
        self._finishing = False  # the final response is being written
        self._error_sent = False  # a server-side cancel's reply has been written
        self._ended = False
        self._over = LazyEvent()  # run() has returned
        self._work = RunningWork(on_idle=self._work_returned, threads=threads)
        self._handler_scope = new_cancel_scope()
        self._watcher = Watcher(
            deadline=self._deadline,
            keepalive=writer.keepalive if writer.streams else None,
            keepalive_interval=keepalive_interval,
        )

    # -- read-only state ---------------------------------------------------------------

    @property
    def request(self) -> McpRequest:
        """The validated request."""
        return self._request

    @property
    def token(self) -> CancelToken:
        """The token thread code polls; set when the request is cancelled."""
        return self._token

    @property
    def work(self) -> RunningWork:
        """The handler's running work (threads, owned subprocesses)."""
        return self._work

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
        """Why the request was cancelled, or None."""
        return self._reason

    @property
    def answered(self) -> bool:
        """Whether the final response has been, or is being, written."""
        return self._replied or self._finishing

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
            side_effects=tuple(self._side_effects),
            error=replaced if replaced is not None else self._error,
            exception=self._exception,
            result=self._result,
        )

    # -- signals -----------------------------------------------------------------------

    def cancel(self, reason: CancelReason) -> bool:
        """Cancel the request; False (logged at DEBUG) if it was already cancelled or its
        final response has been, or is being, written."""
        with self._lock:
            accepted = self._reason is None and not self.answered
            if accepted:
                self._reason = reason
                self._signalled_at = self._clock()
        if not accepted:
            log_ignored(self._request, reason)
            return False
        if self._returned and not self._work.running:
            self._outcome = "too_late"  # the work was done; only the reply was left
        if reason is CancelReason.CLIENT_DISCONNECT:
            self._writer.abandon()
        signal_token(self._token, reason)
        self._handler_scope.cancel()
        self._watcher.stop()
        if self._observes_signal:  # else no record to make (no SDK)
            self._tell(self._observer.signalled)
        return True

    def mark_side_effect(self, name: str, idempotency_key: str | None) -> SideEffect:
        """Record an irreversible step; raises `RequestCancelled` if the request is already
        cancelled, so a step is never started after the signal. Thread-safe."""
        with self._lock:
            if self._reason is not None:
                raise RequestCancelled(self._reason)
            effect = SideEffect(name, idempotency_key, self._clock())
            self._side_effects.append(effect)
        self._tell(lambda record: self._observer.side_effect(record, effect))
        return effect

    # -- the write choke point ---------------------------------------------------------

    async def write(self, message: JsonObject, *, final: bool = False) -> bool:
        """Write a message for this request; dropped (False) once it is cancelled.

        The check and the start of the send happen with no checkpoint in between, so no
        write starts after a cancel signal.
        """
        if self._reason is not None:
            return False
        if not final:
            ok = await self._writer.notify(message)
        else:
            self._finishing = True  # a disconnect now changes nothing: the work is done
            try:
                status = self._error.http_status if self._error is not None else 200
                ok = await self._writer.finish(message, status)
            finally:
                self._finishing = False
            self._replied = ok
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
        await self._over.wait()

    async def run_sync(self, fn: Callable[[], T]) -> T:
        """Run `fn` in a worker thread. On cancel the request moves on at once: the thread
        is abandoned (told through `token`) and counted as running work until it returns."""
        return await self._work.run_sync(fn)

    # -- lifecycle ---------------------------------------------------------------------

    async def run(self, receive: Receive, call: Callable[[], Awaitable[JsonObject]]) -> None:
        """Run the handler under this scope until it exits (or is orphaned).

        The handler runs in a child task and the watcher in the request's own task, so a
        cancellation from outside (an ASGI server's graceful-shutdown timeout cancelling the
        request's task) lands in the watcher first: it is recorded as `server_shutdown`, the
        handler sees that reason (`ctx.cancel_reason`, its threads' token) before its own
        cancellation arrives, the reply gets its error, the grace period is waited out, and
        the cancellation propagates.
        """
        try:
            if on_asyncio():
                await self._run_on_asyncio(receive, call)
            else:
                async with beside(self._handle, call):
                    await self._watch_from_outside(receive)
        finally:
            self._end()
            self._over.set()

    async def _run_on_asyncio(
        self, receive: Receive, call: Callable[[], Awaitable[JsonObject]]
    ) -> None:
        """The handler's task takes its first step before anything else: a handler that
        answers without waiting for anything is then over, and no watcher is needed (most
        requests). Leaving waits for the handler's task, holding a cancellation until then."""
        handler = Task(self._handle, call)
        try:
            await self._watch_from_outside(receive, first=handler)
        except BaseException:
            if not handler.done() and self._reason is None:
                handler.cancel()  # the watcher failed: nothing would watch the handler
            await handler.join()
            raise
        await handler.join()
        if (error := handler.error()) is not None:
            raise error

    async def _watch_from_outside(self, receive: Receive, first: Task | None = None) -> None:
        """The request's own task: watch (after the handler's first step, if `first`: not
        at all if that answered and nothing cancelled it), and record a cancellation that
        comes from outside as `server_shutdown` before the handler, in its own task, hears
        of it."""
        try:
            # the handler's task was scheduled first: it takes its first step now
            if first is not None and await first.first_step() and self._reason is None:
                return
            await self._watch(receive)
        except anyio.get_cancelled_exc_class():
            # our own cancel scopes swallow their cancellations: this one came from outside
            with anyio.CancelScope(shield=True):
                await self._stopped_from_outside()
            raise

    async def _handle(self, call: Callable[[], Awaitable[JsonObject]]) -> None:
        """The handler's task: call it, write its final reply, then stop the watcher."""
        try:
            try:
                final = await self._call(call)
            finally:
                await self._work.handler_exited()
            if final is not None:
                await self.write(final, final=True)
        finally:
            if self._reason is None:
                self._watcher.stop()

    async def _watch(self, receive: Receive) -> None:
        """The request's own task: act on why the watcher stopped. If it fails, the handler
        is stopped (leaving `beside` cancels it) and `run` raises the failure."""
        end = await self._watcher.watch(receive)
        if end is WatchEnd.CLIENT_GONE:
            if self.answered:
                return  # the reply is complete (ASGI servers then report a disconnect)
            if self._client_gone():
                end = await self._watcher.until_deadline()
        if end is WatchEnd.DEADLINE:
            self.cancel(CancelReason.TIMEOUT)
        if self._reason is not None:
            await self._after_signal(self._reason)

    def _client_gone(self) -> bool:
        """The client went away: cancel, unless this scope outlives disconnects (then only
        stop writing). True if the request goes on."""
        if self._cancel_on_disconnect:
            self.cancel(CancelReason.CLIENT_DISCONNECT)
            return False
        self._writer.abandon()
        return self._reason is None

    async def _after_signal(self, reason: CancelReason) -> None:
        """Tell the client what it must hear, then give the work its grace period."""
        if reason is CancelReason.CLIENT_DISCONNECT:
            pass  # nobody to tell
        elif reason.client_initiated:
            # the client asked but is still connected: end its reply, with no message
            with anyio.CancelScope(shield=True), anyio.move_on_after(_ERROR_WRITE_TIMEOUT):
                await self._writer.close()
        else:
            await self._reply_server_error()
        if self._outcome == "too_late":
            return
        if not await self._work.wait_idle(self._cancel_grace):
            self._end()  # the span ends now; the orphan is counted until the work returns

    async def _stopped_from_outside(self) -> None:
        """The request's task itself is being cancelled (call it shielded): a server
        shutdown, answered as one, with the grace period waited out here."""
        self.cancel(CancelReason.SERVER_SHUTDOWN)
        # also when a lifespan shutdown signalled first: its watcher was cancelled with us
        await self._reply_server_error()
        if self._outcome is None:
            await self._work.wait_idle(self._cancel_grace)

    async def _reply_server_error(self) -> None:
        """End the reply of a server-side cancel with its error (or `on_server_end`'s
        message), once."""
        reason = self._reason
        if reason is None or reason.client_initiated or self._error_sent:
            return
        self._error_sent = True
        if self._on_server_end is not None:
            message = self._on_server_end(reason)
        else:
            self._error = _server_cancel_error(reason, self._timeout)
            message = jsonrpc.error_response(self._request.id, self._error)
        with anyio.CancelScope(shield=True), anyio.move_on_after(_ERROR_WRITE_TIMEOUT):
            await self._writer.finish(message)

    def _end(self) -> None:
        """End the request once: settle the outcome, tell the observer, log the cancel
        (with the request's span current, so a logging bridge puts it in the trace)."""
        if self._ended:
            return
        self._ended = True
        if self._reason is not None and self._outcome is None:
            self._outcome = "orphaned" if self._work.running else "exited"
        if self._reason is None and not self._observes_end:
            return  # nobody to tell: no record to make (the common case without an SDK)
        record = self._tell(self._observer.ended)
        if self._reason is not None:
            with self._observer.activate():
                log_cancelled(record)

    async def _call(self, call: Callable[[], Awaitable[JsonObject]]) -> JsonObject | None:
        request_id = self._request.id
        with self._handler_scope, self._observer.activate():
            try:
                self._result = await call()
                self._returned = True
                return jsonrpc.response(request_id, self._result)
            except McpError as error:
                self._returned = True
                return self._failed(error, None)
            except Exception as exc:
                self._returned = True
                if self._reason is None:
                    _errors.exception(
                        "handler failed",
                        extra={"request_id": request_id, "method": self._request.method},
                    )
                else:
                    _errors.debug("handler raised after cancellation", exc_info=True)
                return self._failed(McpError(INTERNAL_ERROR, "Internal error"), exc)
        return None  # cancelled

    def _failed(self, error: McpError, exc: Exception | None) -> JsonObject:
        if self._reason is None:  # after a signal, the error that counts is the signal's
            # the protocol error's traceback would hold our frame, and so ourselves: a cycle
            self._error, self._exception = error.with_traceback(None), exc
        return jsonrpc.error_response(self._request.id, error)

    def _work_returned(self) -> None:
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
