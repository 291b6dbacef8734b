"""A route's JSON answer as structured content, as a decorated tool's (issue 24 item 11):
an object as it is, anything else in `{"result": ...}`, with the advertised
`outputSchema` saying the same, in 2026-07-28 and 2025-era sessions alike. On uvicorn."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.responses import JSONResponse
from pydantic import BaseModel

from mcp_asgi import McpMiddleware, McpServer, McpSettings
from mcp_asgi.routes import AppRoutes
from mcp_asgi.testing import McpTestClient, serve

from ..servers import LegacyClient


class Item(BaseModel):
    name: str


def structured_app() -> FastAPI:
    app = FastAPI()

    @app.get("/items", operation_id="list_items")
    async def list_items() -> list[Item]:
        return [Item(name="kettle")]

    @app.get("/item", operation_id="one_item")
    async def one_item() -> Item:
        return Item(name="kettle")

    @app.get("/count", operation_id="count")
    async def count() -> int:
        return 2

    @app.get("/raw", operation_id="raw")
    async def raw() -> JSONResponse:  # no schema: a list all the same
        return JSONResponse([1, 2])

    server = McpServer("shop")

    @server.tool()
    async def decorated_items() -> list[Item]:
        """The decorated tool the routes answer like."""
        return [Item(name="kettle")]

    server.add_source(AppRoutes())
    app.add_middleware(McpMiddleware, server=server, settings=McpSettings())
    return app


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    with serve(structured_app()) as live:
        yield live.url + "/mcp"


async def modern(url: str, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    response = await McpTestClient(url).request(method, params)
    return dict(response.final["result"])


async def legacy(url: str, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    client = LegacyClient(url)
    await client.initialize()
    response = await client.call(method, params)
    return dict(response.final["result"])


@pytest.mark.parametrize("era", [modern, legacy], ids=["2026-07-28", "2025"])
async def test_a_list_route_answers_as_a_decorated_list_tool(url: str, era: Any) -> None:
    """The list route's outputSchema and structuredContent are the decorated `-> list[Item]`
    tool's; an object route's stay the object; a number and a schema-less list are
    wrapped too. The text is the structured content's JSON."""
    tools = {tool["name"]: tool for tool in (await era(url, "tools/list"))["tools"]}
    listed = tools["list_items"]["outputSchema"]
    assert listed["type"] == "object"
    assert listed["required"] == ["result"]
    assert listed["properties"]["result"]["type"] == "array"
    assert tools["decorated_items"]["outputSchema"]["required"] == ["result"]
    assert tools["one_item"]["outputSchema"]["properties"]["name"]["type"] == "string"
    assert tools["count"]["outputSchema"]["properties"]["result"]["type"] == "integer"
    expected = {
        "list_items": {"result": [{"name": "kettle"}]},
        "decorated_items": {"result": [{"name": "kettle"}]},
        "one_item": {"name": "kettle"},
        "count": {"result": 2},
        "raw": {"result": [1, 2]},
    }
    for name, structured in expected.items():
        result = await era(url, "tools/call", {"name": name, "arguments": {}})
        assert result["structuredContent"] == structured, (name, result)
        assert result["content"] == [{"type": "text", "text": result["content"][0]["text"]}]
        assert "isError" not in result
    route = await era(url, "tools/call", {"name": "list_items", "arguments": {}})
    tool = await era(url, "tools/call", {"name": "decorated_items", "arguments": {}})
    assert route["content"] == tool["content"]
