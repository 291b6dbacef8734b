"""Interop with the official TypeScript SDK client (`@modelcontextprotocol/sdk` 1.x, which
speaks 2025-11-25), run by Node from tests/node (installed by `npm ci --prefix tests/node`)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import anyio
import pytest

from mcp_asgi import CancelReason
from mcp_asgi.testing import serve

from .legacy_helpers import LATEST, Recorder, Wiretap, build_app, only_progress_sent, wait_for

NODE_DIR = Path(__file__).parent / "node"
NODE = shutil.which("node")


@pytest.mark.skipif(NODE is None, reason="Node.js is not installed")
async def test_typescript_sdk_client_end_to_end() -> None:
    """Connect, list, call, read, receive progress, abort with an AbortController: the
    handler stops (client_notification), nothing more is sent for it, the session goes on."""
    assert NODE is not None
    sdk = NODE_DIR / "node_modules" / "@modelcontextprotocol" / "sdk"
    assert sdk.is_dir(), "run `npm ci --prefix tests/node` (make test does)"
    recorder = Recorder()
    wiretap = Wiretap(build_app(recorder))
    with serve(wiretap) as live:
        with anyio.fail_after(25):
            done = await anyio.run_process(
                [NODE, str(NODE_DIR / "legacy_client.mjs"), live.url + "/mcp"],
                cwd=NODE_DIR,
                check=False,
                stderr=subprocess.PIPE,
            )
        assert done.returncode == 0, done.stderr.decode()
        await wait_for(recorder.ended)
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
    assert recorder.reason is CancelReason.CLIENT_NOTIFICATION
    assert not recorder.finished
    (slow,) = [
        e
        for e in wiretap.calls("tools/call")
        if e.message and e.message["params"]["name"] == "slow"
    ]
    assert only_progress_sent(slow)
    methods = wiretap.methods()
    assert methods[:2] == ["initialize", "notifications/initialized"]
    assert "notifications/cancelled" in methods
    assert "DELETE" in methods
