"""`RequestScope`: one JSON-RPC request's cancel scope, clock, state and write choke point.

Lifecycle (`run`)::

    main task      handler ──► result/error ──► write(final) ─┐
    watcher task   receive() until disconnect, deadline or cancel() ──► signal
                   signal ──► (server reasons) error reply ──► grace ──► exited | orphaned

The first signal wins. After it, `write` drops everything: that is the single place where
"nothing more is ever written for a cancelled request" is enforced.

"Running work" is the handler itself plus every worker thread it started (`run_sync`). An
abandoned thread keeps counting until it really returns; if it is still running when the
grace period ends, the request is an orphan until then.
"""

from __future__ import annotations

import contextlib
import logging
import math
import threading
import time
from collections.abc import Awaitable, Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Final, Literal, Protocol, TypeVar

import anyio
import anyio.lowlevel

from . import jsonrpc
from ._asgi import Receive
from ._reply import ReplyWriter
from ._validate import McpRequest
from .cancel import CancelReason, CancelToken, RequestCancelled
from .jsonrpc import INTERNAL_ERROR, JsonObject, McpError

Outcome = Literal["exited", "orphaned", "too_late"]
T = TypeVar("T")
logger = logging.getLogger("mcp_asgi.cancellation")
_errors = logging.getLogger("mcp_asgi.errors")
_NEVER: Final = math.inf
_ERROR_WRITE_TIMEOUT: Final = 1.0  # bound on writing the timeout/shutdown error reply


@dataclass(frozen=True, slots=True)
class SideEffect:
    """An irreversible step a handler declared with `ctx.side_effect(...)`."""

    name: str
    idempotency_key: str | None
    at: float


class Closable(Protocol):
    """Something a request owns that must not outlive its handler (e.g. a subprocess)."""

    async def aclose(self) -> None: ...


