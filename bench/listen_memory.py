"""Memory per idle `subscriptions/listen` stream (not a test): `python -m bench.listen_memory`.

Starts one uvicorn process serving an `McpServer`, opens N listen streams against it from
this process (raw asyncio sockets, in batches), waits for every acknowledgment, and reads
the server's resident set size (VmRSS) before and after. Then it publishes one change and
counts how many streams receive it, and closes them all.

    python -m bench.listen_memory                  # 10,000 streams
    python -m bench.listen_memory --streams 2000 --batch 250

Both processes need one file descriptor per stream: the script raises its soft
RLIMIT_NOFILE to the hard limit (the server inherits it); raise `ulimit -Hn` if that is
too low.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BODY = {
    "jsonrpc": "2.0",
    "id": "listen",
    "method": "subscriptions/listen",
    "params": {
        "notifications": {"toolsListChanged": True},
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
        },
    },
}


def serve(port: int) -> None:
    """The server side: one McpServer with one tool, and a route that announces a change."""
    import uvicorn
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import PlainTextResponse
    from starlette.routing import Route

    from mcp_asgi import McpMiddleware, McpServer

    server = McpServer("listen-memory")

    @server.tool()
    async def echo(text: str) -> str:
        """Echo."""
        return text

    async def notify(request: Request) -> PlainTextResponse:
        await server.notify_tools_changed()
        return PlainTextResponse("ok")

    async def health(request: Request) -> PlainTextResponse:
        return PlainTextResponse("ok")

    app = Starlette(routes=[Route("/notify", notify, methods=["POST"]), Route("/health", health)])
    app.add_middleware(McpMiddleware, server=server)  # type: ignore[arg-type]
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", backlog=4096)


def raise_fd_limit(needed: int) -> int:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    if hard < needed:
        sys.exit(f"RLIMIT_NOFILE hard limit {hard} < {needed}: raise it (ulimit -Hn)")
    return hard


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def request_bytes(port: int) -> bytes:
    payload = json.dumps(BODY).encode()
    head = (
        "POST /mcp HTTP/1.1\r\n"
        f"host: 127.0.0.1:{port}\r\n"
        "content-type: application/json\r\n"
        "accept: application/json, text/event-stream\r\n"
        "mcp-protocol-version: 2026-07-28\r\n"
        "mcp-method: subscriptions/listen\r\n"
        f"content-length: {len(payload)}\r\n\r\n"
    )
    return head.encode() + payload


async def open_stream(port: int, raw: bytes) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(raw)
    seen = b""
    while b"subscriptions/acknowledged" not in seen:
        chunk = await reader.read(4096)
        if not chunk:
            raise ConnectionError("stream closed before the acknowledgment")
        seen += chunk
    return reader, writer


async def wait_for(reader: asyncio.StreamReader, marker: bytes) -> bool:
    seen = b""
    while marker not in seen:
        chunk = await reader.read(4096)
        if not chunk:
            return False
        seen += chunk
    return True


async def measure(port: int, pid: int, streams: int, batch: int) -> dict[str, float]:
    raw = request_bytes(port)
    warm = [await open_stream(port, raw) for _ in range(10)]  # imports, first-use allocations
    for _, writer in warm:
        writer.close()
    await asyncio.sleep(1)
    before = rss_kib(pid)
    opened: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []
    started = time.perf_counter()
    for start in range(0, streams, batch):
        count = min(batch, streams - start)
        opened += await asyncio.gather(*(open_stream(port, raw) for _ in range(count)))
    open_seconds = time.perf_counter() - started
    await asyncio.sleep(2)
    after = rss_kib(pid)
    started = time.perf_counter()
    await asyncio.to_thread(
        urllib.request.urlopen, urllib.request.Request(f"http://127.0.0.1:{port}/notify", b"")
    )
    delivered = await asyncio.gather(
        *(wait_for(r, b"notifications/tools/list_changed") for r, _ in opened)
    )
    fanout_seconds = time.perf_counter() - started
    for _, writer in opened:
        writer.close()
    return {
        "streams": streams,
        "rss_before_mib": before / 1024,
        "rss_after_mib": after / 1024,
        "kib_per_stream": (after - before) / streams,
        "open_seconds": open_seconds,
        "delivered": sum(delivered),
        "fanout_seconds": fanout_seconds,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--streams", type=int, default=10_000)
    parser.add_argument("--batch", type=int, default=500)
    parser.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve)
        return
    raise_fd_limit(args.streams + 200)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = subprocess.Popen(
        [sys.executable, "-m", "bench.listen_memory", "--serve", str(port)], cwd=ROOT
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1)
                break
            except OSError:
                if time.monotonic() > deadline or server.poll() is not None:
                    sys.exit("the server did not start")
                time.sleep(0.1)
        report = asyncio.run(measure(port, server.pid, args.streams, args.batch))
    finally:
        server.terminate()
        server.wait(30)
    print(json.dumps(report, indent=2))
    print(
        f"{report['streams']:,} idle listen streams: "
        f"{report['kib_per_stream']:.1f} KiB RSS each "
        f"({report['rss_before_mib']:.0f} -> {report['rss_after_mib']:.0f} MiB); "
        f"one change reached {report['delivered']:,} of them in {report['fanout_seconds']:.2f}s",
        file=sys.stderr,
    )


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
