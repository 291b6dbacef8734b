"""Interop with the official MCP Python SDK client (`mcp` 2.x) at 2026-07-28, over uvicorn."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Annotated, Any

import anyio
import pytest
from mcp import Client, types
from mcp.shared.exceptions import MCPError
from pydantic import BaseModel, Field

from mcp_asgi import CancelReason, Context, McpServer
from mcp_asgi.testing import serve

from ..helpers import Probe, Wiretap, mcp_app, wait_for
from ..servers import MODERN


class Book(BaseModel):
    title: str
    year: int


def build(probe: Probe) -> Wiretap:
    server = McpServer("interop", version="3.2.1", instructions="Books and more.")

    @server.tool()
    async def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    @server.tool()
    async def book(title: str) -> Book:
        """A book by title."""
        return Book(title=title, year=1965)

    @server.tool()
    async def regional(
        region: Annotated[str, Field(json_schema_extra={"x-mcp-header": "Region"})],
    ) -> str:
        """Answers from the region named in the Mcp-Param-Region header."""
        return f"served from {region}"

    @server.tool()
    async def slow(steps: int, ctx: Context) -> str:
        """Reports progress once per step."""
        for step in range(1, steps + 1):
            await ctx.report_progress(step, total=steps, message=f"step {step}")
            await ctx.log("info", f"step {step}")
            await anyio.sleep(0.01)
        return f"done {steps}"

    @server.tool()
    async def hang(ctx: Context) -> str:
        """Runs until cancelled, recording why."""
        with probe.running(ctx):
            await anyio.sleep(30)
        return "not cancelled"

    @server.resource("res://hello", mime_type="text/plain")
    async def hello() -> str:
        """A greeting."""
        return "hello world"

    @server.resource("res://books/{title}")
    async def book_resource(title: str) -> Book:
        """A book as JSON."""
        return Book(title=title, year=1984)

    @server.prompt()
    def greet(name: str) -> str:
        """Greet someone by name."""
        return f"Hello {name}!"

    return Wiretap(mcp_app(server))


@pytest.fixture(scope="module")
def live() -> Iterator[tuple[str, Wiretap, Probe]]:
    probe = Probe()
    wiretap = build(probe)
    with serve(wiretap) as server:
        yield server.url + "/mcp", wiretap, probe


@pytest.fixture
def url(live: tuple[str, Wiretap, Probe]) -> str:
    live[1].exchanges.clear()
    return live[0]


@pytest.fixture
def wiretap(live: tuple[str, Wiretap, Probe]) -> Wiretap:
    return live[1]


@pytest.fixture
def probe(live: tuple[str, Wiretap, Probe]) -> Probe:
    return live[2]


def pinned(url: str, **options: Any) -> Client:
    return Client(url, mode=MODERN, cache=None, **options)


async def test_discover(url: str, wiretap: Wiretap) -> None:
    """server/discover over the wire returns our versions, capabilities and instructions."""
    async with pinned(url) as client:
        raw = await client.session.send_discover(MODERN)
    assert raw["supportedVersions"] == [MODERN]
    assert set(raw["capabilities"]) >= {"tools", "resources", "prompts"}
    assert raw["instructions"] == "Books and more."
    assert raw["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "interop"
    assert wiretap.methods() == ["server/discover"]


async def test_list_and_call_tools(url: str) -> None:
    """The client lists our tools (none dropped) and calls them with structured results."""
    async with pinned(url) as client:
        tools = await client.list_tools()
        assert [t.name for t in tools.tools] == ["add", "book", "regional", "slow", "hang"]
        added = await client.call_tool("add", {"a": 2, "b": 3})
        assert not added.is_error
        assert added.structured_content == {"result": 5}
        assert isinstance(added.content[0], types.TextContent)
        assert added.content[0].text == '{"result": 5}'
        book = await client.call_tool("book", {"title": "Dune"})
        assert book.structured_content == {"title": "Dune", "year": 1965}


async def test_tool_errors(url: str) -> None:
    """Bad arguments are an isError result; an unknown tool is an MCPError -32602."""
    async with pinned(url) as client:
        await client.list_tools()
        bad = await client.call_tool("add", {"a": "two", "b": 1})
        assert bad.is_error
        with pytest.raises(MCPError) as unknown:
            await client.call_tool("nope", {})
    assert unknown.value.code == -32602


async def test_mcp_param_header(url: str, wiretap: Wiretap) -> None:
    """After listing, the client sends Mcp-Param-Region and our check accepts it."""
    async with pinned(url) as client:
        await client.list_tools()
        result = await client.call_tool("regional", {"region": "eu-west"})
    assert result.structured_content is None
    assert isinstance(result.content[0], types.TextContent)
    assert result.content[0].text == "served from eu-west"
    call = wiretap.calls("tools/call")[0].headers
    assert call["mcp-param-region"] == "eu-west"
    assert call["mcp-name"] == "regional"


async def test_mcp_param_header_recovers_when_unlisted(url: str, wiretap: Wiretap) -> None:
    """Calling an unlisted tool: our -32020 makes the client re-list and resend with the header."""
    async with pinned(url) as client:
        result = await client.call_tool("regional", {"region": "ap-south"})
    assert isinstance(result.content[0], types.TextContent)
    assert result.content[0].text == "served from ap-south"
    assert wiretap.methods() == ["tools/call", "tools/list", "tools/call"]


async def test_read_resource(url: str) -> None:
    """resources/read works for a static URI and a template URI."""
    async with pinned(url) as client:
        static = await client.read_resource("res://hello")
        templated = await client.read_resource("res://books/Neuromancer")
        with pytest.raises(MCPError) as missing:
            await client.read_resource("res://nothing")
    assert isinstance(static.contents[0], types.TextResourceContents)
    assert static.contents[0].text == "hello world"
    assert isinstance(templated.contents[0], types.TextResourceContents)
    assert json.loads(templated.contents[0].text) == {"title": "Neuromancer", "year": 1984}
    assert templated.contents[0].mime_type == "application/json"
    assert missing.value.code == -32602


async def test_list_resources_and_prompts(url: str) -> None:
    """The list methods parse as the SDK's 2026 result types (ttlMs, cacheScope, resultType)."""
    async with pinned(url) as client:
        resources = await client.list_resources()
        templates = await client.list_resource_templates()
        prompts = await client.list_prompts()
    assert [str(r.uri) for r in resources.resources] == ["res://hello"]
    assert [t.uri_template for t in templates.resource_templates] == ["res://books/{title}"]
    assert [p.name for p in prompts.prompts] == ["greet"]


