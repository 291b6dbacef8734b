"""The servers the tests run against: a server for scripted clients, a server whose tools
end in every way a request can, the 2025-era server and its client, the subscriptions
server with routes that make changes happen, and real redis-server (alone, or three as a
Redis Cluster) and uvicorn worker processes."""

from __future__ import annotations

import itertools
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import anyio.from_thread
import anyio.lowlevel
import httpx
import pytest
import redis
from opentelemetry import baggage, trace
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from mcp_asgi import (
    CancelReason,
    CancelToken,
    Context,
    McpError,
    McpMiddleware,
    McpServer,
    McpSettings,
)
from mcp_asgi.bus import ChangeEvent, InProcessBus
from mcp_asgi.testing import McpResponse, McpStream, McpTestClient

from .helpers import Otel, Probe, Wiretap, mcp_app

ROOT = Path(__file__).resolve().parent.parent

# -- a server for scripted clients (no sockets) -------------------------------------------


class Seen:
    """What the scripted server's tools saw."""

    def __init__(self) -> None:
        self.started = anyio.Event()
        self.exited = anyio.Event()
        self.reason: CancelReason | None = None


def scripted_app(seen: Seen, otel: Otel | None = None, **settings: Any) -> McpMiddleware:
    """Tools that answer at once (`echo`, `echo_sync` in a worker thread), stream before
    answering (`progress`), or run until cancelled (`forever`, and `blocking` in a worker
    thread), telling `seen` when they start and why they stopped. Nothing but the MCP path
    is routed."""
    server = McpServer("scripted")

    @server.tool()
    async def echo(text: str) -> str:
        """Returns its input."""
        return text

    @server.tool()
    def echo_sync(text: str, token: CancelToken) -> str:
        """Returns its input from a worker thread."""
        token.raise_if_cancelled()
        return text

    @server.tool()
    async def progress(ctx: Context) -> str:
        """Streams a notification and lets the loop run before answering."""
        await ctx.report_progress(1)
        await anyio.lowlevel.checkpoint()
        return "done"

    @server.tool()
    async def forever(ctx: Context) -> str:
        """Reports progress, then waits until cancelled."""
        await ctx.report_progress(1)
        seen.started.set()
        try:
            await anyio.sleep_forever()
        finally:
            seen.reason = ctx.cancel_reason
            seen.exited.set()
        return "never"

    @server.tool()
    def blocking(token: CancelToken) -> str:
        """Waits in a worker thread until its token is cancelled."""
        anyio.from_thread.run_sync(seen.started.set)
        token.wait(30)
        seen.reason = token.reason
        return "stopped"

    async def not_found(scope: Any, receive: Any, send: Any) -> None:
        raise AssertionError("not routed here")

    return McpMiddleware(
        not_found,
        server=server,
        settings=McpSettings(**settings),
        tracer_provider=otel.tracer_provider if otel else None,
        meter_provider=otel.meter_provider if otel else None,
    )


# -- a server whose tools end in every way -------------------------------------------------


def outcomes_server(probe: Probe) -> McpServer:
    """Tools that answer, fail (as a result, a JSON-RPC error or an exception), wait to be
    cancelled, mark a side effect, time out, or linger in a thread as an orphan."""
    server = McpServer("telemetry", version="1.0.0")

    @server.tool()
    async def echo(text: str) -> str:
        """Returns its input."""
        return text

    @server.tool()
    async def broken() -> str:
        """Fails: the failure becomes an `isError` result."""
        raise ValueError("nope")

    @server.tool()
    async def quota() -> str:
        """Answers with an application JSON-RPC error."""
        raise McpError(1001, "quota exceeded")

    @server.tool()
    async def whoami() -> dict[str, str]:
        """The span and baggage the handler runs under."""
        context = trace.get_current_span().get_span_context()
        return {
            "trace_id": f"{context.trace_id:032x}",
            "span_id": f"{context.span_id:016x}",
            "tenant": str(baggage.get_baggage("tenant")),
        }

    @server.tool()
    async def slow(ctx: Context) -> str:
        """Waits until cancelled, after one progress notification."""
        probe.ctx = ctx
        with probe.running(ctx):
            await ctx.report_progress(1)
            await anyio.sleep(30)
        return "never"

    @server.tool()
    async def charge(ctx: Context) -> str:
        """Charges a card, then waits until cancelled."""
        ctx.side_effect("charge_card", idempotency_key="order-1")
        probe.started.set()
        await anyio.sleep(30)
        return "never"

    @server.tool(timeout=0.2)
    async def stuck() -> str:
        """Runs past its own timeout."""
        await anyio.sleep(30)
        return "never"

    @server.tool()
    def hog() -> str:
        """A thread that ignores its cancel token until released: an orphan."""
        probe.started.set()
        probe.release.wait(20)
        return "late"

    @server.resource("boom://{name}")
    async def boom(name: str) -> str:
        """Raises an unhandled exception."""
        raise RuntimeError(f"kaboom {name}")

    @server.resource("notes://{name}")
    async def note(name: str) -> str:
        """A resource that reads fine."""
        return f"note {name}"

    return server


