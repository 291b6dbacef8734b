"""Tasks against the plain-call path, on one uvicorn worker (issue 17).

    python -m bench.tasks            # 5 s per measure
    python -m bench.tasks --quick    # 1 s per measure

Measures, with `--concurrency` clients on keep-alive connections to one uvicorn worker
(h11, asyncio) serving mcp_asgi with its in-memory store:

    plain tools/call     a tool with task="never" (the reference)
    tasks created        tools/call of a task="required" tool that returns at once: the
                         work starts under the supervisor, its record is stored, then
                         CreateTaskResult
    tasks/get            reads of one stored task

and prints requests per second for each, and the ratio to the plain call. A development
measure, not a timed test: nothing asserts on it.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import time
from typing import Any

import httpx
from starlette.applications import Starlette

from mcp_asgi import McpMiddleware, McpServer, McpSettings
from mcp_asgi.testing import PROTOCOL_VERSION, serve

TASKS = {"extensions": {"io.modelcontextprotocol/tasks": {}}}


def app() -> McpMiddleware:
    server = McpServer("bench-tasks")

    @server.tool()
    async def plain() -> str:
        """The reference"""
        return "done"

    @server.tool(task="required")
    async def task() -> str:
        """A task that is done at once"""
        return "done"

    settings = McpSettings(rate_limit=None, max_requests_per_client=None)
    return McpMiddleware(Starlette(), server=server, settings=settings)


def body(method: str, params: dict[str, Any], ids: itertools.count[int]) -> dict[str, Any]:
    meta = {
        "io.modelcontextprotocol/protocolVersion": PROTOCOL_VERSION,
        "io.modelcontextprotocol/clientCapabilities": TASKS,
    }
    return {
        "jsonrpc": "2.0",
        "id": next(ids),
        "method": method,
        "params": {**params, "_meta": meta},
    }


def headers(method: str, name: str) -> dict[str, str]:
    return {
        "content-type": "application/json",
        "accept": "application/json, text/event-stream",
        "mcp-protocol-version": PROTOCOL_VERSION,
        "mcp-method": method,
        "mcp-name": name,
    }


async def measure(
    url: str, method: str, params: dict[str, Any], name: str, seconds: float, concurrency: int
) -> float:
    """Requests per second over `seconds`, `concurrency` clients at once."""
    ids = itertools.count(1)
    done = 0
    stop = time.perf_counter() + seconds

    async def client() -> None:
        nonlocal done
        async with httpx.AsyncClient(timeout=30) as http:
            while time.perf_counter() < stop:
                reply = await http.post(
                    url, json=body(method, params, ids), headers=headers(method, name)
                )
                assert reply.status_code == 200, reply.text
                done += 1

    started = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(concurrency)))
    return done / (time.perf_counter() - started)


async def run(url: str, seconds: float, concurrency: int) -> dict[str, float]:
    async with httpx.AsyncClient() as http:
        ids = itertools.count(10_000_000)
        created = await http.post(
            url,
            json=body("tools/call", {"name": "task", "arguments": {}}, ids),
            headers=headers("tools/call", "task"),
        )
        task_id = created.json()["result"]["taskId"]
    call = {"name": "plain", "arguments": {}}
    create = {"name": "task", "arguments": {}}
    return {
        "plain tools/call": await measure(url, "tools/call", call, "plain", seconds, concurrency),
        "tasks created": await measure(url, "tools/call", create, "task", seconds, concurrency),
        "tasks/get": await measure(
            url, "tasks/get", {"taskId": task_id}, task_id, seconds, concurrency
        ),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="1 s per measure")
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--concurrency", type=int, default=8)
    options = parser.parse_args()
    seconds = 1.0 if options.quick else options.seconds
    with serve(app(), timeout_graceful_shutdown=1) as live:
        rates = asyncio.run(run(live.url + "/mcp", seconds, options.concurrency))
    reference = rates["plain tools/call"]
    print(f"tasks on one uvicorn worker, {options.concurrency} clients, {seconds:g} s each")
    for name, rate in rates.items():
        print(f"  {name:18} {rate:9.0f} req/s   {rate / reference:5.2f}x the plain call")
    print(json.dumps({k: round(v) for k, v in rates.items()}))


if __name__ == "__main__":
    main()
