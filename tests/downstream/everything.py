"""The reference MCP server, `@modelcontextprotocol/server-everything` (npm, pinned in
tests/downstream/node), as a downstream: over stdio as a child process, or over
Streamable HTTP in a process of its own. Each runs under tests/downstream/node/tap.mjs,
which records (JSON lines, in a file named on its command line) every request the server
receives with its `_meta`, and for each `notifications/cancelled` whether the named request
was running and whether its AbortSignal fired: what the downstream itself saw."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from mcp_asgi.downstream import Downstream

from ..servers import free_port, wait_ready

NODE_DIR = Path(__file__).resolve().parent / "node"
TAP = NODE_DIR / "tap.mjs"
NODE = shutil.which("node") or "node"
INSTALLED = (NODE_DIR / "node_modules" / "@modelcontextprotocol" / "server-everything").exists()
needs_everything = pytest.mark.skipif(
    not INSTALLED or shutil.which("node") is None,
    reason="run `npm ci --prefix tests/downstream/node` (make test does)",
)
LONG = "trigger-long-running-operation"


def stdio(tap: Path, *, mode: str = "exit-on-eof", **options: Any) -> Downstream:
    """server-everything as a child process speaking stdio. `mode`: "exit-on-eof" (it
    exits when its stdin closes), "" (as the real server: only at the SIGTERM that
    follows), "stubborn" (it ignores SIGTERM too: only the SIGKILL after it ends it)."""
    return Downstream.stdio(
        "everything",
        NODE,
        [str(TAP), "stdio", str(tap), *([mode] if mode else [])],
        env={"PATH": os.environ["PATH"]},
        cwd=str(NODE_DIR),
        **options,
    )


@contextmanager
def http(tap: Path) -> Iterator[str]:
    """server-everything over Streamable HTTP (2025-era sessions) in a process of its own;
    its URL."""
    port = free_port()
    env = {"PATH": os.environ["PATH"], "PORT": str(port)}
    process = subprocess.Popen(
        [NODE, str(TAP), "streamableHttp", str(tap)],
        cwd=NODE_DIR,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_ready(lambda: records(tap, "started") != [], "server-everything")
        wait_ready(lambda: _accepts(port), "server-everything's port")
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)


def _accepts(port: int) -> bool:
    import socket

    with socket.create_connection(("127.0.0.1", port)):
        return True


def records(tap: Path, event: str | None = None) -> list[dict[str, Any]]:
    """What the tap recorded (of one `event` kind)."""
    if not tap.exists():
        return []
    lines = [json.loads(line) for line in tap.read_text().splitlines() if line.strip()]
    return [line for line in lines if event is None or line["event"] == event]


def requests(tap: Path, method: str) -> list[dict[str, Any]]:
    return [r for r in records(tap, "request") if r["method"] == method]


def processes_of(tap: Path) -> list[int]:
    """The live (not zombie) processes whose command line names `tap`."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if str(tap).encode() in cmdline and state != "Z":
            found.append(int(pid))
    return found


def exists(pid: int) -> bool:
    """Whether `pid` is still a process (a zombie counts: nobody reaped it)."""
    return Path(f"/proc/{pid}").exists()
