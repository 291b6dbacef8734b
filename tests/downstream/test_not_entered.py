"""A `Downstream` a handler calls without having entered it (`async with` in the app's
lifespan): a JSON-RPC error saying so, logged (it was "the connection broke
(RuntimeError)", logged nowhere)."""

from __future__ import annotations

import logging
import re

import pytest

from mcp_asgi import McpServer
from mcp_asgi.downstream import Downstream, DownstreamUnavailable

from ..helpers import mcp_app, serving

HINT = "not running: enter it (async with) in the app's lifespan"


async def test_a_downstream_never_entered_says_so(caplog: pytest.LogCaptureFixture) -> None:
    """`call_tool` of a Downstream never entered: -32603 naming it and saying to enter it in
    the lifespan, `data.downstream` its name, the same message logged at ERROR; so does
    `list_tools`."""
    files = Downstream.http("files", "http://127.0.0.1:9/mcp")  # never connected
    server = McpServer("gateway")

    @server.tool()
    async def read(path: str) -> dict[str, object]:
        """Asks the downstream."""
        return await files.call_tool("read_file", {"path": path})

    caplog.set_level(logging.DEBUG, logger="mcp_asgi.downstream")
    with serving(mcp_app(server)) as client:
        response = await client.request("tools/call", {"name": "read", "arguments": {"path": "x"}})
    error = response.json()["error"]
    assert error["code"] == -32603
    assert error["message"] == f"downstream server 'files' is unavailable: {HINT}"
    assert error["data"] == {"downstream": "files"}
    [record] = [r for r in caplog.records if r.name == "mcp_asgi.downstream"]
    assert record.levelno == logging.ERROR
    assert record.getMessage() == error["message"]
    with pytest.raises(DownstreamUnavailable, match=re.escape(HINT)):
        await files.list_tools()
