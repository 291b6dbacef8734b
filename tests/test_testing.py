"""`mcp_asgi.testing`'s client against a real uvicorn server: `list_tools()` reads every
page, `request()` returns a response whose `.json()` is the final JSON-RPC message."""

from __future__ import annotations

from mcp_asgi import McpServer
from mcp_asgi.testing import McpTestClient, serve

from .helpers import mcp_app


def three_tools() -> McpServer:
    server = McpServer("testing")
    for name in ("one", "two", "three"):

        @server.tool(name=name)
        async def tool() -> str:
            """A tool."""
            return "ok"

    return server


async def test_list_tools_and_request_json() -> None:
    """Three tools on pages of two: list_tools() follows nextCursor; `.json()` is the final
    JSON-RPC response, on a JSON reply and on an SSE one."""
    with serve(mcp_app(three_tools(), page_size=2)) as live:
        client = McpTestClient(live.url + "/mcp")
        assert [tool["name"] for tool in await client.list_tools()] == ["one", "two", "three"]
        first_page = await client.request("tools/list")
        assert first_page.status == 200
        assert first_page.json()["result"]["nextCursor"]
        assert first_page.json() == first_page.messages[-1]
    with serve(mcp_app(three_tools(), response_mode="sse")) as live:
        client = McpTestClient(live.url + "/mcp")
        called = await client.request("tools/call", {"name": "two", "arguments": {}}, id=7)
        assert called.headers["content-type"].startswith("text/event-stream")
        assert called.json() == {
            "jsonrpc": "2.0",
            "id": 7,
            "result": called.json()["result"],
        }
        assert called.json()["result"]["content"][0]["text"] == "ok"
