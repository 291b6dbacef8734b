"""What a handler may return: content blocks, ToolResult, several resource contents, prompt
messages with any block, and the isError (tools) or -32603 (resources, prompts) a shape
that cannot be sent gets."""

from __future__ import annotations

import base64
import json
import logging
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

import pytest
from pydantic import BaseModel

import mcp_asgi
from mcp_asgi import (
    Audio,
    BlobResource,
    ContentBlock,
    EmbeddedResource,
    Image,
    McpMiddleware,
    McpServer,
    ResourceLink,
    TextContent,
    TextResource,
    ToolResult,
)

from ..helpers import call, mcp_app

untyped: Any = mcp_asgi  # for blocks made wrongly on purpose, past the type checker

PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01"
WAV = b"RIFF$\x00\x00\x00WAVEfmt "
B64_PNG = base64.b64encode(PNG).decode()
B64_WAV = base64.b64encode(WAV).decode()


class Count(BaseModel):
    count: int


def build() -> McpServer:
    server = McpServer("content")

    @server.tool()
    async def chart() -> Image:
        """One image."""
        return Image(PNG, "image/png", annotations={"audience": ["user"], "priority": 0.5})

    @server.tool()
    async def everything() -> list[ContentBlock | str]:
        """Every kind of block, and a str, in order."""
        return [
            "Here it is:",
            TextContent("annotated", annotations={"priority": 1}, meta={"com.example/n": 1}),
            Image(PNG, "image/png"),
            Audio(WAV, "audio/wav"),
            ResourceLink(
                "file:///logs/today.txt",
                "today.txt",
                title="Today's log",
                description="What happened today",
                mime_type="text/plain",
                size=12,
                icons=[{"src": "https://example.com/log.png", "mimeType": "image/png"}],
            ),
            EmbeddedResource(TextResource("a,b", uri="file:///data.csv", mime_type="text/csv")),
            EmbeddedResource(BlobResource(PNG, uri="file:///chart.png", mime_type="image/png")),
        ]

    @server.tool()
    async def lookalike() -> Any:
        """A dict shaped like an image block is data."""
        return [{"type": "image", "data": B64_PNG, "mimeType": "image/png"}]

    @server.tool()
    async def full(fail: bool = False) -> ToolResult:
        """Full control over the result."""
        return ToolResult(
            ["Found 2.", Image(PNG, "image/png")],
            structured_content=Count(count=2),
            is_error=fail,
            meta={"com.example/trace": "t1"},
        )

    @server.tool()
    async def returns(what: str) -> Any:
        """Returns a shape that cannot be sent."""
        bad: dict[str, Any] = {
            "list-with-dict": [Image(PNG, "image/png"), {"a": 1}],
            "list-with-number": [TextContent("fine"), 42],
            "contents": TextResource("not a block", uri="file:///x"),
            "nested-result": [ToolResult(["x"]), TextContent("y")],
            "not-json": ToolResult(["x"], structured_content=object()),
        }
        return bad[what]

    @server.tool()
    async def builds(what: str) -> Any:
        """Builds a block wrongly: the constructor's error is the tool's error."""
        if what == "base64":
            return Image(B64_PNG, "image/png")  # type: ignore[arg-type]
        return Audio(WAV, "image/png")

    @server.resource("res://one/image", mime_type="image/png")
    async def one_image() -> bytes:
        return PNG

    @server.resource("res://folder", mime_type="text/plain")
    async def folder() -> list[TextResource | BlobResource]:
        """Several contents: the first takes the URI read and the resource's type."""
        return [
            TextResource("index"),
            TextResource('{"a": 1}', uri="res://folder/a.json", mime_type="application/json"),
            BlobResource(PNG, uri="res://folder/chart.png", mime_type="image/png"),
        ]

    @server.resource("res://single")
    async def single() -> TextResource:
        return TextResource("alone", mime_type="text/markdown", meta={"com.example/v": 2})

    @server.resource("res://broken")
    async def broken() -> Any:
        return [TextResource("fine"), "not contents"]

    @server.resource("res://block")
    async def block() -> Any:
        return Image(PNG, "image/png")

    @server.prompt()
    def describe_chart() -> list[Any]:
        """A user message with text, then one with an image; an assistant reply."""
        return [
            "Describe this chart:",
            Image(PNG, "image/png"),
            {"role": "assistant", "content": "It rises."},
            {"role": "user", "content": EmbeddedResource(TextResource("x", uri="file:///x"))},
            {
                "role": "user",
                "content": {"type": "audio", "data": B64_WAV, "mimeType": "audio/wav"},
            },
        ]

    @server.prompt()
    def bad_role() -> Any:
        return {"role": "system", "content": "You are..."}

    @server.prompt()
    def bad_content() -> Any:
        return [{"role": "user", "content": 42}]

    return server


