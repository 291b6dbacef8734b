"""The task server the tests run: in process (`task_app`, with what each handler saw) and in
uvicorn worker processes (`from_env`: its settings from MCP_* variables, e.g. the Redis
store), and a client for the Tasks extension's methods."""

from __future__ import annotations

import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import anyio
from starlette.applications import Starlette
from starlette.authentication import AuthCredentials, AuthenticationBackend, BaseUser, SimpleUser
from starlette.middleware.authentication import AuthenticationMiddleware
from starlette.requests import HTTPConnection, Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from mcp_asgi import CancelReason, CancelToken, Context, McpMiddleware, McpServer, McpSettings
from mcp_asgi.testing import McpTestClient

from ..helpers import Otel

TASKS: dict[str, Any] = {"extensions": {"io.modelcontextprotocol/tasks": {}}}
"""The client capabilities of a request that declares the Tasks extension."""

CONFIRM = {"type": "object", "properties": {"confirm": {"type": "boolean"}}}


@dataclass
class Seen:
    """What the handlers saw, by label: that they started, and the reason they were
    cancelled with (None: they finished)."""

    reasons: dict[str, CancelReason | None] = field(default_factory=dict)
    started: dict[str, threading.Event] = field(default_factory=dict)

    def start(self, label: str) -> None:
        self.started.setdefault(label, threading.Event()).set()

    def event(self, label: str) -> threading.Event:
        """Set once the handler labelled `label` has started (on the server's thread)."""
        return self.started.setdefault(label, threading.Event())


def task_server(seen: Seen | None = None) -> McpServer:
    """Tools that run as tasks: async, in a thread, in a subprocess, asking the user."""
    seen = seen or Seen()
    server = McpServer("tasks-test")

    @server.tool(task="optional")
    async def sleepy(seconds: float, label: str, ctx: Context) -> str:
        """Sleeps, on the event loop"""
        seen.start(label)
        try:
            await anyio.sleep(seconds)
        finally:
            seen.reasons[label] = ctx.cancel_reason
        return f"{label} slept {seconds:g}s"

    @server.tool(task="optional")
    def threaded(seconds: float, label: str, token: CancelToken) -> str:
        """Waits on its cancel token, in a worker thread"""
        seen.start(label)
        token.wait(seconds)
        seen.reasons[label] = token.reason
        token.raise_if_cancelled()
        return f"{label} waited {seconds:g}s"

    @server.tool(task="optional")
    async def process(seconds: float, label: str, ctx: Context) -> str:
        """Sleeps in a subprocess (its process group is stopped on cancel)"""
        seen.start(label)
        try:
            await ctx.run_process([sys.executable, "-c", f"import time; time.sleep({seconds})"])
        finally:
            seen.reasons[label] = ctx.cancel_reason
        return f"{label} ran {seconds:g}s"

    @server.tool(task="required")
    async def confirm(label: str, ctx: Context) -> str:
        """A task that asks for a confirmation, then another"""
        await ctx.start_task()
        first = await ctx.elicit("Sure?", CONFIRM, key="first")
        second = await ctx.elicit("Really sure?", CONFIRM, key="second")
        return f"{label}: {first.action}, {second.action}"

    @server.tool(task="required")
    async def gated(label: str, ctx: Context) -> str:
        """A task that asks to go on, then waits until the test opens `seen.event(label)`"""
        await ctx.start_task()
        answer = await ctx.elicit("Go on?", CONFIRM, key="go")
        gate = seen.event(label)  # the test opens it, from its own thread
        await anyio.to_thread.run_sync(gate.wait, abandon_on_cancel=True)
        return f"{label}: {answer.action}"

    @server.tool(task="optional")
    async def sample_later(ctx: Context) -> str:
        """Asks for a sampling the creating request did not declare"""
        await ctx.start_task()
        await ctx.sample("hello", max_tokens=5)
        return "sampled"

    @server.tool(task="required")
    def big(size: int) -> str:
        """A result of `size` characters (done at once: the task is stored with it)"""
        return "x" * size

    @server.tool()
    def now() -> float:
        """A plain tool"""
        return time.time()

    return server


def task_app(seen: Seen | None = None, otel: Otel | None = None, **settings: Any) -> McpMiddleware:
    """The task server behind the middleware, with `settings` (McpSettings fields) and
    the in-memory telemetry pipeline `otel`."""
    return McpMiddleware(
        Starlette(routes=[Route("/", _ok)]),
        server=task_server(seen),
        settings=McpSettings(**settings),
        tracer_provider=otel.tracer_provider if otel else None,
        meter_provider=otel.meter_provider if otel else None,
    )


class HeaderAuth(AuthenticationBackend):
    """The host app's authentication: `x-user: name`."""

    async def authenticate(self, conn: HTTPConnection) -> tuple[AuthCredentials, BaseUser] | None:
        name = conn.headers.get("x-user")
        return (AuthCredentials([]), SimpleUser(name)) if name else None


def with_users(mcp: McpMiddleware) -> AuthenticationMiddleware:
    """The host's authentication in front of the MCP endpoint (it sets scope["user"] from
    `x-user`; the middleware must trust it: `auth_host_identity=True`)."""
    return AuthenticationMiddleware(mcp, backend=HeaderAuth())


async def _ok(request: Request) -> PlainTextResponse:
    return PlainTextResponse("ok")


def from_env() -> McpMiddleware:
    """The worker processes' app (tests/tasks/worker_app.py): settings from MCP_*."""
    return McpMiddleware(Starlette(routes=[Route("/", _ok)]), server=task_server())


class TaskClient:
    """A 2026-07-28 client that declares the Tasks extension on every request."""

    def __init__(self, url: str, user: str | None = None, **capabilities: Any) -> None:
        """`user`: who the client is, for `with_users` (an `x-user` header)."""
        self.mcp = McpTestClient(url + "/mcp", capabilities={**TASKS, **capabilities})
        if user is not None:
            self.mcp.extra_headers["x-user"] = user

    async def call(self, name: str, **arguments: Any) -> dict[str, Any]:
        """`tools/call`: its result (a CreateTaskResult, or a plain result)."""
        return await self.mcp.call_tool(name, arguments)

    async def start(self, name: str, **arguments: Any) -> str:
        """`tools/call` that must create a task: its id."""
        result = await self.call(name, **arguments)
        assert result["resultType"] == "task", result
        return str(result["taskId"])

    async def rpc(self, method: str, task_id: str, **params: Any) -> dict[str, Any]:
        """A `tasks/*` request: its whole response message."""
        response = await self.mcp.request(method, {"taskId": task_id, **params})
        return response.final

    async def get(self, task_id: str) -> dict[str, Any]:
        final = await self.rpc("tasks/get", task_id)
        assert "result" in final, final
        return dict(final["result"])

    async def until_asked(self, task_id: str, key: str, limit: float = 10.0) -> dict[str, Any]:
        """Poll `tasks/get` until the task asks the question `key`."""
        with anyio.fail_after(limit):
            while True:
                task = await self.get(task_id)
                if key in task.get("inputRequests", {}):
                    return task
                await anyio.sleep(0.05)

    async def until(self, task_id: str, *statuses: str, limit: float = 15.0) -> dict[str, Any]:
        """Poll `tasks/get` until the status is one of `statuses` (readiness, not timing)."""
        with anyio.fail_after(limit):
            while True:
                task = await self.get(task_id)
                if task["status"] in statuses:
                    return task
                await anyio.sleep(0.05)
