"""Compare the three ways to expose the bench app's routes as tools, on the same app.

    python -m bench.routes.compare [--keep-venvs]

For each peer: its venv (made once under bench/.venv-routes/, from PyPI), its MCP endpoint
served by uvicorn on 127.0.0.1, and the official MCP Python SDK client (this project's,
`mcp` 2.x, in auto mode: it speaks 2025-era to fastapi-mcp's `mcp` 1.x server) asking:

- what is exposed: the tools listed (the app has GET, POST and DELETE routes);
- whether a call works: read_item with a path and a query parameter;
- whether the caller's identity passes: whoami, behind a bearer token the client sends;
- whether a cancel reaches the route: slow (3 s) is called, the client's call cancelled
  once the route started (the SDK closes the request's stream, and on a 2025-era session
  sends notifications/cancelled), and what the route wrote (cancelled after N s, or
  finished) is read 1.5 s after the route would have finished;
- whether a dropped client does: a client process (bench/routes/caller.py) calls slow and
  is killed (SIGKILL) once the route started: its connection drops, nothing is sent.

Writes bench/results/routes-compare-<time>.json and .md (the table in
docs/routes-as-tools.md comes from it).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

ROOT = Path(__file__).resolve().parent.parent.parent
VENVS = ROOT / "bench" / ".venv-routes"
RESULTS = ROOT / "bench" / "results"
PEERS: dict[str, list[str]] = {
    "mcp_asgi": [],  # the project's own venv
    "fastapi_mcp": ["fastapi-mcp==0.4.0", "mcp>=1.20,<2", "uvicorn==0.54.0"],
    "fastmcp": ["fastmcp", "fastapi", "uvicorn==0.54.0"],
}
DISTS = {
    "mcp_asgi": ["mcp-asgi", "fastapi"],
    "fastapi_mcp": ["fastapi-mcp", "mcp", "fastapi"],
    "fastmcp": ["fastmcp", "fastmcp-slim", "mcp", "fastapi"],
}
TOKEN = "bench-token"
SLOW = 3.0


def python_of(peer: str) -> Path:
    if not PEERS[peer]:
        return Path(sys.executable)
    venv = VENVS / peer.replace("_", "-")
    python = venv / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run(
            [str(python), "-m", "pip", "install", "-q", *PEERS[peer]], check=True, cwd=ROOT
        )
    return python


def versions(python: Path, dists: list[str]) -> dict[str, str]:
    code = (
        "import importlib.metadata as m, json, sys\n"
        "print(json.dumps({d: m.version(d) for d in sys.argv[1:]}))"
    )
    out = subprocess.run([str(python), "-c", code, *dists], capture_output=True, text=True)
    return json.loads(out.stdout) if out.returncode == 0 else {}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextmanager
def serving(peer: str, python: Path, record: Path) -> Any:
    port = free_port()
    env = {**os.environ, "ROUTES_RECORD": str(record), "PYTHONPATH": str(ROOT)}
    process = subprocess.Popen(
        [str(python), "-m", "bench.routes.peer", peer, str(port)], cwd=ROOT, env=env
    )
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(10)


@asynccontextmanager
async def client(url: str) -> AsyncIterator[Client]:
    headers = {"authorization": f"Bearer {TOKEN}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=30) as http,
        Client(streamable_http_client(url, http_client=http)) as session,
    ):
        yield session


def first_text(result: Any) -> str:
    return " ".join(getattr(block, "text", "") for block in result.content).strip()


async def probe(url: str, path: Path) -> dict[str, Any]:
    found: dict[str, Any] = {}
    record = anyio.Path(path)
    async with client(url) as session:
        found["protocol"] = session.protocol_version
        found["tools"] = sorted(tool.name for tool in (await session.list_tools()).tools)
        read = await session.call_tool("read_item", {"item_id": 7, "q": "blue"})
        found["read_item"] = first_text(read)
        found["structured"] = read.structured_content is not None
        me = await session.call_tool("whoami", {})
        found["whoami"] = first_text(me)
        found["auth_passes"] = not me.is_error and "alice" in first_text(me)
        async with anyio.create_task_group() as tg:
            tg.start_soon(session.call_tool, "slow", {})
            with anyio.fail_after(10):
                while "started" not in await record.read_text():  # noqa: ASYNC110 - another process writes it
                    await anyio.sleep(0.02)
            tg.cancel_scope.cancel()
    await anyio.sleep(SLOW + 1.5)
    lines = (await record.read_text()).split()
    found["slow_record"] = " ".join(lines)
    found["cancel_reaches_route"] = "cancelled" in lines
    await record.write_text("")
    caller = await anyio.open_process([sys.executable, "-m", "bench.routes.caller", url], cwd=ROOT)
    with anyio.fail_after(20):
        while "started" not in await record.read_text():  # noqa: ASYNC110 - another process writes it
            await anyio.sleep(0.02)
    caller.kill()
    await caller.wait()
    await anyio.sleep(SLOW + 1.5)
    lines = (await record.read_text()).split()
    found["killed_record"] = " ".join(lines)
    found["drop_reaches_route"] = "cancelled" in lines
    return found


def table(results: dict[str, dict[str, Any]]) -> str:
    rows = [
        "| | mcp_asgi `AppRoutes` | fastapi-mcp | `FastMCP.from_fastapi` |",
        "|---|---|---|---|",
    ]

    def row(label: str, cell: Any) -> None:
        rows.append(f"| {label} | " + " | ".join(cell(results[p]) for p in PEERS) + " |")

    row("versions", lambda r: ", ".join(f"{k} {v}" for k, v in r["versions"].items()))
    row("protocol the SDK client spoke", lambda r: r.get("protocol", r.get("error", "")))
    row("tools listed (defaults)", lambda r: ", ".join(r.get("tools", [])))
    row("read_item(7, q=blue)", lambda r: f"`{' '.join(r.get('read_item', '').split())}`")
    row("structuredContent", lambda r: "yes" if r.get("structured") else "no")
    row(
        "whoami with the client's bearer token",
        lambda r: f"`{' '.join(r.get('whoami', '').split())}`",
    )
    row("slow route after the client cancelled", lambda r: r.get("slow_record", ""))
    row("slow route after the client process was killed", lambda r: r.get("killed_record", ""))
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.parse_args()
    results: dict[str, dict[str, Any]] = {}
    for peer in PEERS:
        python = python_of(peer)
        with tempfile.TemporaryDirectory() as tmp:
            record = Path(tmp) / "record.txt"
            record.write_text("")
            with serving(peer, python, record) as url:
                try:
                    results[peer] = anyio.run(probe, url, record)
                except Exception as exc:  # a peer that fails is a result too
                    results[peer] = {"error": f"{type(exc).__name__}: {exc}"}
        results[peer]["versions"] = versions(python, DISTS[peer])
        print(peer, json.dumps(results[peer]), file=sys.stderr)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"routes-compare-{stamp}.json").write_text(json.dumps(results, indent=2))
    (RESULTS / f"routes-compare-{stamp}.md").write_text(table(results) + "\n")
    print(table(results))


if __name__ == "__main__":
    main()