# -- routes that make changes happen ---------------------------------------------------------


def change_routes(server: McpServer) -> list[Route]:
    """Plain routes of the host app that announce changes, add or remove a tool, and end
    the open subscriptions of `server`."""

    async def notify(request: Request) -> JSONResponse:
        """`?times=N`: N announcements, letting the loop run between them (a burst)."""
        kind = request.path_params["kind"]
        for _ in range(int(request.query_params.get("times", 1))):
            if kind == "tools":
                await server.notify_tools_changed()
            elif kind == "prompts":
                await server.notify_prompts_changed()
            elif kind == "resources":
                await server.notify_resources_changed()
            else:
                await server.notify_resource_updated(request.query_params["uri"])
            await anyio.lowlevel.checkpoint()
        return JSONResponse({})

    async def add_tool(request: Request) -> JSONResponse:
        async def added() -> str:
            """Added at runtime."""
            return "new"

        server.tool(name=request.path_params["name"])(added)
        return JSONResponse({})

    def remove_tool(request: Request) -> JSONResponse:  # a sync route: a worker thread
        server.remove_tool(request.path_params["name"])
        return JSONResponse({})

    async def close(request: Request) -> JSONResponse:
        return JSONResponse({"closed": await server.close_subscriptions()})

    return [
        Route("/notify/{kind}", notify, methods=["POST"]),
        Route("/tools/{name}", add_tool, methods=["PUT"]),
        Route("/tools/{name}", remove_tool, methods=["DELETE"]),
        Route("/close", close, methods=["POST"]),
    ]


def changing_app(server: McpServer, otel: Otel | None = None, **settings: Any) -> McpMiddleware:
    """`server` served at /mcp of a host app with the change routes."""
    return mcp_app(server, otel, routes=change_routes(server), **settings)


# -- subscriptions/listen ------------------------------------------------------------------

SUB_ID = "io.modelcontextprotocol/subscriptionId"
ALL = {
    "toolsListChanged": True,
    "promptsListChanged": True,
    "resourcesListChanged": True,
    "resourceSubscriptions": ["res://a"],
}


class WatchedBus(InProcessBus):
    """An in-process bus that tells other threads when subscribers come and go."""

    def __init__(self) -> None:
        super().__init__()
        self.joined = threading.Event()
        self.empty = threading.Event()

    @asynccontextmanager
    async def subscribe(self) -> AsyncIterator[AsyncIterator[ChangeEvent]]:
        try:
            async with super().subscribe() as events:
                self.empty.clear()
                self.joined.set()
                yield events
        finally:
            if self.subscriber_count == 0:
                self.empty.set()


def listen_server(bus: InProcessBus | None = None) -> McpServer:
    """A server with one tool, one prompt, one resource and one template."""
    server = McpServer("listen", bus=bus)

    @server.tool()
    async def echo(text: str) -> str:
        """Echo."""
        return text

    @server.prompt()
    def greet(name: str) -> str:
        """Greet."""
        return f"hi {name}"

    @server.resource("res://a")
    def res_a() -> str:
        """A."""
        return "a"

    @server.resource("res://notes/{note}")
    def note(note: str) -> str:
        """A note."""
        return note

    return server


# -- the 2025 era --------------------------------------------------------------------------

