"""examples/replicas as two uvicorn processes sharing a real redis-server, driven by the
official MCP Python SDK client with the Tasks extension of examples/tasks/client.py: a task
started on one replica is polled to its result on the other, and cancelled from the other."""

from __future__ import annotations

import shutil
from collections.abc import Iterator

import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from examples.tasks.client import CreateTaskResult, Tasks, cancel_task, get_task, wait_for_task

from ..servers import MODERN, RedisServer, Worker

SETTINGS = {"MCP_REQUEST_STATE_KEY": "every-replica-shares-this-secret", "MCP_TASK_LEASE": "1.5"}


@pytest.fixture(scope="module")
def replicas(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """The /mcp URLs of two replicas sharing one redis-server."""
    executable = shutil.which("redis-server")
    if executable is None:
        pytest.skip("redis-server is not installed: run `make test`")
    redis_server = RedisServer(executable, tmp_path_factory.mktemp("redis"))
    redis_server.start()
    workers: list[Worker] = []
    try:
        for _ in range(2):
            app = "examples.replicas.main:app"
            workers.append(Worker(redis_server.url, "examples:changes", app, SETTINGS))
        yield workers[0].url + "/mcp", workers[1].url + "/mcp"
    finally:
        for worker in workers:
            worker.stop()
        redis_server.stop()


def client(url: str) -> Client:
    return Client(url, mode=MODERN, extensions=[Tasks()], cache=None)


async def start(url: str, documents: int) -> CreateTaskResult:
    async with client(url) as on_a:
        created = await on_a.session.call_tool(
            "reindex", {"index": "books", "documents": documents}, allow_claimed=True
        )
        assert isinstance(created, CreateTaskResult)
        return created


async def replica(url: str) -> str:
    async with client(url) as c:
        answer = await c.call_tool("replica", {})
    return str(answer.content[0].model_dump()["text"])


async def test_a_task_started_on_one_replica_is_polled_on_the_other(
    replicas: tuple[str, str],
) -> None:
    a, b = replicas
    assert await replica(a) != await replica(b)
    created = await start(a, documents=2)
    async with client(b) as on_b:
        done = await wait_for_task(on_b.session, created.task_id)
    assert done.structured_content == {
        "index": "books",
        "documents": 2,
        "replica": await replica(a),
    }


async def test_a_task_is_cancelled_from_the_other_replica(replicas: tuple[str, str]) -> None:
    a, b = replicas
    created = await start(a, documents=100)
    async with client(b) as on_b:
        await cancel_task(on_b.session, created.task_id)
        with pytest.raises(MCPError, match="cancelled"):
            await wait_for_task(on_b.session, created.task_id)
    async with client(a) as on_a:
        assert (await get_task(on_a.session, created.task_id)).status == "cancelled"
