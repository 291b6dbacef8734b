"""`RequestScope`: one JSON-RPC request's cancel scope, clock, state and write choke point.

Lifecycle (`run`)::

    main task      handler ──► result/error ──► write(final) ─┐
    watcher task   receive() until disconnect, deadline or cancel() ──► signal
                   signal ──► (server reasons) error reply ──► grace ──► exited | orphaned

The first signal wins. After it, `write` drops everything: that is the single place where
"nothing more is ever written for a cancelled request" is enforced.
"""

from __future__ import annotations

import contextlib
import logging
import math
import time
from collections.abc import Awaitable, Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Final, Literal

import anyio
import anyio.from_thread

from . import jsonrpc
from ._asgi import Receive
from ._reply import ReplyWriter
from ._validate import McpRequest
from .cancel import CancelReason, CancelToken
from .jsonrpc import INTERNAL_ERROR, JsonObject, McpError

Outcome = Literal["exited", "orphaned", "too_late"]
logger = logging.getLogger("mcp_asgi.cancellation")
_errors = logging.getLogger("mcp_asgi.errors")
_NEVER: Final = math.inf


@dataclass(frozen=True, slots=True)
class SideEffect:
    """An irreversible step a handler declared with `ctx.side_effect(...)`."""

    name: str
    idempotency_key: str | None
    at: float


