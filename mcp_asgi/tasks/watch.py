"""`TaskWatch`: which tasks a `subscriptions/listen` stream may watch, and what it sends.

A listener watches only its own tasks (the owner rule of `tasks/get`: an unknown, expired
or another principal's id is not accepted, and not echoed). A status notification is the
`DetailedTask` `tasks/get` answers, read from the registry when the bus event is taken, so
the event carries only the id and the notification the latest status.
"""

from __future__ import annotations

from mcp_asgi._loggers import tasks_logger as logger
from mcp_asgi.protocol.jsonrpc import JsonObject
from mcp_asgi.store import StoreUnavailable
from mcp_asgi.tasks.registry import TaskRegistry


class TaskWatch:
    """The tasks of `owner` (a principal's digest, or None without authentication)."""

    def __init__(self, registry: TaskRegistry, owner: str | None) -> None:
        self._registry = registry
        self._owner = owner

    async def accept(self, task_ids: tuple[str, ...]) -> tuple[str, ...]:
        """The ids of `task_ids` that are the owner's tasks."""
        return tuple([i for i in task_ids if await self._registry.find(i, self._owner)])

    async def detailed(self, task_id: str) -> JsonObject | None:
        """The task's DetailedTask; None when it is gone or the store is out of reach (the
        outage is logged once, by the store)."""
        try:
            record = await self._registry.load(task_id)
        except StoreUnavailable:
            return None
        except Exception:
            logger.warning("could not read a watched task", exc_info=True)
            return None
        return None if record is None else record.detailed()