@pytest.fixture(scope="module")
def app() -> McpMiddleware:
    return mcp_app(build())


async def call_tool(app: McpMiddleware, name: str, **arguments: Any) -> dict[str, Any]:
    reply = await call(app, "tools/call", {"name": name, "arguments": arguments})
    return reply.result


# -- blocks, on their own ----------------------------------------------------------------------


def test_blocks_serialise_to_the_schema_shapes() -> None:
    """Each block's to_json is exactly its 2026-07-28 shape, optional fields only if set."""
    assert TextContent("hi").to_json() == {"type": "text", "text": "hi"}
    assert Image(PNG, "image/png", meta={"k": 1}).to_json() == {
        "type": "image",
        "data": B64_PNG,
        "mimeType": "image/png",
        "_meta": {"k": 1},
    }
    assert Audio(
        WAV, "audio/wav", annotations={"lastModified": "2026-07-28T00:00:00Z"}
    ).to_json() == {
        "type": "audio",
        "data": B64_WAV,
        "mimeType": "audio/wav",
        "annotations": {"lastModified": "2026-07-28T00:00:00Z"},
    }
    assert ResourceLink("urn:isbn:0451450523", "book").to_json() == {
        "type": "resource_link",
        "uri": "urn:isbn:0451450523",
        "name": "book",
    }
    embedded = EmbeddedResource(BlobResource(b"\x00", uri="file:///z"), annotations={})
    assert embedded.to_json() == {
        "type": "resource",
        "resource": {"uri": "file:///z", "blob": "AA=="},
        "annotations": {},
    }
    assert ToolResult().to_json() == {"content": []}


@pytest.mark.parametrize(
    ("make", "error", "words"),
    [
        (lambda: untyped.TextContent(3), TypeError, "TextContent.text must be a str, not an int"),
        (lambda: untyped.Image("aGk=", "image/png"), TypeError, "not base64 text"),
        (lambda: untyped.Image(PNG, "audio/wav"), ValueError, "image/... type, not 'audio/wav'"),
        (lambda: untyped.Audio(WAV, None), TypeError, "Audio.mime_type must be a str, not None"),
        (lambda: untyped.ResourceLink("today.txt", "t"), ValueError, "not a URI with a scheme"),
        (lambda: untyped.ResourceLink("file:///t", "t", size=-1), ValueError, "size must be"),
        (lambda: untyped.ResourceLink("file:///t", "t", icons=[{"url": "x"}]), ValueError, "icons"),
        (lambda: untyped.EmbeddedResource(untyped.TextResource("x")), ValueError, "needs the uri"),
        (lambda: untyped.EmbeddedResource("x"), TypeError, "TextResource or a BlobResource"),
        (lambda: untyped.TextContent("x", annotations={"priority": 3}), ValueError, "priority"),
        (lambda: untyped.TextContent("x", annotations={"audiences": []}), ValueError, "audiences"),
        (lambda: untyped.TextContent("x", meta={"not a key": 1}), ValueError, "_meta key"),
        (lambda: untyped.BlobResource("text"), TypeError, "BlobResource.blob must be bytes"),
        (lambda: untyped.ToolResult("text"), TypeError, "list of content blocks, not a str"),
        (lambda: untyped.ToolResult([{"type": "text"}]), TypeError, "content[0] is a dict"),
        (lambda: untyped.ToolResult(is_error="yes"), TypeError, "is_error must be a bool"),
    ],
)
def test_blocks_refuse_wrong_fields(make: Any, error: type[Exception], words: str) -> None:
    """A block made wrongly fails at once, naming the class, the field and the problem."""
    with pytest.raises(error, match=re.escape(words)):
        make()