class ScopeObserver:
    """Receives a request scope's lifecycle events (telemetry implements it). No-op base."""

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
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
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
        self._replied = False
        self._running = 1  # the handler itself, plus abandoned threads still running
        self._idle = anyio.Event()
        self._handler_scope = anyio.CancelScope()
        self._watch_scope: anyio.CancelScope | None = None
        self._deadline = _NEVER if timeout is None else anyio.current_time() + timeout

    # -- signals ---------------------------------------------------------------------

    @property
    def cancelled(self) -> bool:
        """Whether a cancel signal has reached this request."""
        return self.reason is not None

    def cancel(self, reason: CancelReason) -> None:
        """Cancel the request. Idempotent; ignored once the reply has been written."""
        if self.reason is not None or self._replied:
            logger.debug(
                "cancel ignored for finished request",
                extra={"request_id": self.request.id, "reason": reason.value},
            )
            return
        self.reason = reason
        self.signalled_at = self.clock()
        if self._running == 0:
            self.outcome = "too_late"
        if reason.client_initiated:
            self.writer.abandon()
        self.token._set(reason)
        self._handler_scope.cancel()
        if self._watch_scope is not None:
            self._watch_scope.cancel()
        self._safely(self._observer.signalled)

    def mark_side_effect(self, name: str, idempotency_key: str | None) -> SideEffect:
        """Record an irreversible step."""
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
        """Write a message for this request; dropped (False) once it is cancelled."""
        if self.reason is not None:
            return False
        if final:
            ok = await self.writer.finish(message)
            if ok:
                self._replied = True
        else:
            ok = await self.writer.notify(message)
        if not ok and self.reason is None and not self._replied:
            self.cancel(CancelReason.CLIENT_DISCONNECT)
        return ok

    async def wait_exited(self) -> None:
        """Wait until the handler (and any thread it started) has really exited."""
        await self._idle.wait()

    # -- threads ---------------------------------------------------------------------

    async def run_sync(self, fn: Callable[[], Any]) -> Any:
        """Run `fn` in a worker thread; on cancel the request moves on and the thread is
        abandoned, still counted as running work until it really returns."""
        self._running += 1

        def work() -> Any:
            try:
                return fn()
            finally:
                with contextlib.suppress(RuntimeError):  # the event loop may be gone
                    anyio.from_thread.run_sync(self._work_done)

        return await anyio.to_thread.run_sync(work, abandon_on_cancel=True)

    # -- lifecycle -------------------------------------------------------------------

    async def run(self, receive: Receive, call: Callable[[], Awaitable[JsonObject]]) -> None:
        """Run the handler under this scope until it exits (or is orphaned).

        If the server cancels the ASGI task itself (e.g. uvicorn's graceful-shutdown
        timeout), the request is recorded as cancelled by `server_shutdown` and the
        cancellation propagates.
        """
        try:
            async with anyio.create_task_group() as watchers:
                watchers.start_soon(self._watch, receive)
                try:
                    final = await self._call(call)
                finally:
                    self._work_done()
                if final is not None:
                    await self.write(final, final=True)
                if self.reason is None:
                    watchers.cancel_scope.cancel()
        except anyio.get_cancelled_exc_class():
            if self.reason is None and not self._replied:
                self.cancel(CancelReason.SERVER_SHUTDOWN)
                self.outcome = "exited" if self._running == 0 else "orphaned"
            self._finish()
            raise
        self._finish()

    def _finish(self) -> None:
        if self.outcome != "orphaned":
            self._safely(self._observer.ended)
            self._log_cancellation()

    async def _call(self, call: Callable[[], Awaitable[JsonObject]]) -> JsonObject | None:
        request_id = self.request.id
        with self._handler_scope, self._observer.activate():
            try:
                self.result = await call()
                return jsonrpc.response(request_id, self.result)
            except McpError as error:
                self.error = error
                return jsonrpc.error_response(request_id, error)
            except Exception as exc:
                if self.reason is None:
                    _errors.exception(
                        "handler failed",
                        extra={"request_id": request_id, "method": self.request.method},
                    )
                self.exception = exc
                self.error = McpError(INTERNAL_ERROR, "Internal error")
                return jsonrpc.error_response(request_id, self.error)
        return None  # cancelled

    def _work_done(self) -> None:
        self._running -= 1
        if self._running:
            return
        self.exited_at = self.clock()
        self._idle.set()
        if self.outcome == "orphaned":
            self._safely(self._observer.orphan_exited)
            logger.info("orphaned handler exited", extra=self._log_fields())

    async def _watch(self, receive: Receive) -> None:
        with anyio.CancelScope(deadline=self._deadline) as watch:
            self._watch_scope = watch
            await self._watch_receive(receive)
        if self.reason is None:
            if not watch.cancelled_caught:
                return
            self.cancel(CancelReason.TIMEOUT)
        await self._after_signal()

    async def _watch_receive(self, receive: Receive) -> None:
        while True:
            if self._keepalive:
                with anyio.move_on_after(self._keepalive):
                    message = await receive()
                    if message["type"] == "http.disconnect":
                        self.cancel(CancelReason.CLIENT_DISCONNECT)
                        return
                    continue
                if not await self.writer.keepalive():
                    self.cancel(CancelReason.CLIENT_DISCONNECT)
                    return
            else:
                message = await receive()
                if message["type"] == "http.disconnect":
                    self.cancel(CancelReason.CLIENT_DISCONNECT)
                    return

    async def _after_signal(self) -> None:
        reason = self.reason
        assert reason is not None
        if not reason.client_initiated:
            error = _server_cancel_error(reason, self.timeout)
            self.error = error
            with anyio.CancelScope(shield=True), anyio.move_on_after(self._grace or 1.0):
                await self.writer.finish(jsonrpc.error_response(self.request.id, error))
        if self.outcome == "too_late":
            return
        with anyio.move_on_after(self._grace):
            await self._idle.wait()
        if self._running:
            self.outcome = "orphaned"
            self._safely(self._observer.ended)
            self._log_cancellation()
        else:
            self.outcome = "exited"

    # -- reporting -------------------------------------------------------------------

    def _log_fields(self) -> dict[str, Any]:
        effect = self.side_effects[0] if self.side_effects else None
        return {
            "request_id": self.request.id,
            "method": self.request.method,
            "target": self.request.target,
            "elapsed": (self.signalled_at or self.clock()) - self.started,
            "reason": self.reason.value if self.reason else None,
            "outcome": self.outcome,
            "side_effect": effect.name if effect else None,
            "after_side_effect": self.after_side_effect,
            "idempotency_key": effect.idempotency_key if effect else None,
        }

    def _log_cancellation(self) -> None:
        if self.reason is None:
            return
        fields = self._log_fields()
        if self.after_side_effect:
            logger.warning(
                "request cancelled after side effect %r: reconcile",
                fields["side_effect"],
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


def _server_cancel_error(reason: CancelReason, timeout: float | None) -> McpError:
    if reason is CancelReason.TIMEOUT:
        message = f"Request timed out after {timeout:g} seconds"
    else:
        message = "Request cancelled: the server is shutting down"
    return McpError(INTERNAL_ERROR, message, {"reason": reason.value})
