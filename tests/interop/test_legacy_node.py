"""Interop with the official TypeScript SDK client (`@modelcontextprotocol/sdk` 1.x, which
speaks 2025-11-25), run by Node from tests/node (installed by `npm ci --prefix tests/node`)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import anyio
import pytest

from mcp_asgi.testing import serve

from ..helpers import Probe, Wiretap, wait_for
from ..servers import LATEST, check_aborted_slow_call, legacy_app

NODE_DIR = Path(__file__).parent.parent / "node"
NODE = shutil.which("node")


@pytest.mark.skipif(NODE is None, reason="Node.js is not installed")
async def test_typescript_sdk_client_end_to_end() -> None:
    """Connect, list, call, read, receive progress, abort with an AbortController: the
    handler stops (client_notification), nothing more is sent for it, the session goes on."""
    assert NODE is not None
    sdk = NODE_DIR / "node_modules" / "@modelcontextprotocol" / "sdk"
    assert sdk.is_dir(), "run `npm ci --prefix tests/node` (make test does)"
    probe = Probe()
    wiretap = Wiretap(legacy_app(probe))
    with serve(wiretap) as live:
        with anyio.fail_after(25):
            done = await anyio.run_process(
                [NODE, str(NODE_DIR / "legacy_client.mjs"), live.url + "/mcp"],
                cwd=NODE_DIR,
                check=False,
                stderr=subprocess.PIPE,
            )
        assert done.returncode == 0, done.stderr.decode()
        await wait_for(probe.exited)
    out = json.loads(done.stdout)
    assert out["protocolVersion"] == LATEST
    assert out["server"] == {"name": "legacy", "version": "1.2.3", "title": "Legacy test server"}
    assert out["capabilities"]["tools"] == {"listChanged": True}
    assert out["tools"] == ["add", "chatty", "slow"]
    assert out["added"] == {"result": 5}
    assert out["read"] == "read me"
    assert out["missingCode"] == -32002
    assert out["progress"] == [1]
    assert out["aborted"] is True
    assert out["after"] == {"result": 2}
    assert out["errors"] == []
    methods = check_aborted_slow_call(probe, wiretap)
    assert "DELETE" in methods