class ScopeObserver:
    """Receives a request scope's lifecycle events (telemetry implements it). No-op base.

    `side_effect` may be called from a worker thread; the others run on the event loop.
    `ended` is called exactly once; `orphan_exited` follows it when the outcome was
    `orphaned` and the work finally returned.
    """

    def activate(self) -> AbstractContextManager[None]:
        """A context the handler runs in (e.g. its span made current)."""
        return contextlib.nullcontext()

    def signalled(self, scope: RequestScope) -> None:
        """A cancel signal reached the scope."""

    def side_effect(self, scope: RequestScope, effect: SideEffect) -> None:
        """The handler marked an irreversible step."""

    def ended(self, scope: RequestScope) -> None:
        """The request is over: handler exited (or was declared an orphan)."""

    def orphan_exited(self, scope: RequestScope) -> None:
        """An orphaned handler finally exited."""


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
        self._grace = cancel_grace
        self._keepalive = keepalive_interval if writer.streams else 0.0
        self._observer = observer
        self._cancel_on_disconnect = cancel_on_disconnect
        self._on_server_end = on_server_end
        self._lock = threading.Lock()  # signals vs. side-effect marks made from threads
        self._replied = False
        self._finishing = False  # the final response is being written
        self._ended = False
        self._error_sent = False
        self._running = 1  # the handler itself, plus worker threads still running
        self._idle = anyio.Event()  # no running work left
        self._over = anyio.Event()  # run() has returned
        self._owned: set[Closable] = set()
        deadline = _NEVER if timeout is None else anyio.current_time() + timeout
        self._handler_scope = anyio.CancelScope()
        self._watch_scope = anyio.CancelScope(deadline=deadline)

    # -- signals ---------------------------------------------------------------------

    @property
    def cancelled(self) -> bool:
        """Whether a cancel signal has reached this request."""
        return self.reason is not None

    def cancel(self, reason: CancelReason) -> bool:
        """Cancel the request; False (logged at DEBUG) if it was already cancelled or its
        final response has been, or is being, written."""
        with self._lock:
            accepted = self.reason is None and not self._replied and not self._finishing
            if accepted:
                self.reason = reason
                self.signalled_at = self.clock()
        if not accepted:
            logger.debug(
                "cancel ignored: request already cancelled or answered",
                extra={"request_id": self.request.id, "reason": reason.value},
            )
            return False
        if self._running == 0:
            self.outcome = "too_late"
        if reason is CancelReason.CLIENT_DISCONNECT:
            self.writer.abandon()
        self.token._set(reason)
        self._handler_scope.cancel()
        self._watch_scope.cancel()
        self._safely(self._observer.signalled)
        return True

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
            self._client_gone()
        return ok

    async def wait_exited(self) -> None:
        """Wait until the request is over: its reply ended, and its handler exited or was
        given up as an orphan after the grace period (a thread still running is then only
        counted). An async handler that ignores its cancellation keeps this waiting."""
        await self._over.wait()

    # -- work the handler starts -----------------------------------------------------

    async def run_sync(self, fn: Callable[[], T]) -> T:
        """Run `fn` in a worker thread. On cancel the request moves on at once: the thread
        is abandoned (told through `token`) and counted as running work until it returns."""
        loop = anyio.lowlevel.current_token()
        job = _ThreadJob()

        def work() -> T:
            if not job.begin():
                raise RequestCancelled(self.reason or CancelReason.SERVER_SHUTDOWN)
            try:
                return fn()
            finally:
                if job.end():  # abandoned while running: tell the loop it has returned
                    try:
                        loop.backend_class.run_sync_soon(self._work_done, (), loop.native_token)
                    except RuntimeError:  # the event loop is gone
                        self._work_done(on_loop=False)

        self._running += 1
        try:
            result = await anyio.to_thread.run_sync(work, abandon_on_cancel=True)
        except BaseException:
            if not job.abandon():
                self._work_done()
            raise
        self._work_done()
        return result

    def own(self, resource: Closable) -> None:
        """Close `resource` when the handler exits, if the handler has not closed it."""
        self._owned.add(resource)

    def disown(self, resource: Closable) -> None:
        """The handler closed `resource` itself."""
        self._owned.discard(resource)

    # -- lifecycle -------------------------------------------------------------------

    async def run(self, receive: Receive, call: Callable[[], Awaitable[JsonObject]]) -> None:
        """Run the handler under this scope until it exits (or is orphaned).

        A cancellation from outside (e.g. uvicorn's graceful-shutdown timeout cancelling the
        ASGI task) is recorded as `server_shutdown`: the reply gets its error, the handler's
        threads are told, and the cancellation propagates.
        """
        try:
            async with anyio.create_task_group() as watchers:
                watchers.start_soon(self._watch, receive)
                try:
                    final = await self._call(call)
                finally:
                    try:
                        await self._close_owned()
                    finally:
                        self._work_done()
                if final is not None:
                    await self.write(final, final=True)
                if self.reason is None:
                    watchers.cancel_scope.cancel()
        except anyio.get_cancelled_exc_class():
            # our own cancel scopes swallow their cancellations: this one came from outside
            with anyio.CancelScope(shield=True):
                await self._stopped_from_outside()
            raise
        finally:
            self._end()
            self._over.set()

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
            self.error, self.exception = error, exc
        return jsonrpc.error_response(self.request.id, error)

    async def _close_owned(self) -> None:
        while self._owned:
            resource = self._owned.pop()
            with anyio.CancelScope(shield=True):
                try:
                    await resource.aclose()
                except Exception:
                    _errors.warning("closing a request's resource failed", exc_info=True)

    def _work_done(self, *, on_loop: bool = True) -> None:
        self._running -= 1
        if self._running:
            return
        self.exited_at = self.clock()
        if on_loop:
            self._idle.set()
        if self.outcome == "orphaned":
            self._safely(self._observer.orphan_exited)
            logger.debug("orphaned handler exited", extra=self._log_fields())

    async def _watch(self, receive: Receive) -> None:
        with self._watch_scope:
            await self._watch_receive(receive)
        if self.reason is None and self._watch_scope.cancelled_caught:
            self.cancel(CancelReason.TIMEOUT)
        if self.reason is not None:
            await self._after_signal()

    async def _watch_receive(self, receive: Receive) -> None:
        while True:
            if self._keepalive:
                with anyio.move_on_after(self._keepalive):
                    message = await receive()
                    if message["type"] == "http.disconnect":
                        break
                    continue
                if not await self.writer.keepalive():
                    break
            else:
                message = await receive()
                if message["type"] == "http.disconnect":
                    break
        if self._replied or self._finishing:
            return  # the reply is complete (ASGI servers then report a disconnect)
        if self._client_gone():
            await anyio.sleep_forever()  # the handler goes on: keep watching the deadline

    def _client_gone(self) -> bool:
        """The client went away: cancel, unless this scope outlives disconnects (then only
        stop writing). True if the request goes on."""
        if self._cancel_on_disconnect:
            self.cancel(CancelReason.CLIENT_DISCONNECT)
            return False
        self.writer.abandon()
        return self.reason is None and not self._replied

    async def _after_signal(self) -> None:
        if self.reason is CancelReason.CLIENT_DISCONNECT:
            pass  # nobody to tell
        elif self.reason is not None and self.reason.client_initiated:
            # the client asked but is still connected: end its reply, with no message
            with anyio.CancelScope(shield=True), anyio.move_on_after(_ERROR_WRITE_TIMEOUT):
                await self.writer.close()
        else:
            await self._reply_server_error()
        if self.outcome == "too_late":
            return
        with anyio.move_on_after(self._grace):
            await self._idle.wait()
        if self._running:
            self._end()  # the span ends now; the orphan is counted until the work returns

    async def _reply_server_error(self) -> None:
        reason = self.reason
        if reason is None or reason.client_initiated or self._error_sent:
            return
        self._error_sent = True
        if self._on_server_end is not None:
            message = self._on_server_end(reason)
        else:
            self.error = _server_cancel_error(reason, self.timeout)
            message = jsonrpc.error_response(self.request.id, self.error)
        with anyio.CancelScope(shield=True), anyio.move_on_after(_ERROR_WRITE_TIMEOUT):
            await self.writer.finish(message)

    async def _stopped_from_outside(self) -> None:
        self.cancel(CancelReason.SERVER_SHUTDOWN)
        # also when a lifespan shutdown signalled first: its watcher was cancelled with us
        await self._reply_server_error()
        if self.outcome is None and self._running:
            with anyio.move_on_after(self._grace):
                await self._idle.wait()

    def _end(self) -> None:
        """End the request once: settle the outcome, tell the observer, log the cancel."""
        if self._ended:
            return
        self._ended = True
        if self.reason is not None and self.outcome is None:
            self.outcome = "orphaned" if self._running else "exited"
        self._safely(self._observer.ended)
        self._log_cancellation()

    # -- reporting -------------------------------------------------------------------

    def _log_fields(self) -> dict[str, Any]:
        request = self.request
        effect = self.side_effects[-1] if self.after_side_effect else None
        return {
            "request_id": request.id,
            "method": request.method,
            "tool": request.target if request.method == "tools/call" else None,
            "prompt": request.target if request.method == "prompts/get" else None,
            "elapsed": (self.signalled_at or self.clock()) - self.started,
            "reason": self.reason.value if self.reason else None,
            "outcome": self.outcome,
            "after_side_effect": self.after_side_effect,
            "side_effect": effect.name if effect else None,
            "idempotency_key": effect.idempotency_key if effect else None,
            "side_effects": [e.name for e in self.side_effects],
        }

    def _log_cancellation(self) -> None:
        if self.reason is None:
            return
        fields = self._log_fields()
        if self.after_side_effect:
            logger.warning(
                "request cancelled after side effect %r (%s, %s): reconcile",
                fields["side_effect"],
                fields["reason"],
                fields["outcome"],
                extra=fields,
            )
        else:
            logger.info(
                "request cancelled: %s (%s) after %.3fs",
                fields["reason"],
                fields["outcome"],
                fields["elapsed"],
                extra=fields,
            )

    def _safely(self, hook: Callable[[RequestScope], None]) -> None:
        try:
            hook(self)
        except Exception:
            _errors.debug("observer failed", exc_info=True)


class _ThreadJob:
    """Who accounts for a worker thread: the loop (it returned in time, or never started)
    or the thread itself (abandoned while running)."""

    __slots__ = ("_lock", "_state")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._state: Literal["queued", "running", "done", "abandoned"] = "queued"

    def begin(self) -> bool:
        """In the thread: False if the call was abandoned before it started."""
        with self._lock:
            if self._state == "abandoned":
                return False
            self._state = "running"
            return True

    def end(self) -> bool:
        """In the thread: True if the loop abandoned it while it ran."""
        with self._lock:
            abandoned = self._state == "abandoned"
            self._state = "done"
            return abandoned

    def abandon(self) -> bool:
        """On the loop, on cancel: True if the thread is still running (it reports itself)."""
        with self._lock:
            running = self._state == "running"
            if self._state == "queued" or running:
                self._state = "abandoned"
            return running


def _server_cancel_error(reason: CancelReason, timeout: float | None) -> McpError:
    if reason is CancelReason.TIMEOUT:
        message = f"Request timed out after {timeout:g} seconds"
    else:
        message = "Request cancelled: the server is shutting down"
    return McpError(INTERNAL_ERROR, message, {"reason": reason.value})
