"""Long work as tasks: a report service whose `build_report` runs on after its caller has
gone, and is polled for its result (docs/tasks.md).

Run it from the repository root, then run the client beside it:

    uvicorn examples.tasks.main:app --host 127.0.0.1 --port 8000
    python -m examples.tasks.client http://127.0.0.1:8000/mcp

`build_report` is always a task (`task="required"`): `tools/call` answers at once with a
task id, the work goes on outside the request, and the client polls `tasks/get` until the
report is ready (or stops it with `tasks/cancel`). A client that drops its connection, or
restarts, comes back with the id. `word_count` is a task only when it takes longer than the
result window (`task="optional"`): a short text answers plainly.

Tasks live in this process's memory: with several workers or replicas, give them a shared
store (`MCP_BUS_URL=redis://...`, docs/deployment.md).
"""

from __future__ import annotations

import anyio
from fastapi import FastAPI
from pydantic import BaseModel

from mcp_asgi import Context, McpMiddleware, McpServer, McpSettings

SECONDS_PER_PAGE = 0.2


class Report(BaseModel):
    month: str
    pages: int
    summary: str


mcp = McpServer("reports", version="1.0.0", instructions="Build monthly reports.")


@mcp.tool(task="required")
async def build_report(month: str, ctx: Context, pages: int = 3) -> Report:
    """Build the monthly report, a page at a time (a task: poll it for the result).

    Args:
        month: the month to report on, e.g. 2026-11.
        pages: how many pages to write.
    """
    for _ in range(pages):
        await anyio.sleep(SECONDS_PER_PAGE)  # a tasks/cancel (or the deadline) stops it here
    return Report(month=month, pages=pages, summary=f"{month}: {pages} pages, all green")


@mcp.tool(task="optional")
async def word_count(text: str) -> int:
    """Count the words of a text: a plain answer when quick, a task when not."""
    await anyio.sleep(len(text) / 1_000_000)  # a stand-in for slow work on a long text
    return len(text.split())


settings = McpSettings(
    task_poll_interval=0.5,  # the pollIntervalMs clients are told
    max_task_duration=600,  # a report still running after 10 minutes is cancelled (failed)
)
app = FastAPI(title="Reports")
app.add_middleware(McpMiddleware, server=mcp, settings=settings)
