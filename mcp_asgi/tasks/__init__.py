"""The Tasks extension (`io.modelcontextprotocol/tasks`): work that outlives its request.

    record       TaskRecord: a task's state, its wire shapes (Task, DetailedTask)
    registry     TaskRegistry: the records in the shared-state store (CAS, leases, signals)
    run          TaskRun: one call's work in this process, its questions, its outcome
    input        TaskInput: ctx.elicit & co. — an MRTR round before the task, a wait after
    supervisor   TaskSupervisor: runs the work outside any HTTP request; leases, signals,
                 shutdown; warns at start-up of tasks in memory on one of several workers
    workers      several_workers: whether this process looks like one of several workers
    methods      TaskMethods: tools/call of task-capable tools, tasks/get|update|cancel
    capacity     KeptBytes: the bytes ended tasks keep until their TTL; server_busy (503)
    watch        TaskWatch: the tasks a subscriptions/listen stream watches, and what it sends

Owns tasks: their records, their work's scopes, their cancellation (`task_cancelled`).
Sits beside `mcp_asgi.inflight` (the endpoint and the middleware use it); imports the
layers below (settings, server, input, store, telemetry, lifecycle, http, protocol),
never the endpoints, legacy, inflight or the middleware.
"""

from mcp_asgi.tasks.methods import TaskMethods, declares_tasks
from mcp_asgi.tasks.record import TaskRecord
from mcp_asgi.tasks.registry import TaskRegistry
from mcp_asgi.tasks.supervisor import TaskSupervisor

__all__ = [
    "TaskMethods",
    "TaskRecord",
    "TaskRegistry",
    "TaskSupervisor",
    "declares_tasks",
]
