"""The official MCP Python SDK client (`mcp` 2.x) listens for changes and answers MRTR rounds."""

from __future__ import annotations

import threading

import anyio
from mcp import Client, types
from mcp.client.session import ClientRequestContext
from mcp.client.subscriptions import ToolsListChanged

from mcp_asgi import Context, McpServer
from mcp_asgi.testing import serve

from ..helpers import trigger
from ..servers import MODERN, changing_app


def build_server(runs: list[str]) -> McpServer:
    server = McpServer("sdk-interop")

    @server.tool()
    async def book(city: str, ctx: Context) -> str:
        """Ask how many seats, then book."""
        runs.append(city)
        answer = await ctx.elicit(
            f"How many seats in {city}?",
            {"type": "object", "properties": {"seats": {"type": "integer"}}, "required": ["seats"]},
        )
        if not answer.accepted or answer.content is None:
            return "not booked"
        return f"{city}: {answer.content['seats']} seats"

    return server


async def test_sdk_client_listens_and_receives_tools_list_changed() -> None:
    """Client.listen() is acknowledged and yields ToolsListChanged when a tool is added."""
    server = build_server([])
    with serve(changing_app(server)) as live:
        async with Client(live.url + "/mcp", mode=MODERN, cache=None) as client:
            async with client.listen(tools_list_changed=True) as subscription:
                assert subscription.honored.tools_list_changed is True
                await trigger(live.url, "PUT", "/tools/added")
                with anyio.fail_after(10):
                    event = await subscription.__anext__()
            assert isinstance(event, ToolsListChanged)
            tools = await client.list_tools()
    assert {tool.name for tool in tools.tools} == {"book", "added"}


async def test_sdk_client_completes_an_elicitation_round_trip() -> None:
    """call_tool's MRTR driver runs the elicitation callback and retries with the answer."""
    runs: list[str] = []
    asked = threading.Event()

    async def on_elicit(
        context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        assert isinstance(params, types.ElicitRequestFormParams)
        assert params.message == "How many seats in Oslo?"
        asked.set()
        return types.ElicitResult(action="accept", content={"seats": 2})

    with serve(changing_app(build_server(runs))) as live:
        async with Client(
            live.url + "/mcp", mode=MODERN, cache=None, elicitation_callback=on_elicit
        ) as client:
            result = await client.call_tool("book", {"city": "Oslo"})
    assert asked.is_set()
    assert not result.is_error
    assert result.content[0].text == "Oslo: 2 seats"  # type: ignore[union-attr]
    assert runs == ["Oslo", "Oslo"]
