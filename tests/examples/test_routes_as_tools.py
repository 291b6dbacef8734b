"""examples/routes_as_tools on uvicorn, driven by the official MCP Python SDK client: the
tagged GET and POST routes are the tools, a call runs the route (its validation and its
404 included), and the DELETE and untagged routes stay HTTP only."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from mcp import Client

from examples.routes_as_tools.main import ORDERS, app
from mcp_asgi.testing import serve

from ..servers import MODERN


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    with serve(app) as server:
        yield server.url + "/mcp"


async def test_the_tagged_routes_are_the_tools(url: str) -> None:
    async with Client(url, mode=MODERN) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    assert sorted(tools) == ["get_order", "list_orders", "place_order"]
    assert tools["get_order"].annotations is not None
    assert tools["get_order"].annotations.read_only_hint is True
    assert set(tools["place_order"].input_schema["properties"]) == {"item", "quantity", "x-channel"}


async def test_a_call_runs_the_route(url: str) -> None:
    async with Client(url, mode=MODERN) as client:
        shipped = await client.call_tool("list_orders", {"status": "shipped"})
        placed = await client.call_tool(
            "place_order", {"item": "mouse", "quantity": 2, "x-channel": "agent"}
        )
        missing = await client.call_tool("get_order", {"order_id": 999})
        invalid = await client.call_tool("place_order", {"item": "mouse", "quantity": 0})
    assert shipped.structured_content == {"result": [ORDERS[2].model_dump()]}
    assert placed.structured_content is not None
    assert ORDERS[placed.structured_content["id"]].channel == "agent"
    assert missing.is_error
    assert "HTTP 404 Not Found: Order 999 not found" in str(missing.content)
    assert invalid.is_error