LATEST = "2025-11-25"
MODERN = "2026-07-28"  # the era after it, as the SDK client's `mode` names it


def legacy_server(probe: Probe) -> McpServer:
    """A server a 2025-era client can use; its `slow` tool records what it saw in `probe`."""
    server = McpServer("legacy", version="1.2.3", title="Legacy test server")

    @server.tool()
    async def add(a: int, b: int) -> int:
        """Adds two numbers."""
        return a + b

    @server.tool()
    async def slow(ctx: Context) -> str:
        """Reports progress, then waits until released or cancelled."""
        with probe.running(ctx):
            await ctx.report_progress(1, 2, "started")
            while not probe.release.is_set():  # noqa: ASYNC110 (set by the test's thread)
                await anyio.sleep(0.01)
            probe.notes.append("finished")
            return "released"

    @server.tool()
    async def chatty(ctx: Context) -> str:
        """Logs at info and at debug."""
        await ctx.log("info", "shown at info")
        await ctx.log("debug", "shown at debug")
        return "said"

    @server.resource("docs://readme", mime_type="text/plain")
    async def readme() -> str:
        """The read-me."""
        return "read me"

    @server.prompt()
    async def greet(name: str) -> str:
        """Greets someone."""
        return f"Hello {name}!"

    return server


def legacy_app(probe: Probe, otel: Otel | None = None, **settings: Any) -> McpMiddleware:
    """The 2025-era server behind McpMiddleware, plus the routes that announce changes."""
    return changing_app(legacy_server(probe), otel, **settings)


class LegacyClient(McpTestClient):
    """A 2025-era client: `initialize`, then requests carrying `Mcp-Session-Id` and
    `MCP-Protocol-Version`, with no `_meta` envelope."""

    def __init__(self, url: str, *, version: str = LATEST) -> None:
        super().__init__(url)
        self.version = version
        self.session_id: str | None = None
        self._legacy_ids = itertools.count(1)

    def body(
        self,
        method: str,
        params: Mapping[str, Any] | None = None,
        *,
        id: int | str | None = None,
        progress: bool = False,
    ) -> dict[str, Any]:
        request_id = next(self._legacy_ids) if id is None else id
        body_params = dict(params or {})
        if progress:
            body_params["_meta"] = {"progressToken": f"p-{request_id}"}
        return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": body_params}

    def session_headers(self) -> dict[str, str]:
        headers = {
            "content-type": "application/json",
            "accept": "application/json, text/event-stream",
            "mcp-protocol-version": self.version,
        }
        if self.session_id is not None:
            headers["mcp-session-id"] = self.session_id
        return headers

    async def initialize(self, version: str | None = None) -> McpResponse:
        """Open a session; keep its id; send `notifications/initialized`."""
        body = self.body(
            "initialize",
            {
                "protocolVersion": version or self.version,
                "capabilities": {},
                "clientInfo": {"name": "legacy-test", "version": "1"},
            },
        )
        headers = {"content-type": "application/json", "accept": "application/json"}
        response = await self.post(body, headers)
        assert response.status == 200, response.raw
        self.session_id = response.headers["mcp-session-id"]
        self.version = response.final["result"]["protocolVersion"]
        notified = await self.notify("notifications/initialized")
        assert notified.status == 202
        return response

    async def call(self, method: str, params: Mapping[str, Any] | None = None) -> McpResponse:
        return await self.post(self.body(method, params), self.session_headers())

    async def notify(self, method: str, params: Mapping[str, Any] | None = None) -> McpResponse:
        body = {"jsonrpc": "2.0", "method": method, "params": dict(params or {})}
        return await self.post(body, self.session_headers())

    async def delete(self) -> McpResponse:
        return await self.post(b"", self.session_headers(), http_method="DELETE")

    @asynccontextmanager
    async def open(
        self, method: str, params: Mapping[str, Any] | None = None, **options: Any
    ) -> AsyncIterator[McpStream]:
        """A request whose response is read message by message."""
        body = self.body(method, params, **options)
        async with self._open(body, self.session_headers(), "POST") as stream:
            yield stream

    @asynccontextmanager
    async def get_stream(self) -> AsyncIterator[McpStream]:
        """The session's GET stream, once its head has arrived (it is then subscribed)."""
        headers = {**self.session_headers(), "accept": "text/event-stream"}
        del headers["content-type"]
        async with self._open(b"", headers, "GET") as stream:
            await stream.read_head()
            yield stream


