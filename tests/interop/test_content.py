"""Every kind of content over the real wire (uvicorn), read back by the official clients:
the Python SDK (`mcp` 2.x) and the TypeScript SDK v2 (`@modelcontextprotocol/client`, run
by Node from tests/node). Images and audio decode to the bytes the handlers returned; the
given schemas, titles, icons and `_meta` arrive as registered."""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, types

from mcp_asgi import (
    Audio,
    BlobResource,
    ContentBlock,
    EmbeddedResource,
    Image,
    McpServer,
    ResourceLink,
    TextContent,
    TextResource,
    ToolResult,
)
from mcp_asgi.testing import serve

from ..helpers import mcp_app
from ..servers import LATEST, MODERN

NODE_DIR = Path(__file__).parent.parent / "node"
NODE = shutil.which("node")

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC"
)
WAV = b"RIFF$\x00\x00\x00WAVEfmt \x10\x00\x00\x00\x01\x00\x01\x00@\x1f\x00\x00\x80>\x00\x00"
PDF = b"%PDF-1.7\n\x00\xff\xfe binary \x80\n%%EOF\n"

SHIPMENT = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "properties": {"address": {"type": "string"}, "pickup": {"type": "integer"}},
    "oneOf": [{"required": ["address"]}, {"required": ["pickup"]}],
    "additionalProperties": False,
}
TRACKING = {"type": "array", "items": {"type": "string"}}
ORDER = {"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"]}


def build() -> McpServer:
    server = McpServer("content-interop")

    @server.tool()
    async def image() -> Image:
        return Image(PNG, "image/png", annotations={"audience": ["user"], "priority": 0.7})

    @server.tool()
    def audio() -> Audio:
        return Audio(WAV, "audio/wav")

    @server.tool()
    async def mixed() -> list[ContentBlock | str]:
        return [
            "All of it:",
            Image(PNG, "image/png"),
            Audio(WAV, "audio/wav"),
            ResourceLink("media://album/cover.png", "cover", mime_type="image/png", size=len(PNG)),
            EmbeddedResource(
                TextResource("liner notes", uri="media://notes", mime_type="text/plain")
            ),
            EmbeddedResource(
                BlobResource(PDF, uri="media://booklet.pdf", mime_type="application/pdf")
            ),
        ]

    @server.tool(output_schema=ORDER)
    async def full() -> ToolResult:
        return ToolResult(
            [TextContent("Order 7 placed.", meta={"com.example/line": 1})],
            structured_content={"id": 7},
            meta={"com.example/trace": "abc"},
        )

    @server.tool(
        input_schema=SHIPMENT,
        output_schema=TRACKING,
        title="Ship it",
        annotations={"readOnlyHint": False, "idempotentHint": False},
        icons=[
            {"src": "https://example.com/ship.png", "mimeType": "image/png", "sizes": ["48x48"]}
        ],
        meta={"com.example/team": "logistics"},
    )
    async def shipment(address: str | None = None, pickup: int | None = None) -> list[str]:
        return [f"T{pickup or 0}"]

    @server.tool()
    async def loose() -> list[Any]:
        """Blocks under an annotation that could be data: no outputSchema is listed."""
        return ["The cover:", Image(PNG, "image/png")]

    @server.tool()
    def objects() -> list[object]:
        return [Audio(WAV, "audio/wav")]

    @server.resource("media://album", mime_type="text/plain", title="The album")
    async def album() -> list[TextResource | BlobResource]:
        return [
            TextResource("track list"),
            BlobResource(PNG, uri="media://album/cover.png", mime_type="image/png"),
            BlobResource(WAV, uri="media://album/intro.wav", mime_type="audio/wav"),
        ]

    @server.prompt()
    def look() -> list[Any]:
        return [
            "What is on this cover?",
            Image(PNG, "image/png"),
            {"role": "assistant", "content": Audio(WAV, "audio/wav")},
        ]

    return server


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    with serve(mcp_app(build())) as live:
        yield live.url + "/mcp"


def pinned(url: str) -> Client:
    return Client(url, mode=MODERN, cache=None)


async def test_python_sdk_reads_images_and_audio(url: str) -> None:
    """Image and audio blocks decode to the same bytes, with their type and annotations."""
    async with pinned(url) as client:
        image = (await client.call_tool("image", {})).content[0]
        audio = (await client.call_tool("audio", {})).content[0]
    assert isinstance(image, types.ImageContent)
    assert (base64.b64decode(image.data), image.mime_type) == (PNG, "image/png")
    assert image.annotations is not None
    assert (image.annotations.audience, image.annotations.priority) == (["user"], 0.7)
    assert isinstance(audio, types.AudioContent)
    assert (base64.b64decode(audio.data), audio.mime_type) == (WAV, "audio/wav")


