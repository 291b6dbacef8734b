"""examples/gateway on uvicorn over the reference server
(@modelcontextprotocol/server-everything, over stdio), driven by the official MCP Python
SDK client: the downstream's tools are listed under `ev_` beside the gateway's own, a
mounted tool's progress reaches the client, and the gateway's own tool calls the
downstream."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from mcp import Client

from examples.gateway.main import GatewaySettings, create_app
from mcp_asgi.testing import serve

from ..downstream.everything import LONG, NODE_DIR, needs_everything
from ..servers import MODERN

pytestmark = needs_everything


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    everything = NODE_DIR / "node_modules" / ".bin" / "mcp-server-everything"
    app = create_app(GatewaySettings(command=str(everything), args=["stdio"]))
    with serve(app, lifespan="on") as server:
        yield server.url + "/mcp"


async def test_the_downstreams_tools_beside_the_gateways(url: str) -> None:
    async with Client(url, mode=MODERN) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    assert {"shout", "ev_echo", "ev_get-sum", f"ev_{LONG}"} <= set(tools)
    assert all(name == "shout" or name.startswith("ev_") for name in tools)


async def test_calls_pass_through(url: str) -> None:
    seen: list[float] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append(progress)

    async with Client(url, mode=MODERN) as client:
        shouted = await client.call_tool("shout", {"message": "hello"})
        total = await client.call_tool("ev_get-sum", {"a": 2, "b": 3})
        long = await client.call_tool(
            f"ev_{LONG}", {"duration": 0.4, "steps": 2}, progress_callback=on_progress
        )
    assert shouted.content[0].model_dump()["text"] == "ECHO: HELLO"
    assert "5" in total.content[0].model_dump()["text"]
    assert not long.is_error
    assert seen == [1, 2]