def test_from_file_guesses_the_type(tmp_path: Path) -> None:
    """from_file reads the bytes and takes the type from the suffix, or refuses to guess."""
    (tmp_path / "chart.PNG").write_bytes(PNG)
    (tmp_path / "hello.wav").write_bytes(WAV)
    (tmp_path / "report.pdf").write_bytes(b"%PDF")
    (tmp_path / "blob").write_bytes(b"?")
    assert Image.from_file(tmp_path / "chart.PNG") == Image(PNG, "image/png")
    assert Audio.from_file(str(tmp_path / "hello.wav")) == Audio(WAV, "audio/wav")
    assert Image.from_file(tmp_path / "blob", mime_type="image/gif").mime_type == "image/gif"
    report = BlobResource.from_file(tmp_path / "report.pdf")
    assert (report.uri, report.mime_type) == ((tmp_path / "report.pdf").as_uri(), "application/pdf")
    assert BlobResource.from_file(tmp_path / "blob", uri="x:blob").mime_type is None
    with pytest.raises(ValueError, match=r"cannot tell the image type of 'hello.wav'"):
        Image.from_file(tmp_path / "hello.wav")


# -- tools ----------------------------------------------------------------------------------------


async def test_an_image_is_one_image_block(app: McpMiddleware) -> None:
    """A returned Image is the result's one block, base64 and annotated; no outputSchema."""
    result = await call_tool(app, "chart")
    assert result["content"] == [
        {
            "type": "image",
            "data": B64_PNG,
            "mimeType": "image/png",
            "annotations": {"audience": ["user"], "priority": 0.5},
        }
    ]
    assert "structuredContent" not in result
    tools = (await call(app, "tools/list")).result["tools"]
    assert [t for t in tools if "outputSchema" in t] == []


async def test_a_list_of_blocks_is_mixed_content(app: McpMiddleware) -> None:
    """A list with blocks is content, in order; its str items are text blocks."""
    content = (await call_tool(app, "everything"))["content"]
    assert [block["type"] for block in content] == [
        "text",
        "text",
        "image",
        "audio",
        "resource_link",
        "resource",
        "resource",
    ]
    assert content[1] == {
        "type": "text",
        "text": "annotated",
        "annotations": {"priority": 1.0},
        "_meta": {"com.example/n": 1},
    }
    assert content[4] == {
        "type": "resource_link",
        "uri": "file:///logs/today.txt",
        "name": "today.txt",
        "title": "Today's log",
        "description": "What happened today",
        "mimeType": "text/plain",
        "size": 12,
        "icons": [{"src": "https://example.com/log.png", "mimeType": "image/png"}],
    }
    assert content[5]["resource"] == {
        "uri": "file:///data.csv",
        "mimeType": "text/csv",
        "text": "a,b",
    }
    assert base64.b64decode(content[6]["resource"]["blob"]) == PNG


async def test_dicts_shaped_like_blocks_are_data(app: McpMiddleware) -> None:
    """Plain dicts and lists are data, even when they look like content blocks."""
    content = (await call_tool(app, "lookalike"))["content"]
    assert content == [
        {
            "type": "text",
            "text": json.dumps([{"type": "image", "data": B64_PNG, "mimeType": "image/png"}]),
        }
    ]