async def test_python_sdk_reads_mixed_content(url: str) -> None:
    """Text, image, audio, a resource link and embedded text and blob resources, in order."""
    async with pinned(url) as client:
        result = await client.call_tool("mixed", {})
    text, image, audio, link, notes, booklet = result.content
    assert isinstance(text, types.TextContent)
    assert text.text == "All of it:"
    assert isinstance(image, types.ImageContent)
    assert base64.b64decode(image.data) == PNG
    assert isinstance(audio, types.AudioContent)
    assert base64.b64decode(audio.data) == WAV
    assert isinstance(link, types.ResourceLink)
    assert (str(link.uri), link.name, link.mime_type, link.size) == (
        "media://album/cover.png",
        "cover",
        "image/png",
        len(PNG),
    )
    assert isinstance(notes, types.EmbeddedResource)
    assert isinstance(notes.resource, types.TextResourceContents)
    assert (str(notes.resource.uri), notes.resource.text) == ("media://notes", "liner notes")
    assert isinstance(booklet, types.EmbeddedResource)
    assert isinstance(booklet.resource, types.BlobResourceContents)
    assert base64.b64decode(booklet.resource.blob) == PDF
    assert booklet.resource.mime_type == "application/pdf"


async def test_python_sdk_reads_full_results_and_given_schemas(url: str) -> None:
    """A ToolResult's blocks, structured content and _meta; the given schemas, title,
    annotations, icons and _meta as listed (the client checks structured content against
    the output schema itself)."""
    async with pinned(url) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        full = await client.call_tool("full", {})
        shipped = await client.call_tool("shipment", {"pickup": 3})
        refused = await client.call_tool("shipment", {"address": "x", "pickup": 3})
    assert full.structured_content == {"id": 7}
    assert full.meta is not None
    assert full.meta["com.example/trace"] == "abc"
    assert isinstance(full.content[0], types.TextContent)
    assert full.content[0].meta == {"com.example/line": 1}
    ship = tools["shipment"]
    assert (ship.input_schema, ship.output_schema) == (SHIPMENT, TRACKING)
    assert ship.title == "Ship it"
    assert ship.annotations is not None
    assert ship.annotations.read_only_hint is False
    assert ship.icons is not None
    assert [i.src for i in ship.icons] == ["https://example.com/ship.png"]
    assert ship.meta == {"com.example/team": "logistics"}
    assert shipped.structured_content == ["T3"]
    assert refused.is_error


@pytest.mark.parametrize("mode", [MODERN, "legacy"])
async def test_python_sdk_calls_tools_whose_annotation_may_hold_blocks(url: str, mode: str) -> None:
    """`-> list[Any]` and `-> list[object]` tools returning blocks: listed without an
    outputSchema, so the client (which checks every result against the listed schema,
    after tools/list) accepts their results, in both eras."""
    async with Client(url, mode=mode, cache=None) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        loose = await client.call_tool("loose", {})
        objects = await client.call_tool("objects", {})
    assert (tools["loose"].output_schema, tools["objects"].output_schema) == (None, None)
    assert [block.type for block in loose.content] == ["text", "image"]
    assert [block.type for block in objects.content] == ["audio"]
    assert (loose.is_error, objects.is_error) == (False, False)


async def test_python_sdk_reads_several_contents_and_prompt_blocks(url: str) -> None:
    """A resource with several contents (text and blobs); a prompt with image and audio."""
    async with pinned(url) as client:
        album = await client.read_resource("media://album")
        prompt = await client.get_prompt("look", {})
    notes, cover, intro = album.contents
    assert isinstance(notes, types.TextResourceContents)
    assert (str(notes.uri), notes.mime_type, notes.text) == (
        "media://album",
        "text/plain",
        "track list",
    )
    assert isinstance(cover, types.BlobResourceContents)
    assert base64.b64decode(cover.blob) == PNG
    assert isinstance(intro, types.BlobResourceContents)
    assert base64.b64decode(intro.blob) == WAV
    assert (intro.mime_type, str(intro.uri)) == ("audio/wav", "media://album/intro.wav")
    question, picture, reply = prompt.messages
    assert question.role == "user"
    assert isinstance(question.content, types.TextContent)
    assert picture.role == "user"
    assert isinstance(picture.content, types.ImageContent)
    assert base64.b64decode(picture.content.data) == PNG
    assert reply.role == "assistant"
    assert isinstance(reply.content, types.AudioContent)
    assert base64.b64decode(reply.content.data) == WAV


async def node_client(script: str, url: str) -> dict[str, Any]:
    """Run one of tests/node's client scripts against `url`; what it printed, as JSON."""
    assert NODE is not None
    with anyio.fail_after(25):
        done = await anyio.run_process(
            [NODE, str(NODE_DIR / script), url],
            cwd=NODE_DIR,
            check=False,
            stderr=subprocess.PIPE,
        )
    assert done.returncode == 0, done.stderr.decode()
    out: dict[str, Any] = json.loads(done.stdout)
    return out


