"""Input requests a downstream server asks while one of our calls runs (elicitation,
sampling, roots), relayed to the client of the inbound request that made the call.

    which call asked     a 2026-07-28 downstream: its input round is driven in the calling
                         task (a context variable names the call); a 2025-era downstream
                         (stdio or HTTP session): the one call in flight on that connection
                         (with several, it cannot be told: the downstream gets an error)
    can ours be asked    the inbound request must hold the question open (`ctx.asks_in_place`:
                         a 2025-era session, a task; a task-capable call becomes a task
                         now); a plain 2026-07-28 request cannot: the downstream call is
                         cancelled and the handler gets `DownstreamInputUnsupported` (for
                         elicitation and sampling; `roots/list`, which a 2025-era server
                         may ask at any time, only gets an error: the call goes on)
    the answer           the client's, as the downstream asked for it; an error of ours
                         (a missing capability, the user's refusal is not one) as ErrorData

Errors::

    McpError
    └── DownstreamInputUnsupported   -32603, data.downstream and data.inputRequest
"""

from __future__ import annotations

import contextvars
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any, Final, TypeVar

import anyio

from mcp_asgi.protocol.jsonrpc import INTERNAL_ERROR, INVALID_REQUEST, McpError
from mcp_asgi.server.context import Context

T = TypeVar("T")
_CALL: Final[contextvars.ContextVar[Call | None]] = contextvars.ContextVar(
    "mcp_asgi_downstream_call", default=None
)


class DownstreamInputUnsupported(McpError):
    """The downstream server asked for input (elicitation, sampling, roots) during a call
    whose inbound request cannot hold the question open: a plain 2026-07-28 request, which
    asks its client only by ending with an input round and being run again. The downstream
    call is cancelled; the handler that lets this through answers -32603 with
    `data.downstream` and `data.inputRequest` (the method asked). Call the tool as a task,
    or from a 2025-era session, to have the question relayed."""

    def __init__(self, name: str, method: str) -> None:
        super().__init__(
            INTERNAL_ERROR,
            f"downstream server {name!r} asked for input ({method}), which this request "
            "cannot relay: only a task or a 2025-era session can hold the question open",
            {"downstream": name, "inputRequest": method},
        )


class Call:
    """One call in flight on a downstream: the handler's context, and what ended it."""

    __slots__ = ("ctx", "refused", "scope", "waiting")

    def __init__(self, ctx: Context | None) -> None:
        self.ctx = ctx
        self.scope = anyio.CancelScope()
        """The downstream call's scope: cancelled when its question cannot be relayed."""
        self.refused: str | None = None
        """The method of an input request that could not be relayed, if any."""
        self.waiting: set[anyio.CancelScope] = set()


class InputRelay:
    """The SDK client's callbacks of one downstream, relaying to the calling request."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._calls: list[Call] = []

    @contextmanager
    def call(self, ctx: Context | None) -> Iterator[Call]:
        """A call in flight, for as long as the block runs; questions still waiting for
        our client's answer are given up when it ends."""
        call = Call(ctx)
        token = _CALL.set(call)
        self._calls.append(call)
        try:
            yield call
        finally:
            self._calls.remove(call)
            _CALL.reset(token)
            for scope in call.waiting:
                scope.cancel()

    def callbacks(self) -> dict[str, Any]:
        """The `mcp.Client` options that answer the downstream's input requests."""
        return {
            "elicitation_callback": self._elicit,
            "sampling_callback": self._sample,
            "list_roots_callback": self._roots,
        }

    async def _elicit(self, _context: Any, params: Any) -> Any:
        from mcp import types

        async def ask(ctx: Context) -> Any:
            if params.mode == "url":
                answer = await ctx.elicit_url(params.message, params.url)
                return types.ElicitResult(action=answer.action)
            schema = params.requested_schema
            if hasattr(schema, "model_dump"):
                schema = schema.model_dump(by_alias=True, exclude_none=True, mode="json")
            form = await ctx.elicit(params.message, dict(schema))
            return types.ElicitResult(action=form.action, content=form.content)

        return await self._relay("elicitation/create", ask)

    async def _sample(self, _context: Any, params: Any) -> Any:
        from mcp import types

        body = params.model_dump(by_alias=True, exclude_none=True, mode="json")
        body.pop("_meta", None)
        body.pop("task", None)
        messages = body.pop("messages")
        max_tokens = body.pop("maxTokens")
        system_prompt = body.pop("systemPrompt", None)

        async def ask(ctx: Context) -> Any:
            answer = await ctx.sample(
                messages, max_tokens=max_tokens, system_prompt=system_prompt, **body
            )
            if "tools" in body:
                return types.CreateMessageResultWithTools.model_validate(answer)
            return types.CreateMessageResult.model_validate(answer)

        return await self._relay("sampling/createMessage", ask)

    async def _roots(self, _context: Any) -> Any:
        from mcp import types

        async def ask(ctx: Context) -> Any:
            return types.ListRootsResult.model_validate({"roots": await ctx.list_roots()})

        return await self._relay("roots/list", ask)

    async def _relay(self, method: str, ask: Callable[[Context], Awaitable[T]]) -> Any:
        from mcp import types

        call = self._asker()
        if call is None or call.ctx is None:
            if call is not None:
                detail = "the call was made without its handler's context (ctx)"
            elif self._calls:
                detail = "several calls are in flight, so the one asking cannot be told"
            else:
                detail = "no call of ours is in flight"
            return types.ErrorData(code=INVALID_REQUEST, message=f"{method} refused: {detail}")
        ctx = call.ctx
        if not ctx.asks_in_place and not await ctx.start_task():
            if method != "roots/list":  # servers ask for roots outside any call too
                call.refused = method
                call.scope.cancel()
            return types.ErrorData(
                code=INVALID_REQUEST,
                message=f"{method} refused: the gateway's request cannot hold it open",
            )
        with anyio.CancelScope() as waiting:
            call.waiting.add(waiting)
            try:
                return await ask(ctx)
            except McpError as exc:
                return types.ErrorData(code=exc.code, message=exc.message, data=exc.data)
            finally:
                call.waiting.discard(waiting)
        return types.ErrorData(code=INVALID_REQUEST, message=f"{method}: the call ended")

    def _asker(self) -> Call | None:
        call = _CALL.get()
        if call is not None and call in self._calls:
            return call
        return self._calls[0] if len(self._calls) == 1 else None
