"""`TaskSupervisor`: runs the work of tasks in this process, outside any HTTP request.

    running()   the app's lifespan: a task group for the work, a listener on this
                replica's signal channel, and the lease renewal loop
    check_capacity(client)  503 when `max_tasks` run in this process already, or its
                ended tasks keep `max_kept_task_bytes`; 429 when the client's keep
                `max_kept_task_bytes_per_client` (`capacity.KeptBytes`)
    start()     a task-capable call's work under its own RequestScope (no connection:
                a disconnect of the creating request cannot reach it); the client's
                `Hold` on one of its `max_tasks_per_client` is given back when it ends
    _renew      every lease/3: renew each running task's lease, and read its record: a
                cancel recorded there (tasks/cancel on any replica) cancels the work with
                `task_cancelled`, answers wake the handler, a record gone (TTL) cancels
                with `timeout` — so a lost signal delays a cancel by one renewal at most
    _store_outcome  the finished work's outcome into its record; while Redis is out of
                reach, again after a backoff
    shutdown    `server_shutdown` for every running task; each ends `failed` saying so

Cancellation goes through the scope (`RequestScope.cancel`): async handlers, thread
tokens, subprocess groups, grace and orphans, the cancellation log and span, as for every
request.
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import anyio
from anyio.abc import TaskGroup
from starlette.types import Message, Scope

from mcp_asgi._loggers import tasks_logger as logger
from mcp_asgi.http.reply import ReplyWriter
from mcp_asgi.input.asking import Asking
from mcp_asgi.lifecycle.armed import plain
from mcp_asgi.lifecycle.cancel import CancelReason
from mcp_asgi.lifecycle.outcome import ScopeObserver
from mcp_asgi.limits import Hold
from mcp_asgi.protocol.jsonrpc import JsonObject
from mcp_asgi.protocol.request import McpRequest
from mcp_asgi.runtime import RequestRuntime, shortest
from mcp_asgi.server.context import Context
from mcp_asgi.server.mcp_server import McpServer, ResultOptions
from mcp_asgi.settings import TaskSettings
from mcp_asgi.store import StoreUnavailable
from mcp_asgi.tasks.capacity import KeptBytes, server_busy
from mcp_asgi.tasks.input import TaskInput
from mcp_asgi.tasks.record import TaskRecord
from mcp_asgi.tasks.registry import TaskRegistry, worker_channel
from mcp_asgi.tasks.run import TaskRun
from mcp_asgi.tasks.workers import several_workers
from mcp_asgi.telemetry import Telemetry

Dispatch = Callable[[McpRequest, Context, ResultOptions], Awaitable[JsonObject]]


class TaskSupervisor:
    """The tasks this process runs (a replica's share of the registry's tasks)."""

    def __init__(
        self,
        server: McpServer,
        registry: TaskRegistry,
        settings: TaskSettings,
        telemetry: Telemetry,
        options: ResultOptions,
        runtime: RequestRuntime,
    ) -> None:
        self.worker = secrets.token_hex(8)
        """This replica's name in task records (its signal channel)."""
        self.registry = registry
        self._server = server
        self._settings = settings
        self._telemetry = telemetry
        self._options = options
        self._runtime = runtime
        self._runs: dict[str, TaskRun] = {}
        self._kept = KeptBytes(
            per_client=settings.max_kept_bytes_per_client,
            total=settings.max_kept_bytes,
        )
        self._group: TaskGroup | None = None

    @property
    def running(self) -> bool:
        """Whether tasks can be started (inside the app's lifespan)."""
        return self._group is not None

    def __len__(self) -> int:
        """How many tasks' work runs in this process."""
        return len(self._runs)

    @asynccontextmanager
    async def run_tasks(self) -> AsyncIterator[None]:
        """Run tasks for as long as the block lasts (the middleware: the app's lifespan);
        at its end, every task still running is cancelled (`server_shutdown`). Tasks kept in
        this process's memory while it looks like one of several workers: a WARNING."""
        self._warn_unshared()
        async with anyio.create_task_group() as group:
            group.start_soon(self._listen)
            group.start_soon(self._renew)
            self._group = group
            try:
                yield
            finally:
                with anyio.CancelScope(shield=True):
                    await self.shutdown()
                self._group = None
                group.cancel_scope.cancel()

    def _warn_unshared(self) -> None:
        if not self._server.has_tasks or self.registry.store.shared:
            return
        workers = several_workers()
        if workers is not None:
            logger.warning(
                "tools of server %r may run as tasks, but tasks are kept in this process's "
                "memory and it looks like one of several workers (%s): a tasks/get or "
                "tasks/cancel that reaches another worker answers 'unknown task', and a "
                "task cancelled there keeps running. Configure a shared store: "
                "MCP_BUS_URL=redis://... (mcp-asgi[redis]), or run one worker; see "
                "docs/deployment.md",
                self._server.name,
                workers,
            )

    # -- starting work ----------------------------------------------------------------

    def check_capacity(self, client: str) -> None:
        """503 (Retry-After) when `max_tasks` run in this process already or its ended
        tasks keep `max_kept_task_bytes`; 429 when those of `client` keep its share."""
        limit = self._settings.max_tasks
        if limit is not None and len(self._runs) >= limit:
            raise server_busy(f"{limit} tasks run on this server already", "max_tasks")
        self._kept.check(client, self.registry.clock())

    def start(
        self,
        asgi_scope: Scope,
        request: McpRequest,
        *,
        body: bytes,
        round: Asking | None,
        dispatch: Dispatch,
        client: str,
        hold: Hold,
    ) -> TaskRun:
        """Start a task-capable call's work now, under its own scope; it is promoted to a
        task (or not) by the caller. `hold` (the client's count of tasks) is given back
        when the work ends, or at once if it cannot start."""
        group = self._group
        try:
            if group is None:
                raise RuntimeError("tasks run only inside the app's lifespan")
            self.check_capacity(client)  # 503, 429
            run, ctx = self._prepare(asgi_scope, request, body, round)
        except BaseException:
            hold.release()
            raise
        self._runs[run.id] = run
        group.start_soon(self._work, run, ctx, dispatch, client, hold)
        return run

    def _prepare(
        self, asgi_scope: Scope, request: McpRequest, body: bytes, round: Asking | None
    ) -> tuple[TaskRun, Context]:
        """A new task's run and its handler's context (the work not started yet)."""
        task_id = secrets.token_urlsafe(24)  # 192 random bits, header-safe
        settings = self._settings
        observer = self._telemetry.begin_task(asgi_scope, request)  # linked to the creator
        scope = self._runtime.task_scope(
            request,
            ReplyWriter(_discard, "json"),  # nobody reads a task's reply: it is stored
            observer=observer or ScopeObserver(),
            timeout=shortest(settings.max_duration, self.ttl),
        )
        run = TaskRun(
            task_id,
            request,
            scope,
            self.registry,
            max_result_bytes=settings.max_result_bytes,
            telemetry=observer,
        )
        ctx = self._runtime.context(
            scope,
            inputs=TaskInput(request, round, run),
            asgi_scope=asgi_scope,
            body=body,
            task_id=task_id,
            start_task=run.start_task,
        )
        return run, ctx

    @property
    def ttl(self) -> float | None:
        """The TTL a new task gets: `task_ttl`, capped by `max_task_ttl`."""
        return shortest(self._settings.ttl, self._settings.max_ttl)

    def new_record(self, run: TaskRun, owner: str | None, tool: str) -> TaskRecord:
        """The record of a call promoted now (its outcome already in, if it is done)."""
        now = self.registry.clock()
        record = TaskRecord(
            id=run.id,
            owner=owner,
            tool=tool,
            status="working",
            created=now,
            updated=now,
            ttl=self.ttl,
            poll_interval_ms=max(1, round(self._settings.poll_interval * 1000)),
            worker=self.worker,
            lease=now + self._settings.lease,
        )
        if run.done.is_set():
            run.apply_outcome(record)
            run.final_written = True
        return record

    def kept(self, record: TaskRecord, client: str) -> None:
        """`record` has ended and stays in the store until its TTL ends: it counts against
        `client`'s and the process's kept bytes until then."""
        expires = None if record.ttl is None else record.created + record.ttl
        self._kept.add(client, len(record.to_bytes()), expires)

    async def _work(
        self, run: TaskRun, ctx: Context, dispatch: Dispatch, client: str, hold: Hold
    ) -> None:
        try:
            await run.scope.run(
                _never_disconnects, lambda: dispatch(run.request, ctx, self._options)
            )
        except Exception:
            logger.exception("a task's scope failed")
        finally:
            run.done.set()
            run.decide.set()
        try:
            if run.promoted:
                await run.stored.wait()
                if run.record is not None and not run.final_written:
                    await self._store_outcome(run, client)
        except Exception:
            logger.exception("could not store a task's outcome")
        finally:
            self._runs.pop(run.id, None)
            hold.release()
            run.settled.set()

    async def _store_outcome(self, run: TaskRun, client: str) -> None:
        """Write the finished work's outcome into its record. While Redis is out of reach,
        again after a backoff, until the record's TTL ends (it is gone then): an outcome is
        lost only with its process (at shutdown, once the grace period is over), with its
        record, or to an outage longer than its lease (another replica's reader then
        takes the task for lost, once Redis answers, before the write gets through)."""
        assert run.record is not None  # (stored: the caller checked)
        created = run.record
        delay = 0.1
        while True:
            try:
                with anyio.CancelScope(shield=True):
                    final = await self.registry.change(run.id, run.apply_outcome)
            except StoreUnavailable:  # logged once by the store
                left = created.remaining(self.registry.clock())
                if left is not None and left <= 0:
                    return  # expired meanwhile: there is no record to write to
                await anyio.sleep(delay if left is None else min(delay, left))
                delay = min(2 * delay, self._settings.lease / 3)
                continue
            run.final_written = True
            # (apply_outcome leaves a terminal record; a loss a renewal found is said already)
            if final is not None and final.lost and not run.lost_said:
                run.lost_said = True
                logger.warning(
                    "task %s ended, but its outcome was not stored: the task had already "
                    "been failed as lost (its lease, %gs, ran out first)",
                    run.id,
                    self._settings.lease,
                )
            if final is not None:  # (done when stored: counted by its creator)
                self.kept(final, client)
            return

    # -- signals ----------------------------------------------------------------------

    def poke(self, task_id: str) -> None:
        """A record of ours changed (a cancel or answers recorded here): look at it now."""
        if task_id in self._runs and self._group is not None:
            self._group.start_soon(self._check, task_id)

    async def _check(self, task_id: str, *, renew: bool = False) -> None:
        run = self._runs.get(task_id)
        if run is None or run.record is None or run.done.is_set():
            return
        lease = self._settings.lease

        def extend(record: TaskRecord) -> bool:
            if record.terminal:
                return False
            record.lease = self.registry.clock() + lease
            return True

        if renew:
            record = await self.registry.change(task_id, extend)
        else:
            record = await self.registry.load(task_id)
        if run.done.is_set():
            return
        if record is None or record.terminal:
            if record is not None and record.lost and not run.lost_said:
                run.lost_said = True
                logger.warning(
                    "task %s failed as lost while this replica still ran it: its lease "
                    "(%gs) ran out before a renewal (the event loop blocked, or Redis slow, "
                    "for that long); its work is cancelled. `task_lease` (MCP_TASK_LEASE) sets it",
                    task_id,
                    lease,
                )
            run.cancel(CancelReason.TIMEOUT)  # its TTL ended (or it was given up as lost)
        elif record.cancel_requested:
            run.cancel(CancelReason.TASK_CANCELLED)
        else:
            run.wake()

    async def _listen(self) -> None:
        """Hear this replica's signals; a broken subscription is opened again."""
        while True:
            try:
                async with self.registry.store.subscribe(worker_channel(self.worker)) as messages:
                    async for data in messages:
                        await self._check(data.decode())
            except StoreUnavailable:  # logged once by the store
                pass
            except Exception:
                logger.warning("task signal channel failed; listening again", exc_info=True)
            await anyio.sleep(1.0)

    async def _renew(self) -> None:
        """Renew the leases of running tasks, and read their records, every lease/3."""
        while True:
            await anyio.sleep(self._settings.lease / 3)
            for task_id in list(self._runs):
                try:
                    await self._check(task_id, renew=True)
                except StoreUnavailable:  # logged once by the store: renewed next time
                    pass
                except Exception:
                    logger.warning("could not renew a task's lease", exc_info=True)

    # -- shutdown ---------------------------------------------------------------------

    async def shutdown(self) -> None:
        """Cancel every running task (`server_shutdown`) and wait, bounded by the cancel
        grace period, for their outcomes to be stored."""
        runs = list(self._runs.values())
        for run in runs:
            run.cancel(CancelReason.SERVER_SHUTDOWN)
        with anyio.move_on_after(self._runtime.cancel_grace + 1.0):
            for run in runs:
                await run.settled.wait()


async def _discard(message: Message) -> None:
    """A task's reply goes nowhere: its outcome is read from its scope."""


@plain  # anyio's sleep_forever: begun in the task's request task, finished anywhere
async def _never_disconnects() -> Message:
    """A task's `receive`: it has no connection, so nothing ever arrives."""
    await anyio.sleep_forever()
    raise AssertionError("unreachable")  # pragma: no cover