async def test_tool_result_is_sent_as_given(app: McpMiddleware) -> None:
    """A ToolResult sets content, structuredContent, isError and _meta (serverInfo added)."""
    result = await call_tool(app, "full")
    assert result["content"] == [
        {"type": "text", "text": "Found 2."},
        {"type": "image", "data": B64_PNG, "mimeType": "image/png"},
    ]
    assert result["structuredContent"] == {"count": 2}
    assert "isError" not in result
    assert result["_meta"]["com.example/trace"] == "t1"
    assert "io.modelcontextprotocol/serverInfo" in result["_meta"]
    assert (await call_tool(app, "full", fail=True))["isError"] is True


@pytest.mark.parametrize(
    ("what", "words"),
    [
        ("list-with-dict", "item 1 of the list is a dict, not a content block"),
        ("list-with-number", "item 1 of the list is an int"),
        ("contents", "TextResource is a resource's contents, not a content block"),
        ("nested-result", "item 0 of the list is a ToolResult"),
        ("not-json", "Unable to serialize unknown type"),
    ],
)
async def test_a_shape_that_cannot_be_sent_is_an_error_result(
    app: McpMiddleware, caplog: pytest.LogCaptureFixture, what: str, words: str
) -> None:
    """A wrong return shape is an isError text naming the problem, logged as an ERROR."""
    with caplog.at_level(logging.ERROR, logger="mcp_asgi.errors"):
        result = await call_tool(app, "returns", what=what)
    assert result["isError"] is True
    text = result["content"][0]["text"]
    assert text.startswith("Tool 'returns' returned an invalid result: ")
    assert words in text
    assert [r.levelname for r in caplog.records if r.name == "mcp_asgi.errors"] == ["ERROR"]


@pytest.mark.parametrize(
    ("what", "words"),
    [("base64", "Image.data must be bytes"), ("family", "Audio.mime_type must be an audio/")],
)
async def test_a_block_built_wrongly_fails_the_tool(
    app: McpMiddleware, what: str, words: str
) -> None:
    """The block's own check raises in the handler: an isError result saying why."""
    result = await call_tool(app, "builds", what=what)
    assert result["isError"] is True
    assert words in result["content"][0]["text"]


# -- resources ------------------------------------------------------------------------------------


async def test_several_contents(app: McpMiddleware) -> None:
    """A list of TextResource and BlobResource is several contents; the URI read and the
    resource's mime_type fill in what an item leaves out."""
    contents = (await call(app, "resources/read", {"uri": "res://folder"})).result["contents"]
    assert contents == [
        {"uri": "res://folder", "mimeType": "text/plain", "text": "index"},
        {"uri": "res://folder/a.json", "mimeType": "application/json", "text": '{"a": 1}'},
        {"uri": "res://folder/chart.png", "mimeType": "image/png", "blob": B64_PNG},
    ]


async def test_one_resource_contents_with_meta(app: McpMiddleware) -> None:
    """One TextResource: its own mimeType and _meta."""
    contents = (await call(app, "resources/read", {"uri": "res://single"})).result["contents"]
    assert contents == [
        {
            "uri": "res://single",
            "mimeType": "text/markdown",
            "text": "alone",
            "_meta": {"com.example/v": 2},
        }
    ]


@pytest.mark.parametrize(
    ("uri", "words"),
    [
        ("res://broken", "item 1 of the list is a str, not a TextResource or BlobResource"),
        ("res://block", "Image is not a resource's contents"),
    ],
)
async def test_resource_shape_that_cannot_be_sent(app: McpMiddleware, uri: str, words: str) -> None:
    """A resource returning a wrong shape is -32603 with a message naming the problem."""
    error = (await call(app, "resources/read", {"uri": uri})).error
    assert error["code"] == -32603
    assert error["message"].startswith(f"Resource {uri!r} returned an invalid result: ")
    assert words in error["message"]


