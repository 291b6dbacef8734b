"""A client for the Tasks extension on the official MCP Python SDK (`mcp` 2.x), which has
none built in: a `ClientExtension` that declares `io.modelcontextprotocol/tasks` and claims
the `task` result of `tools/call`, so `client.call_tool` polls `tasks/get` and returns the
tool's result as for a plain call.

    async with Client(url, extensions=[Tasks()]) as client:
        result = await client.call_tool("build_report", {"month": "2026-11"})

Run `python -m examples.tasks.client http://127.0.0.1:8000/mcp` against examples.tasks.main.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any, Literal

import anyio
from mcp import Client, types
from mcp.client import ClaimContext, ClientExtension, ClientSession, ResultClaim
from mcp.shared.exceptions import MCPError

TASKS = "io.modelcontextprotocol/tasks"
ENDED = ("completed", "failed", "cancelled")


class CreateTaskResult(types.Result):
    """A `tools/call` answered with a task."""

    result_type: Literal["task"]
    task_id: str
    status: str
    poll_interval_ms: int | None = None


class Task(types.Result):
    """`tasks/get`: the task's state, with its `result` once completed."""

    task_id: str
    status: str
    status_message: str | None = None
    poll_interval_ms: int | None = None
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None


class TaskParams(types.RequestParams):
    task_id: str


class TaskRequest(types.Request[TaskParams, str]):
    """`tasks/get` or `tasks/cancel`; the task id goes in the `Mcp-Name` header too."""

    name_param = "taskId"


async def get_task(session: ClientSession, task_id: str) -> Task:
    """`tasks/get`: the task as it is now."""
    request = TaskRequest(method="tasks/get", params=TaskParams(task_id=task_id))
    return await session.send_request(request, Task)


async def cancel_task(session: ClientSession, task_id: str) -> None:
    """`tasks/cancel`: the server cancels the task's work; the task ends `cancelled`."""
    request = TaskRequest(method="tasks/cancel", params=TaskParams(task_id=task_id))
    await session.send_request(request, types.Result)


async def wait_for_task(session: ClientSession, task_id: str) -> types.CallToolResult:
    """Poll until the task has ended: its tool result; MCPError if it failed or was
    cancelled. Works from any connection (and, with Redis, on any replica)."""
    while True:
        task = await get_task(session, task_id)
        if task.status == "completed" and task.result is not None:
            return types.CallToolResult.model_validate(task.result)
        if task.status in ENDED:
            error = task.error or {"code": -32603, "message": f"the task was {task.status}"}
            raise MCPError(error["code"], error["message"], error.get("data"))
        await anyio.sleep((task.poll_interval_ms or 1000) / 1000)


class Tasks(ClientExtension):
    """Declares the Tasks extension; a tool call answered with a task is polled to its end.

    Questions a task asks (`input_required`) are not answered here: the task waits for a
    `tasks/update` (docs/tasks.md).
    """

    identifier = TASKS

    def claims(self) -> Sequence[ResultClaim[Any]]:
        return [ResultClaim(result_type="task", model=CreateTaskResult, resolve=self.resolve)]

    async def resolve(self, created: CreateTaskResult, ctx: ClaimContext) -> types.CallToolResult:
        return await wait_for_task(ctx.session, created.task_id)


async def main(url: str) -> None:
    async with Client(url, extensions=[Tasks()]) as client:
        report = await client.call_tool("build_report", {"month": "2026-11", "pages": 5})
        print(report.structured_content)


if __name__ == "__main__":
    anyio.run(main, sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:8000/mcp")
