"""`Context`: what a handler gets by annotating a parameter `ctx: Context`."""

from __future__ import annotations

import math
import os
import subprocess
from collections.abc import Awaitable, Callable, Mapping, Sequence
from functools import partial
from types import TracebackType
from typing import Any, TypeVar, overload

import anyio
import anyio.lowlevel
from starlette.requests import Request
from starlette.types import Scope

from mcp_asgi.auth.principal import Principal, principal_in
from mcp_asgi.input.asking import Asking, ElicitResult, M
from mcp_asgi.lifecycle import process as _process
from mcp_asgi.lifecycle.cancel import CancelReason, CancelToken
from mcp_asgi.lifecycle.process import Argv, ProcessLines
from mcp_asgi.lifecycle.scope import RequestScope
from mcp_asgi.protocol import jsonrpc
from mcp_asgi.protocol.jsonrpc import JsonObject, RequestId
from mcp_asgi.protocol.request import LOG_LEVELS
from mcp_asgi.server.http_request import read_only_request

T = TypeVar("T")


class Context:
    """The request a handler is serving: cancellation, progress, logging, deadline, helpers,
    and the HTTP request it came in (`request`).

    Handlers never see ASGI itself; everything they write goes through the request's scope,
    so nothing reaches the client after the request is cancelled.
    """

    __slots__ = (
        "_asgi_scope",
        "_body",
        "_cancel_grace",
        "_http_request",
        "_inputs",
        "_kill_grace",
        "_last_progress",
        "_last_progress_at",
        "_min_interval",
        "_request_scope",
        "_start_task",
        "_task_id",
    )

    def __init__(
        self,
        request_scope: RequestScope,
        progress_min_interval: float = 0.0,
        process_kill_grace: float = 2.0,
        cancel_grace: float = 5.0,
        inputs: Asking | None = None,
        asgi_scope: Scope | None = None,
        body: bytes = b"",
        task_id: str | None = None,
        start_task: Callable[[], Awaitable[bool]] | None = None,
    ) -> None:
        self._request_scope = request_scope
        self._task_id = task_id
        self._start_task = start_task
        self._inputs = inputs
        self._last_progress: float | None = None
        self._last_progress_at = -math.inf
        self._min_interval = progress_min_interval
        self._kill_grace = process_kill_grace
        self._cancel_grace = cancel_grace
        self._asgi_scope = asgi_scope
        self._body = body
        self._http_request: Request | None = None  # made on first use

    # -- who is asking ---------------------------------------------------------------

    @property
    def request_id(self) -> RequestId:
        """The JSON-RPC id of the request."""
        return self._request_scope.request.id

    @property
    def method(self) -> str:
        """The MCP method, e.g. `tools/call`."""
        return self._request_scope.request.method

    @property
    def task_id(self) -> str | None:
        """The id of the task this call runs as (the Tasks extension, docs/tasks.md), or
        None for a plain request. Set from the start of a task-capable call: the id the
        task has once the call becomes one. A handle: never log it."""
        return self._task_id

    async def start_task(self) -> bool:
        """Make this call a task now, rather than when the `task_result_window` ends;
        whether it is one (False for a plain request: a tool with `task="never"`, or a
        request that does not declare the Tasks extension).

        Questions asked before are ordinary input_required rounds of the request (its
        retry runs the handler again from the top); questions asked after go on the task
        and the handler waits where it asked. Returns once the task is stored.
        """
        if self._start_task is None:
            return False
        return await self._start_task()

    @property
    def client_info(self) -> Mapping[str, Any] | None:
        """The client's self-reported `clientInfo` (never a security signal)."""
        return self._request_scope.request.client_info

    @property
    def principal(self) -> Principal | None:
        """Who is calling, with authorization on (docs/authorization.md): the subject,
        scopes, claims and client id of the verified access token, or the host app's
        identity (`auth_host_identity`). None when the endpoint does no authorization.
        Never derived from anything the client says about itself."""
        return principal_in(self._asgi_scope) if self._asgi_scope is not None else None

    @property
    def client_capabilities(self) -> Mapping[str, Any]:
        """The capabilities the client declared on this request."""
        return self._request_scope.request.client_capabilities

    @property
    def progress_token(self) -> str | int | None:
        """The request's `_meta` progress token, or None if the client asked for no
        progress (`report_progress` then sends nothing)."""
        return self._request_scope.request.progress_token

    @property
    def input_responses(self) -> Any:
        """`params.inputResponses` exactly as the client sent it (a retry answering the
        questions of an earlier `InputRequiredResult`), or None when absent.

        Raw and unchecked: `elicit`, `sample` and `list_roots` read and verify it for you.
        """
        return self._request_scope.request.params.get("inputResponses")

    @property
    def request(self) -> Request:
        """The HTTP request this MCP request came in, as a Starlette `Request`: `headers`,
        `client`, `url`, `query_params`, `cookies`, `app` and `app.state`, `state`, and
        `scope["user"]` / `scope["auth"]` when the host app's authentication set them.

        It is read-only with respect to the connection: `await request.body()` (and
        `.json()`) give the body as already read; `await request.is_disconnected()` is
        always False and its `receive` never yields `http.disconnect`, because the
        request's watcher alone reads the connection (a disconnect cancels the handler:
        read `cancelled`). It cannot send anything. Made on first use.

        Raises `RuntimeError` for a request that did not come over HTTP.
        """
        if self._http_request is None:
            if self._asgi_scope is None:
                raise RuntimeError(f"this {self.method} request did not come over HTTP")
            self._http_request = read_only_request(self._asgi_scope, self._body)
        return self._http_request

    @property
    def cancel_grace(self) -> float:
        """Seconds the handler has to exit once the request is cancelled (the
        `cancel_grace` setting); dependencies with `yield` get as long to close."""
        return self._cancel_grace

    # -- cancellation ----------------------------------------------------------------

    @property
    def cancelled(self) -> bool:
        """Whether the request has been cancelled."""
        return self._request_scope.reason is not None

    @property
    def cancel_reason(self) -> CancelReason | None:
        """Why the request was cancelled, or None."""
        return self._request_scope.reason

    @property
    def cancel_token(self) -> CancelToken:
        """The thread-safe token to hand to code running in worker threads."""
        return self._request_scope.token

    @property
    def deadline(self) -> float | None:
        """Seconds left before the server's deadline for this request, or None."""
        return self._request_scope.time_left()

    async def checkpoint(self) -> None:
        """Yield to the event loop; raises the cancellation if the request was cancelled.

        Call it between steps of a long CPU-bound loop in an `async def` handler: the loop
        only notices a disconnect while the handler yields, and the handler only stops at an
        `await`.
        """
        await anyio.lowlevel.checkpoint()

    # -- work outside the event loop -------------------------------------------------

    async def run_sync(self, fn: Callable[..., T], *args: Any) -> T:
        """Run a blocking function in a worker thread, bound to this request.

        On cancel the request ends at once: the thread cannot be stopped, so it is abandoned
        and told through `cancel_token` (pass it to `fn` and poll it). A thread still
        running after the cancel grace period is counted as an orphan until it returns.
        """
        return await self._request_scope.run_sync(partial(fn, *args) if args else fn)

    async def run_process(
        self,
        argv: Argv,
        *,
        input: bytes | None = None,
        cwd: str | os.PathLike[str] | None = None,
        env: Mapping[str, str] | None = None,
        check: bool = True,
    ) -> subprocess.CompletedProcess[bytes]:
        """Run a command (no shell) to completion and return its exit status and output.

        The child starts in its own process group. If the request is cancelled, the whole
        group (grandchildren included) gets SIGTERM, then SIGKILL after the
        `process_kill_grace` setting; the call returns only once no process of the group is
        left. Anything still running in the group when the command exits is stopped the same
        way. `check=True` raises `subprocess.CalledProcessError` on a non-zero exit status.
        """
        return await _process.run(
            argv,
            input=input,
            cwd=cwd,
            env=env,
            check=check,
            kill_grace=self._kill_grace,
            owner=self._request_scope.work,
        )

    def stream_process(
        self,
        argv: Argv,
        *,
        cwd: str | os.PathLike[str] | None = None,
        env: Mapping[str, str] | None = None,
        stderr: int | None = subprocess.DEVNULL,
        check: bool = True,
        encoding: str = "utf-8",
    ) -> ProcessLines:
        """Run a command (no shell) and iterate over its standard output line by line::

            async with ctx.stream_process(["tail", "-n", "20", path]) as lines:
                async for line in lines:
                    await ctx.report_progress(...)

        Lines come without their line ending. `stderr` is discarded by default
        (`subprocess.STDOUT` merges it into the lines, None inherits the server's). The
        process group is stopped like `run_process`'s when the block ends, when the
        request is cancelled, or at the latest when the handler exits. `check=True` raises
        `subprocess.CalledProcessError` after the last line on a non-zero exit status.
        """
        return ProcessLines(
            argv,
            cwd=cwd,
            env=env,
            stderr=stderr,
            check=check,
            encoding=encoding,
            kill_grace=self._kill_grace,
            owner=self._request_scope.work,
        )

    # -- side effects ----------------------------------------------------------------

    def side_effect(self, name: str, idempotency_key: str | None = None) -> SideEffectMark:
        """Mark an irreversible step (a charge, an e-mail, a write to another system).

        Call it just before the step. A cancel that lands after the mark is recorded for
        reconciliation (span attribute, counter, one WARNING log record with the name and
        `idempotency_key`) instead of passing as a clean cancel. Use
        `async with ctx.side_effect(...)` to also shield the step from cancellation, so it
        completes (the cancel takes effect right after the block).

        Raises `RequestCancelled` if the request is already cancelled: the step is never
        started after the signal. Safe to call from a worker thread.
        """
        if not name:
            raise ValueError("side effect name must not be empty")
        self._request_scope.mark_side_effect(name, idempotency_key)
        return SideEffectMark()

    # -- writing to the client -------------------------------------------------------

    async def report_progress(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> None:
        """Send `notifications/progress` if the client asked for progress.

        `progress` must increase with each call. Dropped in JSON response mode and after
        the request is cancelled.
        """
        token = self._request_scope.request.progress_token
        if token is None:
            return
        if self._last_progress is not None and progress <= self._last_progress:
            raise ValueError("progress must increase with each notification")
        self._last_progress = progress
        now = self._request_scope.clock()
        final = total is not None and progress >= total
        if not final and now - self._last_progress_at < self._min_interval:
            return
        self._last_progress_at = now
        params: dict[str, Any] = {"progressToken": token, "progress": progress}
        if total is not None:
            params["total"] = total
        if message is not None:
            params["message"] = message
        await self._request_scope.write(jsonrpc.notification("notifications/progress", params))

    async def log(self, level: str, data: Any, *, logger: str | None = None) -> None:
        """Send `notifications/message` if the request set a log level at or below `level`.

        Never include secrets or personal data.
        """
        if level not in LOG_LEVELS:
            raise ValueError(f"unknown log level {level!r}; use one of {', '.join(LOG_LEVELS)}")
        wanted = self._request_scope.request.log_level
        if wanted is None or LOG_LEVELS.index(level) < LOG_LEVELS.index(wanted):
            return
        params: dict[str, Any] = {"level": level, "data": data}
        if logger is not None:
            params["logger"] = logger
        await self._request_scope.write(jsonrpc.notification("notifications/message", params))

    async def close_stream(self) -> bool:
        """End this request's HTTP response now while the handler goes on, so the client
        polls for the rest (SSE polling, 2025-11-25): its events and result wait in the
        stream's log, and the client, told when to come back by the `retry` field
        (`legacy_sse_retry`), fetches them with GET and `Last-Event-ID`. Only a 2025-era
        request whose reply is an event stream can do this; elsewhere it does nothing and
        returns False. Once closed, the client's connection no longer cancels the request.
        """
        return await self._request_scope.close_early()

    # -- asking the client (multi round-trip requests, see mcp_asgi.input) -----------

    @overload
    async def elicit(
        self, message: str, schema: type[M], *, key: str | None = None
    ) -> ElicitResult[M]: ...

    @overload
    async def elicit(
        self, message: str, schema: Mapping[str, Any], *, key: str | None = None
    ) -> ElicitResult[dict[str, Any]]: ...

    async def elicit(self, message: str, schema: Any, *, key: str | None = None) -> Any:
        """Ask the user to fill in a form: a flat object JSON Schema, or a pydantic model
        (the answer's `content` is then an instance of it).

        On a 2026-07-28 request, the first time, this ends the request with an
        `InputRequiredResult`; the client's retry runs the handler again, from the top, and
        this call returns the answer. On a 2025-era request, `elicitation/create` is sent on
        the request's stream and this call waits for the client's answer (docs/input-requests.md).
        Accepted content that does not fit the schema or model ends the request with
        -32602 saying what is wrong, so what this returns always fits.
        """
        return await self._input_round().elicit(message, schema, key=key)

    async def elicit_url(
        self, message: str, url: str, *, key: str | None = None
    ) -> ElicitResult[dict[str, Any]]:
        """Send the user to `url` (for credentials, payments: never ask those in a form)."""
        return await self._input_round().elicit_url(message, url, key=key)

    async def sample(
        self,
        messages: str | Sequence[Mapping[str, Any]],
        *,
        max_tokens: int,
        system_prompt: str | None = None,
        key: str | None = None,
        **params: Any,
    ) -> JsonObject:
        """Ask the client's model for a completion (`CreateMessageResult` as a dict)."""
        return await self._input_round().sample(
            messages, max_tokens=max_tokens, system_prompt=system_prompt, key=key, **params
        )

    async def list_roots(self, *, key: str | None = None) -> list[JsonObject]:
        """Ask the client for its roots."""
        return await self._input_round().list_roots(key=key)

    async def ping(self) -> bool:
        """Check that the client is there and answering. On a 2025-era `tools/call`,
        `resources/read` or `prompts/get` request this sends `ping` on the request's stream
        and waits for the client's empty answer: True. It returns False, sending nothing,
        where nothing can be pinged: a 2026-07-28 request (ping was removed there; the
        request's open stream is the liveness, and a client that goes cancels it), another
        method, a task. Like `elicit`, it raises `McpError`: -32001 when the client did not
        answer within `legacy_input_timeout`, -32603 when the reply is a single JSON body;
        and a cancel of the request (the client went, cancelled, ended its session) ends
        the wait with that cancel."""
        if self._inputs is None:
            return False
        return await self._inputs.ping()

    @property
    def asks_in_place(self) -> bool:
        """Whether `elicit`, `sample` and `list_roots` wait where they are asked for the
        client's answer: on a 2025-era request and on a task; not on a plain 2026-07-28
        request, where asking ends the request with an input round and the client's retry
        runs the handler again from the top."""
        return self._inputs is not None and self._inputs.waits_in_place

    async def gather(self, *questions: Awaitable[Any]) -> list[Any]:
        """Ask several questions in one round: `a, b = await ctx.gather(ctx.elicit(...),
        ctx.list_roots())`."""
        return await self._input_round().gather(*questions)

    def _input_round(self) -> Asking:
        if self._inputs is None:
            raise RuntimeError(
                f"this {self.method} request cannot ask the client for input: only "
                "tools/call, resources/read and prompts/get requests can"
            )
        return self._inputs


def request_scope_of(ctx: Context) -> RequestScope:
    """The request scope a `Context` writes through, for the server's own code that runs
    beside the handler (not a handler's business: it is not on `Context`)."""
    return ctx._request_scope


class SideEffectMark:
    """Returned by `ctx.side_effect(...)`; as an async context manager it shields its block."""

    __slots__ = ("_shield",)

    def __init__(self) -> None:
        self._shield: anyio.CancelScope | None = None

    async def __aenter__(self) -> None:
        self._shield = anyio.CancelScope(shield=True)
        self._shield.__enter__()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._shield is not None:
            self._shield.__exit__(exc_type, exc, tb)
