"""`TaskRun`: one task-capable call's work in this process, from its start to its end.

    started      the handler runs under its own RequestScope, owned by the supervisor
    promoted     the call became a task: its record is (being) stored, the work goes on
                 whatever happens to the request that created it
    done         the handler exited (or was given up as an orphan); its outcome is read
                 from the scope's record

Before promotion a question the handler asks is an ordinary input_required round of its
request; after it, the task goes `input_required` and the handler waits where it asked
(`ask`) until `tasks/update` delivers the answer, on any replica.
"""

from __future__ import annotations

import json
from typing import Any, NamedTuple

from mcp_asgi.lifecycle.cancel import CancelReason
from mcp_asgi.lifecycle.lazy_event import LazyEvent
from mcp_asgi.lifecycle.scope import RequestScope
from mcp_asgi.protocol.jsonrpc import INTERNAL_ERROR, JsonObject
from mcp_asgi.protocol.request import McpRequest
from mcp_asgi.tasks.record import TaskRecord
from mcp_asgi.tasks.registry import TaskRegistry
from mcp_asgi.telemetry.task_telemetry import TaskTelemetry


class Outcome(NamedTuple):
    """How the work ended, as its record keeps it."""

    status: str
    result: JsonObject | None
    error: JsonObject | None
    message: str | None
    size: int
    """JSON bytes of the result or error kept (what `tasks/get` serves besides the task)."""


class TaskRun:
    """The work of one task-capable call in this process."""

    def __init__(
        self,
        task_id: str,
        request: McpRequest,
        scope: RequestScope,
        registry: TaskRegistry,
        *,
        max_result_bytes: int,
        telemetry: TaskTelemetry | None = None,
    ) -> None:
        self.id = task_id
        self.request = request
        self.scope = scope
        self.registry = registry
        self.promoted = False
        """The call became a task (set once, before its record is written)."""
        self.record: TaskRecord | None = None
        """The record as first stored (None until then, or if storing failed)."""
        self.final_written = False
        self.lost_said = False
        """A WARNING has said that the task was failed as lost (one line for one loss)."""
        # one-shot events made lazily: most are never waited for, and a task lives long
        self.done = LazyEvent()
        """The handler exited (or was given up as an orphan)."""
        self.settled = LazyEvent()
        """Its outcome is stored (or could not be): this process is done with it."""
        self.stored = LazyEvent()
        """Promotion is over: the record is stored (`record` set) or could not be."""
        self.decide = LazyEvent()
        """The creating request should answer now: the work is done, or asked to be a task
        (`ctx.start_task()`)."""
        self._wake = LazyEvent()
        self._asked: set[str] = set()
        self._telemetry = telemetry
        self._max_result_bytes = max_result_bytes
        self._outcome: Outcome | None = None

    # -- signals from the supervisor -------------------------------------------------

    def wake(self) -> None:
        """The record may have changed (answers delivered): a waiting `ask` looks again."""
        self._wake.set()
        self._wake = LazyEvent()

    def cancel(self, reason: CancelReason) -> None:
        """Cancel the work through its scope (the same machinery as every request)."""
        self.scope.cancel(reason)

    async def start_task(self) -> bool:
        """`ctx.start_task()`: become a task now; whether the task was stored."""
        if not self.promoted:
            self.decide.set()
        await self.stored.wait()
        return self.record is not None

    def mark_stored(self, record: TaskRecord | None) -> None:
        """Promotion is over: `record` stored (a task from now on), or None (it could not)."""
        self.record = record
        self.stored.set()
        if record is not None and self._telemetry is not None:
            self._telemetry.promoted()

    def status_changed(self, status: str) -> None:
        """The task took `status` while its work runs (a span event)."""
        if self._telemetry is not None:
            self._telemetry.status(status)

    # -- asking the client, once a task ---------------------------------------------

    async def ask(self, key: str, question: JsonObject) -> Any:
        """Put `question` on the task under `key` (status `input_required`) and wait for
        its answer; the answer as the client sent it."""
        if key in self._asked:
            raise ValueError(f"input key {key!r} was already asked in this task")
        self._asked.add(key)
        await self.stored.wait()

        def add(record: TaskRecord) -> bool:
            if record.terminal:
                return False
            record.input_requests[key] = question
            record.asked.append(key)
            record.status = "input_required"
            return True

        record = await self.registry.change(self.id, add)
        if record is not None and record.status == "input_required":
            self.status_changed("input_required")
        taken: list[Any] = []

        def take(record: TaskRecord) -> bool:
            if key not in record.answers:
                return False
            taken.append(record.answers.pop(key))
            return True

        while True:
            wake = self._wake
            if record is not None and key in record.answers:
                record = await self.registry.change(self.id, take)
                if taken:
                    if record is not None and record.status == "working":
                        self.status_changed("working")
                    return taken[0]
            await wake.wait()  # the supervisor wakes us on a signal and at each renewal
            record = await self.registry.load(self.id)

    # -- the outcome -----------------------------------------------------------------

    def outcome(self) -> Outcome:
        """How the finished work ended; a result or error over `max_task_result_bytes` is
        not kept: the task fails saying so."""
        if self._outcome is None:
            status, result, error, message = self._ended()
            kept = result if result is not None else error
            size = 0 if kept is None else len(json.dumps(kept, separators=(",", ":")))
            if size > self._max_result_bytes:
                what = "result" if result is not None else "error"
                error = _too_large(what, size, self._max_result_bytes)
                status, result, message, size = "failed", None, error["message"], 0
            self._outcome = Outcome(status, result, error, message, size)
        return self._outcome

    def _ended(self) -> tuple[str, JsonObject | None, JsonObject | None, str | None]:
        """(status, result, error, status message) of the finished work."""
        done = self.scope.record()
        reason = done.reason
        if reason is CancelReason.TASK_CANCELLED:
            return "cancelled", None, None, "Cancelled by tasks/cancel"
        if reason is not None:
            error = done.error.to_error() if done.error is not None else None
            error = error or {
                "code": INTERNAL_ERROR,
                "message": f"Task cancelled: {reason.value}",
                "data": {"reason": reason.value},
            }
            return "failed", None, error, str(error["message"])
        if done.error is not None:
            return "failed", None, done.error.to_error(), done.error.message
        if done.result is not None:
            return "completed", done.result, None, None
        error = {"code": INTERNAL_ERROR, "message": "Internal error"}
        return "failed", None, error, "Internal error"

    def apply_outcome(self, record: TaskRecord) -> bool:
        """Write the finished work's outcome into `record` (an edit for `change`); a
        terminal record is left as it is."""
        if record.terminal:
            return False
        outcome = self.outcome()
        record.status, record.result, record.error = outcome.status, outcome.result, outcome.error
        record.status_message = outcome.message
        record.result_bytes = outcome.size
        record.input_requests = {}
        record.answers = {}
        return True


def _too_large(what: str, size: int, limit: int) -> JsonObject:
    """The error of a task whose result (or error) is too large to keep."""
    return {
        "code": INTERNAL_ERROR,
        "message": f"Task failed: its {what} is {size} bytes of JSON, more than the server "
        f"keeps (max_task_result_bytes = {limit})",
        "data": {"reason": "result_too_large", "limit": "max_task_result_bytes", "bytes": size},
    }
