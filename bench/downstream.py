"""Downstream MCP servers (issue 19): what a proxied call adds, and how fast a cancel
reaches the downstream, each beside its floor in the same run.

    python -m bench.downstream            # 300 calls and 40 cancels per path
    python -m bench.downstream --quick    # 60 calls and 10 cancels

The downstream is the reference server `@modelcontextprotocol/server-everything` under
tests/downstream/node/tap.mjs (`npm ci --prefix tests/downstream/node`), which records,
on CLOCK_MONOTONIC (Python's `time.monotonic()`), when its SDK receives each
`notifications/cancelled`. The gateway is mcp_asgi on uvicorn (h11, asyncio) in a process
of its own, mounting server-everything over stdio (its child) and over Streamable HTTP (a
2025-era session to a server-everything process). Every path is visited in turn, round
after round, so drifts of machine load spread over all of them.

Latency of one `echo` call, sequential, p50/p99 (ms):

    direct        this process calls server-everything over stdio through `Downstream`
                  (the official SDK client): the floor of the downstream call itself
    direct-http   ... over Streamable HTTP (the same server-everything process the
                  gateway uses, a session of its own)
    gateway-own   a client (one connection per call) to the gateway's own echo tool: the
                  floor of the upstream HTTP hop
    gateway-stdio the same client, the gateway forwarding to server-everything over stdio
    gateway-http  ... over Streamable HTTP

    added by the gateway = gateway-stdio - gateway-own, to set against direct (and
                           gateway-http - gateway-own against direct-http)

Cancel propagation, p50/p99 (ms), from the cancel to server-everything receiving
`notifications/cancelled` for its request:

    direct        this process cancels its own `Downstream.call_tool` (the floor)
    gateway-stdio the upstream client closes its socket mid-call; the gateway's
                  watcher sees it, cancels the handler, the SDK client sends the cancel
    gateway-http  ... to the Streamable HTTP downstream (a POST of notifications/cancelled)

A development measure, not a timed test: nothing asserts on it. Results in
bench/results/downstream[-quick]-<stamp>.json and .md.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import anyio

from mcp_asgi import McpMiddleware, McpServer, McpSettings
from mcp_asgi.downstream import Downstream, DownstreamTools
from mcp_asgi.testing import McpTestClient

ROOT = Path(__file__).resolve().parent.parent
NODE_DIR = ROOT / "tests" / "downstream" / "node"
TAP = NODE_DIR / "tap.mjs"
RESULTS = Path(__file__).resolve().parent / "results"
LONG = "trigger-long-running-operation"


def stdio_downstream(tap: str) -> Downstream:
    env = {"PATH": os.environ["PATH"]}
    argv = [str(TAP), "stdio", tap, "exit-on-eof"]
    return Downstream.stdio("stdio", "node", argv, env=env, cwd=str(NODE_DIR))


def gateway_app() -> McpMiddleware:
    """The gateway (`uvicorn --factory bench.downstream:gateway_app`): its own echo, and
    server-everything's echo and long-running tool over stdio and over HTTP."""
    server = McpServer("bench-gateway")

    @server.tool()
    async def echo(message: str) -> str:
        """The gateway's own echo."""
        return message

    include = ["echo", LONG]
    server.add_source(DownstreamTools(stdio_downstream(os.environ["BENCH_TAP"]), include=include))
    http = Downstream.http("http", os.environ["BENCH_HTTP_URL"])
    server.add_source(DownstreamTools(http, include=include))
    settings = McpSettings(rate_limit=None, max_requests_per_client=None)
    return McpMiddleware(_host(), server=server, settings=settings)


def _host() -> Any:
    from starlette.applications import Starlette

    return Starlette()


def spawn(argv: list[str], env: dict[str, str], cwd: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        argv, cwd=cwd, env={**os.environ, **env}, stdout=subprocess.DEVNULL, stderr=None
    )


