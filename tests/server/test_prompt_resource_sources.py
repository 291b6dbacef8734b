"""`PromptSource` and `ResourceSource`, with small sources of their own: listed beside
the decorated prompts and resources, named (prefix, names), a URI routed to the source
that lists it, to a template it expands, or by the prefix it starts with; the scopes of
a source's items; a change announced to listeners; a resource update announced under the
exposed URI."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import anyio
import pytest

from mcp_asgi import Context, McpServer, PromptSource, ResourceSource, SourceItem
from mcp_asgi.bus.in_process import ChangeEvent
from mcp_asgi.protocol.jsonrpc import JsonObject

from ..helpers import call, mcp_app


class Prompts(PromptSource):
    """Prompts named as given; a get answers the prompt's name and arguments."""

    def __init__(self, offered: Sequence[str], **options: Any) -> None:
        super().__init__(**options)
        self.offered = list(offered)

    async def list_items(self, ctx: Context) -> Sequence[SourceItem]:
        return [SourceItem(name, {"description": f"the {name} prompt"}) for name in self.offered]

    async def get_prompt(
        self, prompt: SourceItem, arguments: dict[str, Any], ctx: Context
    ) -> JsonObject:
        text = f"{prompt.name} {sorted(arguments.items())}"
        return {"messages": [{"role": "user", "content": {"type": "text", "text": text}}]}


class Files(ResourceSource):
    """Two files and a template; a read answers the URI it was asked."""

    async def list_items(self, ctx: Context) -> Sequence[SourceItem]:
        return [
            SourceItem("file:///a", {"uri": "file:///a", "name": "a"}),
            SourceItem("file:///b", {"uri": "file:///b", "name": "b"}),
            SourceItem("file:///logs/{day}", {"uriTemplate": "file:///logs/{day}", "name": "l"}),
        ]

    async def read_resource(self, uri: str, ctx: Context) -> JsonObject:
        return {"contents": [{"uri": uri, "text": f"read {uri}"}]}


async def test_prompts_beside_decorated_ones() -> None:
    """A source's prompts are listed after ours under its prefix (or `names`); a get
    reaches the source with its own name; a name taken is not exposed again."""
    server = McpServer("s")

    @server.prompt(name="p_hello")
    async def hello() -> str:
        return "ours"

    server.add_source(Prompts(["hello", "bye", "x"], prefix="p_", names={"x": "ex"}))
    app = mcp_app(server)
    listed = (await call(app, "prompts/list")).result["prompts"]
    assert [prompt["name"] for prompt in listed] == ["p_hello", "p_bye", "ex"]
    assert listed[1]["description"] == "the bye prompt"
    got = await call(app, "prompts/get", {"name": "ex", "arguments": {"k": "v"}})
    assert got.result["messages"][0]["content"]["text"] == "x [('k', 'v')]"
    ours = await call(app, "prompts/get", {"name": "p_hello"})
    assert ours.result["messages"][0]["content"]["text"] == "ours"
    assert (await call(app, "server/discover")).result["capabilities"]["prompts"]


async def test_resources_routed() -> None:
    """Resources and templates are listed under the prefix; a read is routed to the
    source by the URI it lists, a template it expands, or its prefix (an unlisted URI:
    the source decides), with the source's own URI; `names` maps one URI both ways."""
    server = McpServer("s")
    server.add_source(Files(prefix="f+", names={"file:///b": "notes://b"}))
    app = mcp_app(server)
    resources = (await call(app, "resources/list")).result["resources"]
    assert [r["uri"] for r in resources] == ["f+file:///a", "notes://b"]
    templates = (await call(app, "resources/templates/list")).result["resourceTemplates"]
    assert [t["uriTemplate"] for t in templates] == ["f+file:///logs/{day}"]
    for exposed, own in [
        ("f+file:///a", "file:///a"),
        ("notes://b", "file:///b"),
        ("f+file:///logs/monday", "file:///logs/monday"),
        ("f+file:///unlisted", "file:///unlisted"),
    ]:
        read = await call(app, "resources/read", {"uri": exposed})
        assert read.result["contents"][0]["text"] == f"read {own}", exposed
    missing = await call(app, "resources/read", {"uri": "file:///a"})
    assert missing.error is not None
    assert missing.error["message"] == "Resource not found: file:///a"


def test_scopes_and_refusals() -> None:
    """A source's scopes are its items' (a URI by routing); what is not a source is
    refused by add_source, naming the three kinds."""
    server = McpServer("s", default_scopes=["base"])
    server.add_source(Files(prefix="f+", scopes=["files"]))
    server.add_source(Prompts(["hello"], scopes=["prompts"]))
    assert server.required_scopes("resources/read", {"uri": "f+file:///x"}) == {"files"}
    assert server.declared_scopes() == {"base", "files", "prompts"}
    with pytest.raises(TypeError, match=r"ToolSource .*PromptSource or a ResourceSource"):
        server.add_source(object())  # type: ignore[arg-type]


async def test_changes_and_updates_announced() -> None:
    """`changed()` of a prompt source tells prompts listeners; `updated(uri)` of a
    resource source announces the exposed URI's update."""
    server = McpServer("s")
    prompts, files = Prompts(["hello"]), Files(prefix="f+")
    server.add_source(prompts)
    server.add_source(files)
    async with server.bus.running(), server.bus.subscribe() as events:
        prompts.changed()
        files.updated("file:///a")
        seen: list[ChangeEvent] = []
        with anyio.fail_after(5):
            async for event in events:
                seen.append(event)
                if len(seen) == 2:
                    break
    assert set(seen) == {
        ChangeEvent("prompts_list_changed"),
        ChangeEvent("resource_updated", "f+file:///a"),
    }


async def test_scopes_of_an_unread_source() -> None:
    """Before a pass-through source is read, a URI it may serve needs its scopes (the
    strictest answer); once read, a URI it does not serve needs the default."""
    server = McpServer("s", default_scopes=["base"])
    server.add_source(FilesAtStart(scopes=["files"]))
    assert server.required_scopes("resources/read", {"uri": "file:///a"}) == {"base", "files"}
    async with server.running():
        assert server.required_scopes("resources/read", {"uri": "file:///a"}) == {"files"}
        assert server.required_scopes("resources/read", {"uri": "other://x"}) == {"base"}


class FilesAtStart(Files):
    """Listed when the server starts."""

    async def list_at_start(self) -> Sequence[SourceItem]:
        return await self.list_items(None)  # type: ignore[arg-type]