@pytest.mark.skipif(NODE is None, reason="Node.js is not installed")
async def test_typescript_v2_client_reads_every_kind(url: str) -> None:
    """The TypeScript SDK v2 client parses every block, decodes images and audio to the
    same bytes, and sees the given schemas, title, icons and _meta."""
    package = NODE_DIR / "node_modules" / "@modelcontextprotocol" / "client"
    assert package.is_dir(), "run `npm ci --prefix tests/node` (make test does)"
    out = await node_client("content_client.mjs", url)
    assert out["protocolVersion"] == MODERN
    image, audio = out["calls"]["image"]["content"][0], out["calls"]["audio"]["content"][0]
    assert (image["hex"], image["mimeType"]) == (PNG.hex(), "image/png")
    assert image["annotations"] == {"audience": ["user"], "priority": 0.7}
    assert (audio["hex"], audio["mimeType"]) == (WAV.hex(), "audio/wav")
    mixed = out["calls"]["mixed"]["content"]
    assert [block["type"] for block in mixed] == [
        "text",
        "image",
        "audio",
        "resource_link",
        "resource",
        "resource",
    ]
    assert (mixed[1]["hex"], mixed[2]["hex"]) == (PNG.hex(), WAV.hex())
    assert mixed[3] == {
        "type": "resource_link",
        "uri": "media://album/cover.png",
        "name": "cover",
        "mimeType": "image/png",
        "size": len(PNG),
    }
    assert (mixed[4]["text"], mixed[5]["hex"]) == ("liner notes", PDF.hex())
    full = out["calls"]["full"]
    assert (full["structuredContent"], full["meta"]["com.example/trace"]) == ({"id": 7}, "abc")
    assert out["calls"]["shipment"]["structuredContent"] == ["T3"]
    assert "outputSchema" not in out["tools"]["loose"]
    loose, objects = out["calls"]["loose"], out["calls"]["objects"]
    assert [block["type"] for block in loose["content"]] == ["text", "image"]
    assert [block["type"] for block in objects["content"]] == ["audio"]
    assert (loose["isError"], objects["isError"]) == (False, False)
    ship = out["tools"]["shipment"]
    assert (ship["inputSchema"], ship["outputSchema"]) == (SHIPMENT, TRACKING)
    assert (ship["title"], ship["_meta"]) == ("Ship it", {"com.example/team": "logistics"})
    assert ship["icons"][0]["sizes"] == ["48x48"]
    assert [item.get("hex") for item in out["contents"]] == [None, PNG.hex(), WAV.hex()]
    assert out["contents"][0]["text"] == "track list"
    assert [(m["role"], m["content"]["type"]) for m in out["prompt"]] == [
        ("user", "text"),
        ("user", "image"),
        ("assistant", "audio"),
    ]
    assert out["prompt"][2]["content"]["hex"] == WAV.hex()


async def test_python_sdk_in_2025_mode(url: str) -> None:
    """A 2025-era session gets the same blocks; a non-object output schema and structured
    content are left out (2025 wants objects), the JSON text stays."""
    async with Client(url, mode="legacy") as client:
        assert client.protocol_version == LATEST
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        image = (await client.call_tool("image", {})).content[0]
        shipped = await client.call_tool("shipment", {"pickup": 3})
        full = await client.call_tool("full", {})
    assert tools["shipment"].output_schema is None
    assert tools["full"].output_schema == ORDER
    assert isinstance(image, types.ImageContent)
    assert base64.b64decode(image.data) == PNG
    assert shipped.structured_content is None
    assert isinstance(shipped.content[0], types.TextContent)
    assert shipped.content[0].text == '["T3"]'
    assert full.structured_content == {"id": 7}


@pytest.mark.skipif(NODE is None, reason="Node.js is not installed")
async def test_typescript_1x_client_in_2025_mode(url: str) -> None:
    """The TypeScript SDK 1.x client parses the tool list and every result (it refuses a
    list holding a non-object outputSchema, so that schema is left out for 2025 sessions)."""
    out = await node_client("content_legacy_client.mjs", url)
    assert out["protocolVersion"] == LATEST
    assert out["outputSchemas"]["shipment"] is None
    assert out["outputSchemas"]["full"] == ORDER
    assert out["image"] == PNG.hex()
    assert out["mixed"]["types"] == [
        "text",
        "image",
        "audio",
        "resource_link",
        "resource",
        "resource",
    ]
    assert out["full"]["structuredContent"] == {"id": 7}
    assert out["shipment"] == {"types": ["text"]}
    assert (out["outputSchemas"]["loose"], out["outputSchemas"]["objects"]) == (None, None)
    assert out["loose"] == {"types": ["text", "image"]}
    assert out["objects"] == {"types": ["audio"]}