async def test_get_prompt(url: str) -> None:
    """prompts/get renders the prompt; a missing argument is an MCPError -32602."""
    async with pinned(url) as client:
        prompt = await client.get_prompt("greet", {"name": "Bob"})
        with pytest.raises(MCPError) as missing:
            await client.get_prompt("greet", {})
    assert isinstance(prompt.messages[0].content, types.TextContent)
    assert prompt.messages[0].content.text == "Hello Bob!"
    assert missing.value.code == -32602


async def test_progress_and_logs(url: str) -> None:
    """Progress and (opted-in) log messages reach the client's callbacks."""
    seen: list[tuple[float, float | None, str | None]] = []
    logs: list[Any] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        logs.append(params.data)

    async with pinned(url, log_level="info", logging_callback=on_log) as client:
        await client.list_tools()
        result = await client.call_tool("slow", {"steps": 3}, progress_callback=on_progress)
    assert isinstance(result.content[0], types.TextContent)
    assert result.content[0].text == "done 3"
    assert seen == [(1.0, 3.0, "step 1"), (2.0, 3.0, "step 2"), (3.0, 3.0, "step 3")]
    assert logs == ["step 1", "step 2", "step 3"]


async def test_cancelling_the_client_task_cancels_the_handler(url: str, probe: Probe) -> None:
    """Cancelling the awaiting task drops the connection; the handler sees client_disconnect."""
    probe.started.clear()
    probe.exited.clear()
    async with pinned(url) as client:
        await client.list_tools()
        async with anyio.create_task_group() as tg:
            tg.start_soon(client.call_tool, "hang", {})
            await wait_for(probe.started)
            tg.cancel_scope.cancel()
        await wait_for(probe.exited)
        assert probe.reason is CancelReason.CLIENT_DISCONNECT
        # the client and the server both keep working
        again = await client.call_tool("add", {"a": 1, "b": 1})
        assert again.structured_content == {"result": 2}


async def test_timeout_on_the_client_cancels_the_handler(url: str, probe: Probe) -> None:
    """A client-side timeout (move_on_after) is a disconnect, seen as client_disconnect."""
    probe.started.clear()
    probe.exited.clear()
    async with pinned(url) as client:
        await client.list_tools()
        with anyio.move_on_after(5) as scope:
            async with anyio.create_task_group() as tg:
                tg.start_soon(client.call_tool, "hang", {})
                await wait_for(probe.started)
                scope.cancel()
        assert scope.cancelled_caught
        await wait_for(probe.exited)
    assert probe.reason is CancelReason.CLIENT_DISCONNECT


async def test_auto_mode(url: str, wiretap: Wiretap) -> None:
    """The client's default mode discovers us first and stays on 2026-07-28."""
    async with Client(url) as client:
        assert client.protocol_version == MODERN
        assert client.server_info is not None
        assert client.server_info.name == "interop"
        assert client.server_info.version == "3.2.1"
        result = await client.call_tool("add", {"a": 20, "b": 22})
        assert result.structured_content == {"result": 42}
    assert wiretap.methods()[:2] == ["server/discover", "tools/call"]
    assert "initialize" not in wiretap.methods()


async def test_keepalive_comments_before_a_slow_result() -> None:
    """A slow call in auto mode turns into SSE with keep-alive comments; the client ignores them."""
    server = McpServer("slow")

    @server.tool()
    async def nap(seconds: float) -> str:
        """Sleeps without notifying anyone."""
        await anyio.sleep(seconds)
        return "rested"

    wiretap = Wiretap(mcp_app(server, keepalive_interval=0.05))
    with serve(wiretap) as live:
        async with pinned(live.url + "/mcp") as client:
            result = await client.call_tool("nap", {"seconds": 0.3})
    assert isinstance(result.content[0], types.TextContent)
    assert result.content[0].text == "rested"
    assert wiretap.exchanges[0].content_type == "text/event-stream"
    assert any(b": \r\n\r\n" in exchange.chunks for exchange in wiretap.exchanges)
