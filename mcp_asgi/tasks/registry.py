"""`TaskRegistry`: the tasks of every replica, in the shared-state store.

    create   set_if(task:<id>, expected=None): durable before the CreateTaskResult
    find     get; a record whose lease ran out while it was running ends `failed` here
    change   get ─► edit ─► set_if(expected=what was read), again until it holds
    on_status  called with a task's id once a write changed its status (or created it):
             the server's bus tells the listen streams watching it, on every replica
    signal   publish on the worker's channel (task-worker:<worker>): a hint only — the
             worker re-reads the record at every lease renewal, so a lost one costs a delay

Every write keeps the record's expiry at `created + ttl`: a task and its result are kept
until the TTL ends, never earlier, and removed after.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Final

from mcp_asgi._loggers import tasks_logger as logger
from mcp_asgi.protocol.jsonrpc import INTERNAL_ERROR
from mcp_asgi.store import StateStore
from mcp_asgi.tasks.record import LOST, TaskRecord

_ATTEMPTS: Final = 50  # compare-and-set retries before giving up (contention is rare)
_LOST_MESSAGE: Final = "Task failed: the server running it stopped (its lease ran out)"
WORKER_LOST: Final = {
    "code": INTERNAL_ERROR,
    "message": _LOST_MESSAGE,
    "data": {"reason": LOST},
}


def worker_channel(worker: str) -> str:
    """The channel a replica hears its tasks' cancels and answers on."""
    return f"task-worker:{worker}"


class TaskRegistry:
    """Reads and changes task records in `store`; `clock` is wall-clock seconds;
    `on_status(task_id)` hears every status a write gives a task."""

    def __init__(
        self,
        store: StateStore,
        *,
        clock: Callable[[], float] = time.time,
        on_status: Callable[[str], None] | None = None,
    ) -> None:
        self.store = store
        self.clock = clock
        self.on_status = on_status

    def _status_changed(self, task_id: str) -> None:
        if self.on_status is not None:
            self.on_status(task_id)

    async def create(self, record: TaskRecord) -> bool:
        """Store a new task (False if its id is taken, or its TTL already ended)."""
        ttl = record.remaining(self.clock())
        if ttl is not None and ttl <= 0:
            return False
        created = await self.store.set_if(
            _key(record.id), record.to_bytes(), expected=None, ttl=ttl
        )
        if created:
            self._status_changed(record.id)
        return created

    async def load(self, task_id: str) -> TaskRecord | None:
        """The record as stored, or None (unknown, or past its TTL)."""
        raw = await self.store.get(_key(task_id))
        return None if raw is None else TaskRecord.from_bytes(raw)

    async def find(self, task_id: str, owner: str | None) -> TaskRecord | None:
        """The task `owner` may see: None when unknown, expired or another principal's (the
        same answer, so a task's existence is never revealed). A running task whose lease
        ran out becomes `failed` (its replica died) as it is read."""
        record = await self.load(task_id)
        if record is None or record.owner != owner:
            return None
        now = self.clock()
        if not record.terminal and record.lease < now:
            return await self.change(task_id, lambda r: _lose(r, now))
        return record

    async def change(self, task_id: str, edit: Callable[[TaskRecord], bool]) -> TaskRecord | None:
        """Apply `edit` (it changes the record and says whether to write it) atomically;
        the record as it is afterwards, or None when it is gone. `lastUpdatedAt` moves only
        when the status changes."""
        key = _key(task_id)
        for _ in range(_ATTEMPTS):
            raw = await self.store.get(key)
            if raw is None:
                return None
            record = TaskRecord.from_bytes(raw)
            status = record.status
            if not edit(record):
                return record
            now = self.clock()
            if record.status != status:
                record.updated = now
            ttl = record.remaining(now)
            if ttl is not None and ttl <= 0:
                await self.store.delete(key)
                return None
            if await self.store.set_if(key, record.to_bytes(), expected=raw, ttl=ttl):
                if record.status != status:
                    self._status_changed(task_id)
                return record
        raise RuntimeError(f"task record kept changing under {_ATTEMPTS} writes")

    async def signal(self, record: TaskRecord) -> None:
        """Wake the replica running `record` (a cancel or answers were recorded). Never
        raises: the replica re-reads the store at its next lease renewal anyway."""
        try:
            await self.store.publish(worker_channel(record.worker), record.id.encode())
        except Exception:
            logger.warning(
                "could not signal a task's replica; it sees the change at its next renewal",
                exc_info=True,
            )


def _key(task_id: str) -> str:
    return f"task:{task_id}"


def _lose(record: TaskRecord, now: float) -> bool:
    """A running task whose lease ended before `now` fails: its worker is gone."""
    if record.terminal or record.lease >= now:
        return False
    record.status = "failed"
    record.status_message = _LOST_MESSAGE
    record.error = dict(WORKER_LOST)
    record.input_requests = {}
    return True
