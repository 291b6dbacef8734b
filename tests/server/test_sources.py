"""`ToolSource`, the abstraction every source of tools shares (the app's routes, a
downstream MCP server), with a small source of its own: selection, naming, names taken,
a list that fails, the list-change relay, scopes and timeouts."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import anyio
import pytest

from mcp_asgi import Context, McpServer, SourceItem, ToolSource
from mcp_asgi.bus.in_process import InProcessBus
from mcp_asgi.protocol.jsonrpc import JsonObject
from mcp_asgi.server.sources import Selection, tool_name

from ..helpers import call, mcp_app

SCHEMA: JsonObject = {"type": "object", "properties": {"x": {"type": "integer"}}}


class Catalog(ToolSource):
    """A source offering the tools it is given (like a downstream server's tools/list)."""

    def __init__(self, offered: Sequence[str], **options: Any) -> None:
        super().__init__(**options)
        self.names = list(offered)
        self.lists = 0
        self.fail = False

    async def list_tools(self, ctx: Context) -> Sequence[SourceItem]:
        self.lists += 1
        if self.fail:
            raise ConnectionError("the downstream server is unreachable")
        return [
            SourceItem(
                name,
                {"inputSchema": SCHEMA, "description": f"the {name} tool"},
                frozenset({f"tag:{name.split('_')[0]}"}),
                handle=name,
            )
            for name in self.names
        ]

    async def call_tool(
        self, tool: SourceItem, arguments: dict[str, Any], ctx: Context
    ) -> JsonObject:
        if tool.handle == "boom_now":
            raise RuntimeError("downstream broke")
        return {"content": [{"type": "text", "text": f"{tool.handle}({arguments.get('x')})"}]}


async def listed(app: Any) -> list[str]:
    return [tool["name"] for tool in (await call(app, "tools/list")).result["tools"]]


def test_selection() -> None:
    """Names and patterns, kind:pattern over labels, name: explicitly, exclude last."""
    labels = frozenset({"tag:orders", "path:/orders/{id}", "method:GET"})
    assert Selection(None, ()).selects("get_order", labels)
    assert Selection(["get_*"], ()).selects("get_order", labels)
    assert Selection(["tag:orders"], ()).selects("x", labels)
    assert Selection(["path:/orders/*"], ["method:GET"]).selects("x", labels) is False
    assert Selection(["name:a:b"], ()).selects("a:b")
    assert Selection(["tag:other", "get_order"], ()).selects("get_order", labels)
    assert not Selection(["tag:other"], ()).selects("get_order", labels)
    assert tool_name("get order/ü") == "get_order__"
    assert len(tool_name("x" * 300)) == 128


async def test_a_source_beside_decorated_tools() -> None:
    """Selected and named tools are listed after the decorated ones and called; a name
    taken is not exposed again (logged); the source is listed once until it changes."""
    server = McpServer("s")

    @server.tool()
    async def a_one() -> str:
        return "decorated"

    source = Catalog(
        ["a_one", "a_two", "b_three", "c_four"],
        exclude=["tag:c"],
        names={"a_two": "second"},
        prefix="d.",
    )
    server.add_source(source)
    server.add_source(Catalog(["b_three"], prefix="d."))  # d.b_three is taken: not again
    app = mcp_app(server)
    assert await listed(app) == ["a_one", "d.a_one", "second", "d.b_three"]
    result = await call(app, "tools/call", {"name": "second", "arguments": {"x": 2}})
    assert result.result["content"][0]["text"] == "a_two(2)"
    decorated = await call(app, "tools/call", {"name": "a_one", "arguments": {}})
    assert decorated.result["content"][0]["text"] == "decorated"
    assert source.lists == 1


async def test_a_call_reads_the_list_first_and_a_failure_is_an_error_result(
    caplog: pytest.LogCaptureFixture,
) -> None:
    server = McpServer("s")
    server.add_source(Catalog(["boom_now", "fine"]))
    app = mcp_app(server)
    fine = await call(app, "tools/call", {"name": "fine", "arguments": {"x": 1}})
    assert fine.result["content"][0]["text"] == "fine(1)"
    broke = await call(app, "tools/call", {"name": "boom_now", "arguments": {}})
    assert broke.result == broke.result | {"isError": True}
    assert broke.result["content"][0]["text"] == "Tool 'boom_now' failed: RuntimeError"
    assert any("boom_now" in r.getMessage() for r in caplog.records if r.name == "mcp_asgi.errors")
    unknown = await call(app, "tools/call", {"name": "nope", "arguments": {}})
    assert unknown.error["message"] == "Unknown tool: nope"


async def test_a_list_that_fails_keeps_the_last_one_and_changed_reads_it_again(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """changed(): the list is read again at the next tools/list, and listeners told."""
    bus = InProcessBus()
    server = McpServer("s", bus=bus)
    source = Catalog(["one"])
    server.add_source(source)
    app = mcp_app(server)
    assert await listed(app) == ["one"]
    source.fail = True
    source.changed()
    assert await listed(app) == ["one"]  # kept; logged
    assert any(
        r.getMessage() == "Catalog: its tools could not be listed"
        for r in caplog.records
        if r.levelno == logging.WARNING
    )
    source.fail = False
    source.names.append("two")
    assert await listed(app) == ["one", "two"]  # still stale: read again
    assert source.lists == 3


async def test_changed_announces_tools_list_changed() -> None:
    bus = InProcessBus()
    server = McpServer("s", bus=bus)
    source = Catalog(["one"])
    server.add_source(source)
    async with bus.running(), bus.subscribe() as events:
        source.changed()
        with anyio.fail_after(5):
            event = await events.__anext__()
    assert event.kind == "tools_list_changed"


async def test_capabilities_scopes_and_timeouts() -> None:
    """A server with only a source advertises tools; the source's scopes and timeout
    apply to its tools, before and after its list is read."""
    server = McpServer("s", default_scopes=["base"])
    source = Catalog(["one"], scopes=["extra"], timeout=3.0)
    server.add_source(source)
    assert "tools" in server.capabilities()
    assert server.has_method("tools/call")
    assert server.required_scopes("tools/call", {"name": "one"}) == {"base", "extra"}
    assert server.declared_scopes() == {"base", "extra"}
    app = mcp_app(server, auth_host_identity=True)  # scopes need authorization on

    async def signed_in(scope: Any, receive: Any, send: Any) -> None:
        await app({**scope, "auth": {"sub": "me", "scope": "base extra"}}, receive, send)

    assert await listed(signed_in) == ["one"]
    assert server.required_scopes("tools/call", {"name": "one"}) == {"extra"}
    assert server.scopes_of("tool", "one") == {"extra"}


def test_a_source_is_added_once_and_must_be_one() -> None:
    server = McpServer("s")
    source = Catalog([])
    server.add_source(source)
    with pytest.raises(ValueError, match="already added"):
        server.add_source(source)
    with pytest.raises(TypeError, match="ToolSource"):
        server.add_source(object())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="timeout"):
        Catalog([], timeout=0)
    with pytest.raises(TypeError, match="names"):
        Catalog([], names={"a": ""})
