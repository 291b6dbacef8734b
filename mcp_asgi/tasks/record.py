"""`TaskRecord`: a task's state as the store keeps it, and its shapes on the wire.

    working ──► input_required ⇄ working ──► completed | failed | cancelled (terminal)

A record is JSON bytes under `task:<id>`, expiring when its TTL (from creation) ends. Every
change is a compare-and-set of the whole record (`registry.TaskRegistry.change`), so a
replica never overwrites what another wrote in between, and a terminal record never
changes again. Times are wall-clock seconds (every replica reads them).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from typing import Any, Final

from mcp_asgi.protocol.jsonrpc import JsonObject

TERMINAL: Final = frozenset({"completed", "failed", "cancelled"})
LOST: Final = "worker_lost"
"""The `data.reason` of a task failed because its lease ran out."""


@dataclass(slots=True)
class TaskRecord:
    """One task: who owns it, where it runs, how far it got."""

    id: str
    owner: str | None
    """A digest of the principal that created it (None without authentication)."""
    tool: str
    status: str
    created: float
    updated: float
    ttl: float | None
    """Seconds from `created` the task is kept (None: unlimited)."""
    poll_interval_ms: int
    worker: str
    """The replica running it (its signal channel)."""
    lease: float
    """Until when the worker's claim holds; renewed while the work runs."""
    status_message: str | None = None
    cancel_requested: bool = False
    input_requests: dict[str, Any] = field(default_factory=dict)
    """The questions waiting for an answer, by key."""
    answers: dict[str, Any] = field(default_factory=dict)
    """Answers delivered by `tasks/update` that the handler has not taken yet."""
    asked: list[str] = field(default_factory=list)
    """Every key ever asked: a key is never reused in a task's life."""
    result: JsonObject | None = None
    error: JsonObject | None = None
    result_bytes: int = 0
    """JSON bytes of `result` or `error` (what `tasks/get` serves besides the task)."""

    @property
    def terminal(self) -> bool:
        """Whether the task has ended (its status never changes again)."""
        return self.status in TERMINAL

    @property
    def lost(self) -> bool:
        """Whether it failed because its lease ran out (its replica seemed gone). A
        handler's own error may carry any JSON as `data`: only an object is looked into."""
        data = None if self.error is None else self.error.get("data")
        return isinstance(data, dict) and data.get("reason") == LOST

    def remaining(self, now: float) -> float | None:
        """Seconds until the TTL ends (may be 0 or less), or None for unlimited."""
        return None if self.ttl is None else self.created + self.ttl - now

    def to_bytes(self) -> bytes:
        return json.dumps(asdict(self), separators=(",", ":")).encode()

    @classmethod
    def from_bytes(cls, raw: bytes) -> TaskRecord:
        return cls(**json.loads(raw))

    # -- the wire --------------------------------------------------------------------

    def task(self) -> JsonObject:
        """The `Task` fields (`CreateTaskResult` is these plus `resultType: "task"`)."""
        shape: JsonObject = {
            "taskId": self.id,
            "status": self.status,
            "createdAt": iso(self.created),
            "lastUpdatedAt": iso(self.updated),
            "ttlMs": None if self.ttl is None else max(1, round(self.ttl * 1000)),
            "pollIntervalMs": self.poll_interval_ms,
        }
        if self.status_message is not None:
            shape["statusMessage"] = self.status_message
        return shape

    def detailed(self) -> JsonObject:
        """The `DetailedTask` `tasks/get` returns: the questions while `input_required`,
        the result once `completed`, the error once `failed`."""
        shape = self.task()
        if self.status == "input_required":
            shape["inputRequests"] = dict(self.input_requests)
        elif self.status == "completed" and self.result is not None:
            shape["result"] = self.result
        elif self.status == "failed":
            shape["error"] = self.error or {"code": -32603, "message": "Task failed"}
        return shape


def iso(seconds: float) -> str:
    """An ISO 8601 UTC timestamp with milliseconds, e.g. `2026-07-28T10:30:00.000Z`."""
    moment = datetime.fromtimestamp(seconds, tz=timezone.utc)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")
