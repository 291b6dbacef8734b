"""`TaskMethods`: the Tasks extension's side of a 2026-07-28 request.

    tools/call of a task-capable tool
        the request does not declare the extension: `optional` runs plainly, `required`
        is -32021 (requiredCapabilities) before anything runs
        it does: 503 when `max_tasks` run in this process or its ended tasks keep
        `max_kept_task_bytes`, 429 when the client runs `max_tasks_per_client` or keeps
        `max_kept_task_bytes_per_client` (with Retry-After, before the request's scope);
        else the work starts under the supervisor; done within `task_result_window`,
        an `optional` tool answers plainly, and a question asked by then is an ordinary
        input_required round; otherwise the task is stored, then `CreateTaskResult`
    tasks/get | tasks/update | tasks/cancel
        -32021 unless the request declares the extension (before any lookup), then the
        task its principal owns (-32602 for an unknown, expired or another's id); a
        `tasks/get` answer with a result counts one more request against the client's
        rate per full 64 KiB of it (`ClientLimits.charge`)
    subscriptions/listen (declaring the extension)
        the server's listen stream, also watching the `taskIds` the caller owns
        (`watch.TaskWatch`): a `notifications/tasks` at each of their status changes

Every answer is `resultType: "complete"` except `CreateTaskResult` (`"task"`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Final

import anyio
from starlette.types import Scope

from mcp_asgi._loggers import tasks_logger as logger
from mcp_asgi.http.exchange import Exchange
from mcp_asgi.input.asking import Asking
from mcp_asgi.input.request_state import digest, principal_of
from mcp_asgi.lifecycle.cancel import CancelReason
from mcp_asgi.limits import ClientLimits
from mcp_asgi.protocol.jsonrpc import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    MISSING_CLIENT_CAPABILITY,
    JsonObject,
    McpError,
    store_unavailable,
)
from mcp_asgi.protocol.request import TASKS_EXTENSION, McpRequest
from mcp_asgi.server.context import Context
from mcp_asgi.server.listen import LISTEN
from mcp_asgi.server.mcp_server import SERVER_INFO_KEY, McpServer, ResultOptions
from mcp_asgi.store import StoreUnavailable
from mcp_asgi.tasks.record import TaskRecord
from mcp_asgi.tasks.supervisor import TaskSupervisor
from mcp_asgi.tasks.watch import TaskWatch

Method = Callable[[McpRequest, Context, ResultOptions], Awaitable[JsonObject]]

_UNSHARED_HINT = (
    "; if this server runs on several workers or replicas, it needs a shared store for "
    "its tasks (MCP_BUS_URL=redis://...)"
)
"""Added to "unknown task" when tasks are kept in this process's memory."""

BYTES_PER_REQUEST: Final = 64 * 1024
"""A `tasks/get` answer counts one more request per this many bytes of result it carries."""