def stop(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    process.wait(15)


def wait_port(port: int, limit: float = 30.0) -> None:
    import socket

    stop = time.monotonic() + limit
    while time.monotonic() < stop:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listens on {port}")


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def records(tap: Path, event: str) -> list[dict[str, Any]]:
    if not tap.exists():
        return []
    lines = (json.loads(line) for line in tap.read_text().splitlines() if line.strip())
    return [line for line in lines if line["event"] == event]


async def cancelled_at(tap: Path, before: int) -> float:
    """The tap's time of the first cancel recorded after the `before`-th."""
    with anyio.fail_after(10):
        while len(found := records(tap, "cancelled")) <= before:  # noqa: ASYNC110 - a file
            await anyio.sleep(0.002)
    return float(found[before]["t"])


def calls(tap: Path) -> int:
    return sum(1 for r in records(tap, "request") if r["method"] == "tools/call")


async def started(tap: Path, before: int) -> None:
    """Until the downstream has received its `before + 1`-th tools/call."""
    with anyio.fail_after(10):
        while calls(tap) <= before:  # noqa: ASYNC110 - another process writes the file
            await anyio.sleep(0.002)


class Bench:
    def __init__(
        self, client: McpTestClient, direct: Downstream, http: Downstream, taps: dict[str, Path]
    ) -> None:
        self.client, self.direct, self.http, self.taps = client, direct, http, taps

    async def call(self, path: str) -> float:
        begun = time.perf_counter()
        if path == "direct":
            await self.direct.call_tool("echo", {"message": "hi"})
        elif path == "direct-http":
            await self.http.call_tool("echo", {"message": "hi"})
        else:
            name = {"gateway-own": "echo", "gateway-stdio": "stdio_echo"}.get(path, "http_echo")
            await self.client.call_tool(name, {"message": "hi"})
        return (time.perf_counter() - begun) * 1000

    async def cancel(self, path: str) -> float:
        tap = self.taps[{"direct": "direct", "gateway-http": "http"}.get(path, "stdio")]
        cancels, seen = len(records(tap, "cancelled")), calls(tap)
        arguments = {"duration": 60, "steps": 1}
        if path == "direct":
            async with anyio.create_task_group() as tg:
                tg.start_soon(self.direct.call_tool, LONG, arguments)
                await started(tap, seen)
                at = time.monotonic()
                tg.cancel_scope.cancel()
        else:
            name = f"{'stdio' if path == 'gateway-stdio' else 'http'}_{LONG}"
            params = {"name": name, "arguments": arguments}
            async with self.client.stream("tools/call", params) as stream:
                await started(tap, seen)
                at = time.monotonic()
                await stream.drop()
        return (await cancelled_at(tap, cancels) - at) * 1000


async def measure(
    bench: Bench, rounds: int, calls: int, cancels: int
) -> dict[str, dict[str, list[float]]]:
    paths = ["direct", "direct-http", "gateway-own", "gateway-stdio", "gateway-http"]
    cancel_paths = ["direct", "gateway-stdio", "gateway-http"]
    latency: dict[str, list[float]] = {p: [] for p in paths}
    cancel: dict[str, list[float]] = {p: [] for p in cancel_paths}
    for path in paths:  # warm-up: connections, imports, the JIT of node
        for _ in range(5):
            await bench.call(path)
    for index in range(rounds):
        order = paths if index % 2 == 0 else paths[::-1]
        for path in order:
            latency[path] += [await bench.call(path) for _ in range(calls // rounds)]
        for path in cancel_paths if index % 2 == 0 else cancel_paths[::-1]:
            for _ in range(cancels // rounds):
                cancel[path].append(await bench.cancel(path))
    return {"latency": latency, "cancel": cancel}


def summary(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    return {"n": len(ordered), "p50": statistics.median(ordered), "p99": p99}


def report(figures: dict[str, dict[str, list[float]]]) -> tuple[dict[str, Any], str]:
    table: dict[str, Any] = {
        kind: {path: summary(samples) for path, samples in paths.items()}
        for kind, paths in figures.items()
    }
    lat, can = table["latency"], table["cancel"]
    lines = ["| echo call, sequential | n | p50 ms | p99 ms |", "|---|---|---|---|"]
    lines += [f"| {p} | {s['n']} | {s['p50']:.2f} | {s['p99']:.2f} |" for p, s in lat.items()]
    for path, floor in (("gateway-stdio", "direct"), ("gateway-http", "direct-http")):
        added = lat[path]["p50"] - lat["gateway-own"]["p50"]
        lines.append(
            f"| added by the gateway ({path} - gateway-own), p50; the call itself ({floor}) "
            f"| | {added:.2f} | {lat[floor]['p50']:.2f} |"
        )
    lines += ["", "| cancel -> downstream notified | n | p50 ms | p99 ms |", "|---|---|---|---|"]
    lines += [f"| {p} | {s['n']} | {s['p50']:.2f} | {s['p99']:.2f} |" for p, s in can.items()]
    return table, "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="60 calls and 10 cancels a path")
    parser.add_argument("--rounds", type=int, default=4)
    options = parser.parse_args()
    count, cancels = (60, 12) if options.quick else (300, 40)
    with tempfile.TemporaryDirectory() as folder, ExitStack() as stack:
        taps = {name: Path(folder) / f"{name}.jsonl" for name in ("stdio", "http", "direct")}
        http_port, gateway_port = free_port(), free_port()
        everything = spawn(
            ["node", str(TAP), "streamableHttp", str(taps["http"])],
            {"PORT": str(http_port)},
            NODE_DIR,
        )
        stack.callback(stop, everything)
        wait_port(http_port)
        gateway = spawn(
            [
                *(sys.executable, "-m", "uvicorn", "--factory", "bench.downstream:gateway_app"),
                *("--host", "127.0.0.1", "--port", str(gateway_port), "--log-level", "warning"),
            ],
            {
                "BENCH_TAP": str(taps["stdio"]),
                "BENCH_HTTP_URL": f"http://127.0.0.1:{http_port}/mcp",
            },
            ROOT,
        )
        stack.callback(stop, gateway)
        wait_port(gateway_port)

        async def run() -> dict[str, dict[str, list[float]]]:
            client = McpTestClient(f"http://127.0.0.1:{gateway_port}/mcp")
            direct = stdio_downstream(str(taps["direct"]))
            http = Downstream.http("direct-http", f"http://127.0.0.1:{http_port}/mcp")
            async with direct, http:
                bench = Bench(client, direct, http, taps)
                return await measure(bench, options.rounds, count, cancels)

        figures = anyio.run(run)
    table, markdown = report(figures)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    name = f"downstream{'-quick' if options.quick else ''}-{stamp}"
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{name}.json").write_text(json.dumps({"figures": table}, indent=2) + "\n")
    (RESULTS / f"{name}.md").write_text(markdown + "\n")
    print(markdown)


if __name__ == "__main__":
    main()
