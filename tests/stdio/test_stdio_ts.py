"""The TypeScript SDK v2 client (@modelcontextprotocol/client, by Node from tests/node)
drives `python -m mcp_asgi.stdio` in 2026-07-28 (`auto`: it probes with `server/discover`)
and 2025 (`legacy`: `initialize`) mode."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ..servers import ROOT
from .pipe import SERVER, server_env

NODE_DIR = ROOT / "tests" / "node"
NODE = NODE_DIR / "node_modules" / ".bin" / "node"


@pytest.mark.skipif(not NODE.exists(), reason="run `npm ci --prefix tests/node` (make test does)")
@pytest.mark.parametrize(("mode", "version"), [("auto", "2026-07-28"), ("legacy", "2025-11-25")])
def test_typescript_client(mode: str, version: str, tmp_path: Path) -> None:
    """Call, progress, an aborted call (cancelled by notification: the handler stops with
    client_notification and the client gets no reply), a cancel of an unknown id (silence:
    the next call answers), and the client closing the pipe with two calls in flight (both
    cancelled with client_disconnect)."""
    probe = tmp_path / "probe"
    command = [sys.executable, "-m", "mcp_asgi.stdio", SERVER]
    done = subprocess.run(
        [str(NODE), str(NODE_DIR / "stdio_client.mjs"), mode, *command],
        cwd=NODE_DIR,
        env=server_env(probe),
        capture_output=True,
        text=True,
        timeout=25,
        check=True,
    )
    out = json.loads(done.stdout)
    assert out["protocolVersion"] == version
    assert out["tools"] == ["echo", "count", "wait", "shout", "hold", "busy"]
    assert out["echo"] == [{"type": "text", "text": "hi"}]
    assert out["count"] == [{"type": "text", "text": "counted 3"}]
    assert out["progress"] == [1, 2, 3]
    assert out["abortError"] is not None
    assert out["after"] == [{"type": "text", "text": "after"}]
    assert out["probe"][:2] == ["started aborted", "cancelled aborted client_notification"]
    assert sorted(out["probe"][2:]) == [
        "cancelled p client_disconnect",
        "cancelled q client_disconnect",
        "started p",
        "started q",
    ]