def check_aborted_slow_call(probe: Probe, wiretap: Wiretap) -> list[str]:
    """After a 2025-era client aborted its `slow` call: the handler stopped on the client's
    notification before finishing, the call's response carried progress and nothing else
    (no result, no error), and the session began with the handshake and told the server of
    the cancel. Returns what each exchange was, for the client's own checks."""
    assert probe.reason is CancelReason.CLIENT_NOTIFICATION
    assert probe.notes == []
    (slow,) = [
        e
        for e in wiretap.calls("tools/call")
        if e.message and e.message["params"]["name"] == "slow"
    ]
    assert slow.replies
    assert all(m.get("method") == "notifications/progress" for m in slow.replies)
    methods = wiretap.methods()
    assert methods[:2] == ["initialize", "notifications/initialized"]
    assert "notifications/cancelled" in methods
    return methods


# -- real processes: redis-server and uvicorn workers ----------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def free_cluster_port() -> int:
    """A free port whose cluster bus port (10000 above) is free too."""
    while True:
        port = free_port()
        if port + 10000 <= 65535:
            with socket.socket() as sock:
                try:
                    sock.bind(("127.0.0.1", port + 10000))
                except OSError:
                    continue
            return port


def wait_ready(predicate: Callable[[], bool], what: str, timeout: float = 15) -> None:
    """Poll `predicate()` (errors count as "not yet") until it is true: readiness, never a
    timing assertion. Blocking: for fixtures and worker threads."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            if predicate():
                return
        except Exception:
            pass
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not happen")
        time.sleep(0.02)


def redis_executable() -> str:
    """redis-server's path; the test skipped (outside CI only) when it is not installed."""
    executable = shutil.which("redis-server")
    if executable is None:
        if os.environ.get("CI"):
            pytest.fail("redis-server is not installed (make test installs it)")
        pytest.skip(
            "redis-server is not installed: run `make test` or apt-get install redis-server"
        )
    return executable