class TaskMethods:
    """Routes the requests the Tasks extension changes; the rest is the server's."""

    def __init__(
        self,
        server: McpServer,
        supervisor: TaskSupervisor,
        *,
        window: float,
        limits: ClientLimits,
    ) -> None:
        self._server = server
        self._supervisor = supervisor
        self._window = window
        self._unknown = "Invalid params: unknown task (or expired)"
        if not supervisor.registry.store.shared:  # tasks in this process's memory
            self._unknown += _UNSHARED_HINT
        self._limits = limits

    def route(
        self, request: McpRequest, exchange: Exchange, inputs: Asking | None
    ) -> Method | None:
        """The method that answers `request` (POSTed in `exchange`) if the extension has a
        say in it, else None; the task store out of reach, it answers 503 (reason
        `store_unavailable`). Most requests are neither one of the extension's methods nor
        from a client declaring it: those are answered None at once."""
        if request.method not in _TASK_METHODS and not declares_tasks(request):
            return None
        method = self._route(request, exchange.asgi_scope, body=exchange.body, inputs=inputs)
        return None if method is None else _store_errors(method)

    def _route(
        self, request: McpRequest, asgi_scope: Scope, *, body: bytes, inputs: Asking | None
    ) -> Method | None:
        method = request.method
        if method == "tools/call":
            # (a client that does not declare the extension gets a plain call, `route`
            # answered None: the server refuses a task-required tool itself, -32600)
            if self._server.task_policy(str(request.params.get("name"))) == "never":
                return None
            client = self._limits.key(asgi_scope)
            self._supervisor.check_capacity(client)  # 503, 429 with Retry-After: before
            self._limits.check("tasks", client)  # the request's scope opens
            return lambda r, ctx, options: self._call_tool(
                r, ctx, options, asgi_scope, body, inputs, client
            )
        if method == LISTEN:  # may watch the caller's tasks (the client declares tasks)
            if not declares_tasks(request) or not self._server.has_tasks:
                return None
            watch = TaskWatch(self._supervisor.registry, _owner(asgi_scope))
            return lambda r, ctx, options: self._server.listen(r, ctx, options, watch)
        if method not in _TASK_METHODS:
            return None  # the owner's digest is worked out only for the methods it guards
        owner = _owner(asgi_scope)
        if method == "tasks/get":
            return lambda r, ctx, options: self._get(r, owner, self._limits.key(asgi_scope))
        if method == "tasks/update":
            return lambda r, ctx, options: self._update(r, owner)
        return lambda r, ctx, options: self._cancel(r, owner)

    # -- tools/call -------------------------------------------------------------------

    async def _call_tool(
        self,
        request: McpRequest,
        ctx: Context,
        options: ResultOptions,
        asgi_scope: Scope,
        body: bytes,
        inputs: Asking | None,
        client: str,
    ) -> JsonObject:
        name = str(request.params["name"])
        policy = await self._server.call_task_policy(name, ctx)  # a source's: read now
        if policy == "never":  # a source's tool after all (its source read just now)
            return await self._server.dispatch(request, ctx, options)
        supervisor = self._supervisor
        if not supervisor.running:
            if policy == "required":
                raise McpError(
                    INTERNAL_ERROR,
                    "Internal error: tasks run inside the app's lifespan, which has not started",
                )
            return await self._server.dispatch(request, ctx, options)
        run = supervisor.start(  # checked again: others may have started tasks meanwhile
            asgi_scope,
            request,
            body=body,
            round=inputs,
            dispatch=self._server.dispatch,
            client=client,
            hold=self._limits.hold("tasks", client),
        )
        try:
            with anyio.move_on_after(self._window):
                await run.decide.wait()  # done, or ctx.start_task()
        except anyio.get_cancelled_exc_class():
            run.cancel(ctx.cancel_reason or CancelReason.CLIENT_DISCONNECT)  # no task yet
            raise
        if run.done.is_set():
            finished = run.scope.record()
            result = finished.result
            if result is not None and result.get("resultType") == "input_required":
                return result  # an MRTR round before the task: the client answers, retries
            if policy == "optional":
                if finished.error is not None:
                    raise finished.error
                if result is None:
                    raise McpError(INTERNAL_ERROR, "Internal error")
                return result
        run.promoted = True
        record = supervisor.new_record(run, _owner(asgi_scope), name)
        with anyio.CancelScope(shield=True):  # once stored, the task is the client's
            unreachable = False
            try:
                stored = await supervisor.registry.create(record)
            except StoreUnavailable:  # logged once by the store
                stored, unreachable = False, True
            except Exception:
                logger.exception("could not store a new task")
                stored = False
            run.mark_stored(record if stored else None)
        if not stored:
            run.cancel(CancelReason.TASK_CANCELLED)
            if unreachable:
                raise store_unavailable(request.id)
            raise McpError(INTERNAL_ERROR, "Internal error: the task could not be stored")
        if record.terminal:  # it was done when stored (its work will not store it again)
            supervisor.kept(record, client)
        return self._answer({**record.task(), "resultType": "task"})

    # -- tasks/* ------------------------------------------------------------------------

    async def _get(self, request: McpRequest, owner: str | None, client: str) -> JsonObject:
        record = await self._find(request, owner)
        answer = record.detailed()
        if "result" in answer or "error" in answer:  # a large answer weighs several requests
            self._limits.charge(client, record.result_bytes // BYTES_PER_REQUEST)
        return self._answer(answer)

    async def _update(self, request: McpRequest, owner: str | None) -> JsonObject:
        record = await self._find(request, owner)
        responses = request.params.get("inputResponses")
        if not isinstance(responses, dict):
            raise McpError(INVALID_PARAMS, "Invalid params: 'inputResponses' must be an object")
        applied: list[str] = []

        def deliver(current: TaskRecord) -> bool:
            applied.clear()
            for key, response in responses.items():
                if key in current.input_requests and isinstance(response, dict):
                    del current.input_requests[key]
                    current.answers[key] = response
                    applied.append(key)
            if applied and not current.input_requests and current.status == "input_required":
                current.status = "working"
            return bool(applied)

        if not record.terminal:
            changed = await self._supervisor.registry.change(record.id, deliver)
            if applied and changed is not None:
                await self._signal(changed)
        return self._answer({})  # unknown and answered keys are acknowledged, ignored

    async def _cancel(self, request: McpRequest, owner: str | None) -> JsonObject:
        record = await self._find(request, owner)

        def ask_to_cancel(current: TaskRecord) -> bool:
            if current.terminal or current.cancel_requested:
                return False
            current.cancel_requested = True
            return True

        if not record.terminal:
            changed = await self._supervisor.registry.change(record.id, ask_to_cancel)
            if changed is not None and not changed.terminal:
                await self._signal(changed)
        return self._answer({})  # the same acknowledgement for a task already ended

    async def _find(self, request: McpRequest, owner: str | None) -> TaskRecord:
        if not declares_tasks(request):  # before any lookup
            raise McpError(
                MISSING_CLIENT_CAPABILITY,
                f"Missing required client capability: extensions.{TASKS_EXTENSION} "
                "(declare it in _meta io.modelcontextprotocol/clientCapabilities)",
                {"requiredCapabilities": {"extensions": {TASKS_EXTENSION: {}}}},
            )
        record = await self._supervisor.registry.find(str(request.params["taskId"]), owner)
        if record is None:
            raise McpError(INVALID_PARAMS, self._unknown)
        return record

    async def _signal(self, record: TaskRecord) -> None:
        """Tell the replica running the task: at once if it is this one, else by the
        store's channel (the renewal re-reads the record if that is lost)."""
        if record.worker == self._supervisor.worker:
            self._supervisor.poke(record.id)
        else:
            await self._supervisor.registry.signal(record)

    def _answer(self, result: JsonObject) -> JsonObject:
        result.setdefault("resultType", "complete")
        result["_meta"] = {SERVER_INFO_KEY: self._server.server_info}
        return result


_TASK_METHODS: Final = frozenset({"tasks/get", "tasks/update", "tasks/cancel"})


def declares_tasks(request: McpRequest) -> bool:
    """Whether this request's own `_meta` client capabilities declare the extension."""
    extensions: Any = request.client_capabilities.get("extensions")
    return isinstance(extensions, dict) and isinstance(extensions.get(TASKS_EXTENSION), dict)


def _owner(asgi_scope: Scope) -> str | None:
    """Whom a task belongs to: a digest of the authenticated principal, or None (then the
    task id, unguessable, is the only key)."""
    principal = principal_of(asgi_scope)
    return digest(principal) if principal is not None else None


def _store_errors(method: Method) -> Method:
    """`method`, answering 503 while the task store is out of reach (the outage is logged
    once, by the store)."""

    async def guarded(request: McpRequest, ctx: Context, options: ResultOptions) -> JsonObject:
        try:
            return await method(request, ctx, options)
        except StoreUnavailable:
            raise store_unavailable(request.id) from None

    return guarded