# -- prompts -------------------------------------------------------------------------------------


async def test_prompt_messages_with_image_blocks(app: McpMiddleware) -> None:
    """A block is a user message; a {role, content} dict may carry a block or a block's dict."""
    result = (await call(app, "prompts/get", {"name": "describe_chart"})).result
    assert result["messages"] == [
        {"role": "user", "content": {"type": "text", "text": "Describe this chart:"}},
        {"role": "user", "content": {"type": "image", "data": B64_PNG, "mimeType": "image/png"}},
        {"role": "assistant", "content": {"type": "text", "text": "It rises."}},
        {
            "role": "user",
            "content": {"type": "resource", "resource": {"uri": "file:///x", "text": "x"}},
        },
        {"role": "user", "content": {"type": "audio", "data": B64_WAV, "mimeType": "audio/wav"}},
    ]


@pytest.mark.parametrize(
    ("name", "words"),
    [
        ("bad_role", "message 0 has the role 'system'"),
        ("bad_content", "message 0 is an int, not a content block"),
    ],
)
async def test_prompt_shape_that_cannot_be_sent(app: McpMiddleware, name: str, words: str) -> None:
    """A prompt returning a wrong shape is -32603 with a message naming the problem."""
    error = (await call(app, "prompts/get", {"name": name})).error
    assert error["code"] == -32603
    assert words in error["message"]


# -- a result never breaks the outputSchema its tool lists ----------------------------------------

ORDER = {"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"]}


def _returning(annotation: Any) -> Any:
    async def handler() -> None: ...

    handler.__annotations__ = {"return": annotation}
    return handler


@pytest.mark.parametrize(
    ("annotation", "listed"),
    [
        (list[Any], False),
        (list[object], False),
        (object, False),
        (list, False),
        (tuple[Any, ...], False),
        (Sequence[object], False),
        (list[int | Any] | None, False),
        (Annotated[list[Any], "why"], False),
        (list[int], True),
        (dict[str, Any], True),
        (Count, True),
    ],
    ids=str,
)
async def test_an_annotation_that_may_hold_blocks_lists_no_output_schema(
    annotation: Any, listed: bool
) -> None:
    """`-> list[Any]` or `-> object` may be content blocks, which carry no structured
    content: such a tool lists no outputSchema (data it returns is JSON text)."""
    server = McpServer("open")
    server.tool(name="t")(_returning(annotation))
    tools = (await call(mcp_app(server), "tools/list")).result["tools"]
    assert ("outputSchema" in tools[0]) is listed


async def test_a_result_without_structured_content_is_an_error_if_a_schema_is_listed(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Blocks, or a ToolResult without structured_content, from a tool whose given
    outputSchema promises structured content: an isError result saying so (clients refuse
    a result that is not); an isError ToolResult needs none."""
    server = McpServer("promised")

    @server.tool(output_schema=ORDER)
    async def blocks() -> list[Any]:
        return ["Order 7", Image(PNG, "image/png")]

    @server.tool(output_schema=ORDER)
    async def bare() -> ToolResult:
        return ToolResult(["Order 7"])

    @server.tool(output_schema=ORDER)
    async def failed() -> ToolResult:
        return ToolResult(["no order"], is_error=True)

    app = mcp_app(server)
    with caplog.at_level(logging.ERROR, logger="mcp_asgi.errors"):
        results = {
            name: (await call(app, "tools/call", {"name": name})).result
            for name in ("blocks", "bare", "failed")
        }
    for name, what in (("blocks", "content blocks"), ("bare", "a ToolResult without")):
        assert results[name]["isError"] is True
        text = results[name]["content"][0]["text"]
        assert f"returned {what}" in text
        assert "outputSchema promises structured content" in text
    assert results["failed"]["content"] == [{"type": "text", "text": "no order"}]
    assert results["failed"]["isError"] is True