class RedisServer:
    """redis-server on a free loopback port; `stop()` and `start()` again on the same port."""

    def __init__(
        self, executable: str, workdir: Path, *options: str, port: int | None = None
    ) -> None:
        """`options`: more redis-server command-line options; `port`: a free one by
        default."""
        self.executable = executable
        self.workdir = workdir
        self.options = options
        self.port = port or free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self._process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self._process = subprocess.Popen(
            [
                self.executable,
                *self.options,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(self.workdir),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_ready(self.ping, "redis-server start")

    def ping(self) -> bool:
        with redis.Redis.from_url(self.url, socket_timeout=1) as client:
            return bool(client.ping())

    def subscribers(self, channel: str) -> int:
        with redis.Redis.from_url(self.url, socket_timeout=1) as client:
            counts = dict(client.pubsub_numsub(channel))
            return int(counts.get(channel.encode(), 0))

    def stop(self) -> None:
        if self._process is not None:
            self._process.kill()
            self._process.wait(10)
            self._process = None

    def pause(self) -> None:
        """SIGSTOP: connections are still accepted, nothing is answered."""
        assert self._process is not None
        self._process.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        """SIGCONT after `pause`."""
        assert self._process is not None
        self._process.send_signal(signal.SIGCONT)


class RedisCluster:
    """A Redis Cluster of three masters (no replicas) on free loopback ports: each a
    redis-server with `--cluster-enabled yes`, the slots split by `redis-cli --cluster
    create`. `url` is the `redis+cluster://` URL of the first node."""

    def __init__(self, executable: str, workdir: Path, masters: int = 3) -> None:
        # a long node timeout: a node paused for a few seconds is not voted failed
        options = ("--cluster-enabled", "yes", "--cluster-node-timeout", "30000")
        self.nodes = [
            RedisServer(executable, workdir / f"node{i}", *options, port=free_cluster_port())
            for i in range(masters)
        ]
        self.url = f"redis+cluster://127.0.0.1:{self.nodes[0].port}"

    def start(self) -> None:
        for node in self.nodes:
            node.workdir.mkdir(parents=True, exist_ok=True)
            node.start()
        subprocess.run(
            ["redis-cli", "--cluster", "create"]
            + [f"127.0.0.1:{node.port}" for node in self.nodes]
            + ["--cluster-yes"],
            check=True,
            stdout=subprocess.DEVNULL,
            timeout=30,
        )
        wait_ready(self.ok, "cluster_state:ok on every node")

    def ok(self) -> bool:
        """Whether every node says the cluster is up, all slots covered."""
        for node in self.nodes:
            with redis.Redis(port=node.port, socket_timeout=1) as client:
                if client.cluster("info").get("cluster_state") != "ok":
                    return False
        return True

    def owner(self, channel: str) -> RedisServer:
        """The master that owns the hash slot of `channel` (or of a key)."""
        with redis.Redis(port=self.nodes[0].port, socket_timeout=1) as client:
            slot = int(client.cluster("keyslot", channel))
            for start, end, (_, port, *_), *_ in client.cluster("slots"):
                if start <= slot <= end:
                    return next(node for node in self.nodes if node.port == port)
        raise AssertionError(f"no node owns slot {slot}")

    def move(self, name: str, to: RedisServer) -> None:
        """Give the (empty) hash slot of `name` to the master `to`, as a resharding ends:
        `CLUSTER SETSLOT … NODE` on every master."""
        with redis.Redis(port=to.port, socket_timeout=1) as client:
            node_id, slot = client.cluster("myid"), client.cluster("keyslot", name)
        for node in self.nodes:
            with redis.Redis(port=node.port, socket_timeout=1) as client:
                client.execute_command("CLUSTER", "SETSLOT", slot, "NODE", node_id)
        wait_ready(lambda: self.owner(name) is to, "the slot moved")

    def keys(self, pattern: str) -> list[tuple[str, int]]:
        """The keys matching `pattern` on every master, with their hash slots."""
        found = []
        for node in self.nodes:
            with redis.Redis(port=node.port, socket_timeout=1) as client:
                for key in client.scan_iter(match=pattern):
                    found.append((key.decode(), int(client.cluster("keyslot", key))))
        return found

    def subscribers(self, channel: str) -> int:
        """Subscribers of the shard channel `channel` (SSUBSCRIBE) on its owner."""
        with redis.Redis(port=self.owner(channel).port, socket_timeout=1) as client:
            counts = client.execute_command("PUBSUB", "SHARDNUMSUB", channel)
            return int(counts[1])

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()


class Worker:
    """`uvicorn tests.redis_app:app` (or `app`) in its own process, sharing the bus and
    store through Redis."""

    def __init__(
        self,
        redis_url: str,
        channel: str,
        app: str = "tests.redis_app:app",
        settings: Mapping[str, str] | None = None,
        log: Path | None = None,
        port: int | None = None,
    ) -> None:
        """`settings`: more MCP_* environment variables for the worker; `log`: a file its
        stderr goes to; `port`: the one to listen on (a free one by default; a restarted
        replica takes its old one again)."""
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = dict(os.environ, MCP_BUS_URL=redis_url, MCP_BUS_CHANNEL=channel, **(settings or {}))
        stderr = log.open("ab") if log is not None else None
        self._process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "uvicorn",
                app,
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--log-level",
                "warning",
                "--timeout-graceful-shutdown",
                "1",
                "--http",
                "h11",
                "--loop",
                "asyncio",
            ],
            cwd=ROOT,
            env=env,
            stderr=stderr,
        )
        if stderr is not None:
            stderr.close()  # the worker has its own copy
        try:  # generous: on a loaded machine the imports alone can take seconds
            wait_ready(self.healthy, f"worker on port {self.port}", timeout=60)
        except BaseException:
            self.stop()  # never left running
            raise

    @property
    def pid(self) -> int:
        return self._process.pid

    def healthy(self) -> bool:
        assert self._process.poll() is None, "worker exited"
        return httpx.get(self.url + "/", timeout=1).status_code == 200

    def stop(self) -> None:
        self._process.terminate()
        try:
            self._process.wait(10)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait(10)
