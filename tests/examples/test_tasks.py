"""examples/tasks on uvicorn, driven by the official MCP Python SDK client with the
example's Tasks extension (examples/tasks/client.py): a report built as a task is polled to
its result, outlives the connection that created it, and stops on tasks/cancel; a quick
optional task answers plainly; a client without the extension is refused."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from examples.tasks.client import CreateTaskResult, Tasks, cancel_task, get_task, wait_for_task
from examples.tasks.main import app
from mcp_asgi.testing import serve

from ..servers import MODERN


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    with serve(app) as server:
        yield server.url + "/mcp"


def tasks_client(url: str) -> Client:
    return Client(url, mode=MODERN, extensions=[Tasks()])


async def test_a_task_is_polled_to_its_result(url: str) -> None:
    async with tasks_client(url) as client:
        report = await client.call_tool("build_report", {"month": "2026-11", "pages": 2})
        quick = await client.call_tool("word_count", {"text": "one two three"})
    assert report.structured_content == {
        "month": "2026-11",
        "pages": 2,
        "summary": "2026-11: 2 pages, all green",
    }
    assert quick.structured_content == {"result": 3}


async def test_a_task_outlives_its_creators_connection(url: str) -> None:
    async with tasks_client(url) as creator:
        created = await creator.session.call_tool(
            "build_report", {"month": "2026-10", "pages": 2}, allow_claimed=True
        )
    assert isinstance(created, CreateTaskResult)
    async with tasks_client(url) as later:
        report = await wait_for_task(later.session, created.task_id)
    assert report.structured_content is not None
    assert report.structured_content["month"] == "2026-10"


async def test_tasks_cancel_stops_the_work(url: str) -> None:
    async with tasks_client(url) as client:
        created = await client.session.call_tool(
            "build_report", {"month": "2026-09", "pages": 100}, allow_claimed=True
        )
        assert isinstance(created, CreateTaskResult)
        await cancel_task(client.session, created.task_id)
        with pytest.raises(MCPError, match="cancelled"):
            await wait_for_task(client.session, created.task_id)
        assert (await get_task(client.session, created.task_id)).status == "cancelled"


async def test_a_client_without_the_extension_is_refused(url: str) -> None:
    async with Client(url, mode=MODERN) as client:
        with pytest.raises(MCPError) as refused:
            await client.call_tool("build_report", {"month": "2026-11"})
    assert refused.value.error.code == -32021
