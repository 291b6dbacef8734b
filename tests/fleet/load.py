"""The load the fleet serves while it restarts: official SDK clients in a loop, each call
retried on a retryable answer, every attempt's outcome and time kept in a `Tally`.

Outcomes: `ok`; `unavailable` (503 with Retry-After: refused before any work began; the SDK
turns its body into an error saying "Service Unavailable");
`server_shutdown` (the JSON-RPC error a call cut by the shutdown ends with);
`store_unavailable` (the shared store did not answer within `redis_timeout`: the -32603
error saying "retry shortly", with nothing done; seen when Redis stalls for a moment on
the loaded 2-core machine during a restart); `hang` (no answer within HANG seconds);
anything else is kept as its exception's text."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import anyio
from mcp import Client
from mcp.client.subscriptions import SubscriptionLost
from mcp.shared.exceptions import MCPError

from mcp_asgi.testing import McpTestClient

from ..servers import MODERN
from ..tasks.apps import TASKS

HANG = 20.0
"""Seconds after which an attempt counts as hung (the longest call takes 2.5 s)."""
RETRYABLE = {"unavailable", "server_shutdown", "store_unavailable"}
ATTEMPTS = 6


class Unavailable(Exception):
    """A 503 with Retry-After, as the raw client (tasks) saw it."""


@dataclass
class Call:
    """One logical call: its client, what it called, when it started and ended (time.time()),
    and its attempts' outcomes."""

    client: str
    what: str
    started: float
    ended: float
    outcomes: list[str]

    @property
    def ok(self) -> bool:
        return self.outcomes[-1] == "ok"


@dataclass
class Tally:
    """What the load saw."""

    calls: list[Call] = field(default_factory=list)
    progress: int = 0
    listens: Counter[str] = field(default_factory=Counter)
    tasks: dict[str, dict[str, Any]] = field(default_factory=dict)


def kind(error: BaseException) -> str:
    """The outcome an exception from an SDK call stands for."""
    data = error.data if isinstance(error, MCPError) else None
    if isinstance(data, dict) and data.get("reason") == "server_shutdown":
        if str(error).startswith("Service Unavailable"):
            return "unavailable"  # the draining replica's 503, as the SDK reports it
        return "server_shutdown" if getattr(error, "code", None) == -32603 else f"other: {data}"
    if isinstance(data, dict) and data.get("reason") == "store_unavailable":
        return "store_unavailable"
    if isinstance(error, Unavailable):
        return "unavailable"
    if isinstance(error, MCPError):
        return f"other: MCPError {error.code}: {error} {error.data}"
    return f"other: {type(error).__name__}: {error}"


async def call(tally: Tally, client: str, what: str, attempt: Callable[[], Awaitable[Any]]) -> None:
    """One logical call: `attempt()` until it succeeds, fails for good, or ATTEMPTS ran."""
    outcomes: list[str] = []
    started = time.time()
    while len(outcomes) < ATTEMPTS:
        try:
            with anyio.fail_after(HANG):
                await attempt()
            outcome = "ok"
        except TimeoutError:
            outcome = "hang"
        except Exception as error:
            outcome = kind(error)
        outcomes.append(outcome)
        if outcome not in RETRYABLE:
            break
        await anyio.sleep(0.1)
    tally.calls.append(Call(client, what, started, time.time(), outcomes))


async def sdk_calls(url: str, mode: str, name: str, tally: Tally, stop: anyio.Event) -> None:
    """The Python SDK in `mode` (2026-07-28, or a 2025-era session kept for the whole run):
    an echo, a call streaming 3 progress notifications, and every fourth call one streaming
    for 2.5 s (longer than the graceful timeout: a SIGTERM cuts it)."""

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        tally.progress += 1

    async with Client(url + "/mcp", mode=mode, cache=None) as client:
        n = 0
        while not stop.is_set():
            n += 1
            steps, delay = (10, 0.25) if n % 4 == 0 else (3, 0.05)
            what = "paced-long" if n % 4 == 0 else "paced"
            echo = partial(client.call_tool, "echo", {"text": f"{name}-{n}"})
            await call(tally, name, "echo", echo)
            arguments = {"steps": steps, "delay": delay}
            paced = partial(client.call_tool, "paced", arguments, progress_callback=on_progress)
            await call(tally, name, what, paced)


async def listener(url: str, tally: Tally, stop: anyio.Event) -> None:
    """The Python SDK listening for tools changes; when a stream ends, it listens again."""
    async with Client(url + "/mcp", mode=MODERN, cache=None) as client:
        while not stop.is_set():
            try:
                async with client.listen(tools_list_changed=True) as subscription:
                    tally.listens["opened"] += 1
                    async for _ in subscription:
                        tally.listens["events"] += 1
                tally.listens["ended gracefully"] += 1
            except SubscriptionLost as error:
                tally.listens[f"lost: {error}"] += 1
            except Exception as error:
                outcome = kind(error)
                tally.listens[f"refused: {outcome}"] += 1
                if outcome not in RETRYABLE:
                    return
                await anyio.sleep(0.1)


async def tasks(url: str, tally: Tally, stop: anyio.Event) -> None:
    """Task-capable calls (1 s of work, run as tasks), each polled through the balancer
    until it ends; the last status seen is kept by task id."""
    mcp = McpTestClient(url + "/mcp", capabilities=TASKS)
    n = 0
    while not stop.is_set():
        n += 1
        task_id = ""

        async def start(label: str = f"t{n}") -> None:
            nonlocal task_id
            response = await mcp.request(
                "tools/call", {"name": "sleepy", "arguments": {"seconds": 1.0, "label": label}}
            )
            task_id = _result(response.status, response.headers, response.final)["taskId"]

        await call(tally, "tasks", "task-start", start)
        if not task_id:
            continue
        while True:
            task: dict[str, Any] = {}

            async def get(task_id: str = task_id, task: dict[str, Any] = task) -> None:
                response = await mcp.request("tasks/get", {"taskId": task_id})
                task.update(_result(response.status, response.headers, response.final))

            await call(tally, "tasks", "task-get", get)
            tally.tasks[task_id] = task
            if task.get("status") not in ("working", None):
                break
            await anyio.sleep(0.2)


def _result(status: int, headers: dict[str, str], final: dict[str, Any]) -> dict[str, Any]:
    """A raw JSON-RPC response's result, or the exception an SDK would have raised."""
    if status == 503 and "retry-after" in headers:
        raise Unavailable(final)
    if "error" in final:
        error = final["error"]
        raise MCPError(error["code"], error["message"], error.get("data"))
    return dict(final["result"])
