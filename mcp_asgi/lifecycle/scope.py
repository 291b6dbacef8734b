"""`RequestScope`: one JSON-RPC request's cancel scope, clock, state and write choke point.

Lifecycle (`run`)::

    main task      handler ──► result/error ──► write(final) ─┐
    watcher task   receive() until disconnect, deadline or cancel() ──► signal
                   signal ──► (server reasons) error reply ──► grace ──► exited | orphaned

The first signal wins (`cancel`). After it, `write` drops everything: that is the single
place where "nothing more is ever written for a cancelled request" is enforced.

Its parts live beside it: the watcher task (`_watcher`), the handler's threads and owned
resources (`_work`), the cancellation log record (`_cancel_log`), the observer (`_observer`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Literal, TypeVar

import anyio
from starlette.types import Receive

from mcp_asgi.http.reply import ReplyWriter
from mcp_asgi.lifecycle.beside import beside
from mcp_asgi.lifecycle.cancel import CancelReason, CancelToken, RequestCancelled
from mcp_asgi.lifecycle.cancel_log import log_cancelled, log_ignored, log_orphan_exited
from mcp_asgi.lifecycle.lazy_event import LazyEvent
from mcp_asgi.lifecycle.outcome import ScopeObserver, SideEffect
from mcp_asgi.lifecycle.watcher import Watcher
from mcp_asgi.lifecycle.work import RunningWork
from mcp_asgi.protocol import jsonrpc
from mcp_asgi.protocol.jsonrpc import INTERNAL_ERROR, JsonObject, McpError
from mcp_asgi.protocol.request import McpRequest

__all__ = ["Outcome", "RequestScope", "ScopeObserver", "SideEffect"]

Outcome = Literal["exited", "orphaned", "too_late"]
T = TypeVar("T")
_errors = logging.getLogger("mcp_asgi.errors")


class RequestScope:
    """Owns one request from dispatch to the handler's real exit."""

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
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """`on_server_end`, when given, makes the final message sent when the server ends
        the request (timeout, shutdown) instead of the JSON-RPC error; a listen stream
        ends with its `subscriptions/listen` result this way."""
        self.request = request
        self.writer = writer
        self.token = CancelToken()
        self.clock = clock
        self.started = clock()
        self.timeout = timeout
        self.reason: CancelReason | None = None
        self.signalled_at: float | None = None
        self.exited_at: float | None = None
        self.outcome: Outcome | None = None
        self.side_effects: list[SideEffect] = []
        self.error: McpError | None = None
        self.exception: BaseException | None = None
        self.result: JsonObject | None = None
        self.work = RunningWork(on_idle=self._work_returned)
        self._observer = observer
        self._cancel_on_disconnect = cancel_on_disconnect
        self._lock = threading.Lock()  # signals vs. side-effect marks made from threads
        self._replied = False
        self._finishing = False  # the final response is being written
        self._ended = False
        self._over = LazyEvent()  # run() has returned
        self._handler_scope = anyio.CancelScope()
        self._watcher = Watcher(
            self,
            timeout=timeout,
            keepalive_interval=keepalive_interval,
            cancel_grace=cancel_grace,
            on_server_end=on_server_end,
        )

    # -- signals ---------------------------------------------------------------------

    @property
    def cancelled(self) -> bool:
        """Whether a cancel signal has reached this request."""
        return self.reason is not None

    @property
    def answered(self) -> bool:
        """Whether the final response has been, or is being, written."""
        return self._replied or self._finishing

    def cancel(self, reason: CancelReason) -> bool:
        """Cancel the request; False (logged at DEBUG) if it was already cancelled or its
        final response has been, or is being, written."""
        with self._lock:
            accepted = self.reason is None and not self.answered
            if accepted:
                self.reason = reason
                self.signalled_at = self.clock()
        if not accepted:
            log_ignored(self, reason)
            return False
        if not self.work.running:
            self.outcome = "too_late"
        if reason is CancelReason.CLIENT_DISCONNECT:
            self.writer.abandon()
        self.token._set(reason)
        self._handler_scope.cancel()
        self._watcher.stop()
        self._safely(self._observer.signalled)
        return True

    def client_gone(self) -> bool:
        """The client went away: cancel, unless this scope outlives disconnects (then only
        stop writing). True if the request goes on."""
        if self._cancel_on_disconnect:
            self.cancel(CancelReason.CLIENT_DISCONNECT)
            return False
        self.writer.abandon()
        return self.reason is None

    def mark_side_effect(self, name: str, idempotency_key: str | None) -> SideEffect:
        """Record an irreversible step; raises `RequestCancelled` if the request is already
        cancelled, so a step is never started after the signal. Thread-safe."""
        with self._lock:
            if self.reason is not None:
                raise RequestCancelled(self.reason)
            effect = SideEffect(name, idempotency_key, self.clock())
            self.side_effects.append(effect)
        self._safely(lambda scope: self._observer.side_effect(scope, effect))
        return effect

    @property
    def after_side_effect(self) -> bool:
        """Whether the cancel signal came after an irreversible step was marked."""
        if self.signalled_at is None or not self.side_effects:
            return False
        return self.side_effects[0].at <= self.signalled_at

    # -- the write choke point -------------------------------------------------------

    async def write(self, message: JsonObject, *, final: bool = False) -> bool:
        """Write a message for this request; dropped (False) once it is cancelled.

        The check and the start of the send happen with no checkpoint in between, so no
        write starts after a cancel signal.
        """
        if self.reason is not None:
            return False
        if not final:
            ok = await self.writer.notify(message)
        else:
            self._finishing = True  # a disconnect now changes nothing: the work is done
            try:
                status = self.error.http_status if self.error is not None else 200
                ok = await self.writer.finish(message, status)
            finally:
                self._finishing = False
            self._replied = ok
        if not ok and self.reason is None:
            self.client_gone()
        return ok

    async def wait_exited(self) -> None:
        """Wait until the request is over: its reply ended, and its handler exited or was
        given up as an orphan after the grace period (a thread still running is then only
        counted). An async handler that ignores its cancellation keeps this waiting."""
        await self._over.wait()

    async def run_sync(self, fn: Callable[[], T]) -> T:
        """Run `fn` in a worker thread. On cancel the request moves on at once: the thread
        is abandoned (told through `token`) and counted as running work until it returns."""
        return await self.work.run_sync(fn, self.token)

    # -- lifecycle -------------------------------------------------------------------

    async def run(self, receive: Receive, call: Callable[[], Awaitable[JsonObject]]) -> None:
        """Run the handler under this scope until it exits (or is orphaned).

        A cancellation from outside (e.g. uvicorn's graceful-shutdown timeout cancelling the
        ASGI task) is recorded as `server_shutdown`: the reply gets its error, the handler's
        threads are told, and the cancellation propagates.
        """
        try:
            async with beside(self._watch, receive) as watcher:
                try:
                    final = await self._call(call)
                finally:
                    await self.work.handler_exited()
                if final is not None:
                    await self.write(final, final=True)
                if self.reason is None:
                    watcher.cancel()
        except anyio.get_cancelled_exc_class():
            # our own cancel scopes swallow their cancellations: this one came from outside
            with anyio.CancelScope(shield=True):
                await self._watcher.stopped_from_outside()
            raise
        finally:
            self.end()
            self._over.set()

    def end(self) -> None:
        """End the request once: settle the outcome, tell the observer, log the cancel
        (with the request's span current, so a logging bridge puts it in the trace)."""
        if self._ended:
            return
        self._ended = True
        if self.reason is not None and self.outcome is None:
            self.outcome = "orphaned" if self.work.running else "exited"
        self._safely(self._observer.ended)
        if self.reason is not None:
            with self._observer.activate():
                log_cancelled(self)

    async def _watch(self, receive: Receive) -> None:
        """The watcher task. If it fails, the handler is stopped (nothing would watch it any
        more) and `run` raises the failure."""
        try:
            await self._watcher.watch(receive)
        except Exception:
            self._handler_scope.cancel()
            raise

    async def _call(self, call: Callable[[], Awaitable[JsonObject]]) -> JsonObject | None:
        request_id = self.request.id
        with self._handler_scope, self._observer.activate():
            try:
                self.result = await call()
                return jsonrpc.response(request_id, self.result)
            except McpError as error:
                return self._failed(error, None)
            except Exception as exc:
                if self.reason is None:
                    _errors.exception(
                        "handler failed",
                        extra={"request_id": request_id, "method": self.request.method},
                    )
                else:
                    _errors.debug("handler raised after cancellation", exc_info=True)
                return self._failed(McpError(INTERNAL_ERROR, "Internal error"), exc)
        return None  # cancelled

    def _failed(self, error: McpError, exc: Exception | None) -> JsonObject:
        if self.reason is None:  # after a signal, the error that counts is the signal's
            # the protocol error's traceback would hold our frame, and so ourselves: a cycle
            self.error, self.exception = error.with_traceback(None), exc
        return jsonrpc.error_response(self.request.id, error)

    def _work_returned(self) -> None:
        """The handler and all its threads have returned (on the loop, or in the last
        thread if the loop is gone)."""
        self.exited_at = self.clock()
        if self.outcome == "orphaned":
            self._safely(self._observer.orphan_exited)
            with self._observer.activate():
                log_orphan_exited(self)

    def _safely(self, hook: Callable[[RequestScope], None]) -> None:
        try:
            hook(self)
        except Exception:
            _errors.debug("observer failed", exc_info=True)
