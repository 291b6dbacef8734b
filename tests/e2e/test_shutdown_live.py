"""Shutdown in every way the docs offer, on real server processes stopped by real signals.

Each test starts `tests/e2e/shutdown_app.py` in a server process on 127.0.0.1, opens calls
that are still running (an async handler on an SSE stream, a worker thread in JSON mode),
signals the process, and checks the three views of the shutdown:

- the client's: the JSON-RPC error with reason `server_shutdown` (on the SSE stream after
  its progress event, then the end of the stream);
- the handler's: it saw the reason (`ctx.cancel_reason`, its thread's token) when its
  cancellation reached it;
- the operator's: the span (exported by the lifespan's provider shutdown) and the log
  record, with outcome `exited` and the cancel latency.

Where the library cannot see the shutdown (`--lifespan off`, a `Mount` without
`mounted_lifespan`) it says so once, at the first request.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from mcp_asgi.testing import McpTestClient

from ..servers import ROOT, free_port, wait_ready

MODULE = "tests.e2e.shutdown_app"


class ServerProcess:
    """A server command on a free port, its output and what the app wrote under `out`."""

    def __init__(self, argv: list[str], port: int, out: Path, prefix: str = "") -> None:
        self.port = port
        self.out = out
        self.url = f"http://127.0.0.1:{port}{prefix}/mcp"
        env = {**os.environ, "SHUTDOWN_OUT": str(out), "PYTHONUNBUFFERED": "1"}
        self.stderr = (out / "stderr.txt").open("wb")
        self.process = subprocess.Popen(
            argv, cwd=ROOT, env=env, stdout=self.stderr, stderr=self.stderr
        )
        wait_ready(self._healthy, " ".join(argv[2:4]))

    def _healthy(self) -> bool:
        assert self.process.poll() is None, self.output()
        try:
            return httpx.get(f"http://127.0.0.1:{self.port}/", timeout=1).status_code > 0
        except httpx.HTTPError:
            return False

    def stop(self, sig: signal.Signals) -> int:
        self.process.send_signal(sig)
        return self.process.wait(20)

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)
        self.stderr.close()

    def output(self) -> str:
        return (self.out / "stderr.txt").read_text(errors="replace")

    def lines(self, name: str) -> list[dict[str, Any]]:
        path = self.out / name
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text().splitlines()]

    def started(self, tool: str) -> bool:
        return any(e == {"tool": tool, "event": "started"} for e in self.lines("handlers.jsonl"))


def uvicorn(target: str, port: int, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "uvicorn",
        f"{MODULE}:{target}",
        *("--host", "127.0.0.1", "--port", str(port), "--log-level", "warning"),
        *("--http", "h11", "--loop", "asyncio", "--timeout-graceful-shutdown", "1"),
        *extra,
    ]


def gunicorn(port: int) -> list[str]:
    return [
        sys.executable,
        "-m",
        "gunicorn",
        f"{MODULE}:app",
        *("--bind", f"127.0.0.1:{port}", "--workers", "1", "--log-level", "warning"),
        *("--worker-class", f"{MODULE}.GracefulWorker", "--graceful-timeout", "8"),
    ]


@pytest.fixture
def server(tmp_path: Path) -> Iterator[list[ServerProcess]]:
    started: list[ServerProcess] = []
    yield started
    for process in started:
        process.kill()


async def calls_in_flight(process: ServerProcess, sig: signal.Signals) -> dict[str, Any]:
    """Open an SSE call (read up to its progress event) and a JSON call on a worker thread,
    signal the server, and return what each client received."""
    client = McpTestClient(process.url)
    seen: dict[str, Any] = {}

    async def json_call() -> None:
        body = client.build("tools/call", {"name": "threaded"})
        reply = await client.post(body, {**client.headers_for(body), "accept": "application/json"})
        seen["json"] = (reply.status, reply.final)

    with anyio.fail_after(25):
        async with (
            client.stream("tools/call", {"name": "slow"}, progress=True) as stream,
            anyio.create_task_group() as tg,
        ):
            first = await stream.next_message()
            assert first is not None
            assert first["method"] == "notifications/progress"
            tg.start_soon(json_call)
            while not process.started("threaded"):  # noqa: ASYNC110 - another process
                await anyio.sleep(0.02)
            seen["returncode"] = await anyio.to_thread.run_sync(process.stop, sig)
            seen["sse"] = await stream.next_message()
            seen["sse_end"] = await stream.next_message()
    return seen


def check_shutdown(process: ServerProcess, seen: dict[str, Any], *, spans: bool = True) -> None:
    """The client, handler, span and log views of a shutdown that cancelled both calls."""
    shutdown = {"reason": "server_shutdown"}
    assert seen["sse"]["error"]["data"] == shutdown, process.output()
    assert seen["sse_end"] is None  # the stream ended after the error event
    _, final = seen["json"]
    assert final["error"]["data"] == shutdown
    exits = {e["tool"]: e["reason"] for e in process.lines("handlers.jsonl") if "reason" in e}
    assert exits == {"slow": "server_shutdown", "threaded": "server_shutdown"}
    records = [r for r in process.lines("log.jsonl") if r["logger"] == "mcp_asgi.cancellation"]
    assert {r["tool"]: r["outcome"] for r in records} == {"slow": "exited", "threaded": "exited"}
    assert {r["reason"] for r in records} == {"server_shutdown"}
    assert all(r["latency"] is not None and r["latency"] >= 0 for r in records)
    if spans:
        by_name = {s["name"]: s["attributes"] for s in process.lines("spans.jsonl")}
        for name in ("tools/call slow", "tools/call threaded"):
            attributes = by_name[name]
            assert attributes["mcp_asgi.cancellation.reason"] == "server_shutdown"
            assert attributes["mcp_asgi.cancellation.outcome"] == "exited"
            assert attributes["mcp_asgi.cancellation.latency"] >= 0
            assert attributes["error.type"] == "server_shutdown"


def warnings_of(process: ServerProcess) -> list[str]:
    return [
        r["message"]
        for r in process.lines("log.jsonl")
        if r["logger"] == "mcp_asgi" and r["level"] == "WARNING"
    ]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
async def test_add_middleware_with_lifespan(
    server: list[ServerProcess], tmp_path: Path, sig: signal.Signals
) -> None:
    """uvicorn with `--timeout-graceful-shutdown`, SIGTERM or SIGINT: both calls get the
    shutdown error, their handlers saw the reason, the spans reach the exporter (flushed by
    the app's lifespan) and the log records say `exited` with a latency."""
    port = free_port()
    server.append(process := ServerProcess(uvicorn("app", port), port, tmp_path))
    seen = await calls_in_flight(process, sig)
    check_shutdown(process, seen)
    assert warnings_of(process) == []


async def test_mounted_with_mounted_lifespan(server: list[ServerProcess], tmp_path: Path) -> None:
    """A `Mount`ed app whose outer app runs `lifespan=mounted_lifespan(inner)`: shutdown is
    handled as for `add_middleware`, and nothing warns."""
    port = free_port()
    argv = uvicorn("mounted", port)
    server.append(process := ServerProcess(argv, port, tmp_path, prefix="/notes-api"))
    seen = await calls_in_flight(process, signal.SIGTERM)
    check_shutdown(process, seen)
    assert warnings_of(process) == []


async def test_gunicorn_uvicorn_worker(server: list[ServerProcess], tmp_path: Path) -> None:
    """gunicorn with the `uvicorn-worker` package's worker given a graceful timeout below
    gunicorn's `--graceful-timeout` (docs/deployment.md): SIGTERM to the master."""
    port = free_port()
    server.append(process := ServerProcess(gunicorn(port), port, tmp_path))
    seen = await calls_in_flight(process, signal.SIGTERM)
    check_shutdown(process, seen)


async def test_an_app_that_ignores_lifespan_is_stood_in_for(
    server: list[ServerProcess], tmp_path: Path
) -> None:
    """`McpMiddleware(app)` around an app that ignores lifespan events: the middleware
    answers the lifespan itself, so shutdown still cancels with `server_shutdown`."""
    port = free_port()
    server.append(process := ServerProcess(uvicorn("bare", port), port, tmp_path))
    seen = await calls_in_flight(process, signal.SIGTERM)
    check_shutdown(process, seen, spans=False)  # this app never shuts its provider down
    assert warnings_of(process) == []


@pytest.mark.parametrize(
    ("target", "extra", "prefix"),
    [("app", ("--lifespan", "off"), ""), ("mounted_unfixed", (), "/notes-api")],
    ids=["lifespan-off", "mount-without-mounted-lifespan"],
)
async def test_unseen_shutdown_warns_once(
    server: list[ServerProcess], tmp_path: Path, target: str, extra: tuple[str, ...], prefix: str
) -> None:
    """Where the middleware gets no lifespan startup it cannot see a shutdown: the first
    request logs one WARNING naming the fix, later requests none."""
    port = free_port()
    argv = uvicorn(target, port, *extra)
    server.append(process := ServerProcess(argv, port, tmp_path, prefix=prefix))
    client = McpTestClient(process.url)
    for _ in range(3):
        reply = await client.request("tools/list")
        assert reply.status == 200
    [warning] = warnings_of(process)
    assert "without a lifespan startup" in warning
    assert "mounted_lifespan" in warning
