"""docs/handlers.md stays true: its examples of what a handler may return, and of schemas,
titles and icons, run on one server, and every tool, resource and prompt they register
answers with a result the official SDK's types accept (the 2026-07-28 shapes)."""

from __future__ import annotations

import re
import struct
import textwrap
import zlib
from pathlib import Path
from typing import Any

import pytest
from mcp import types

from mcp_asgi import McpServer

from .helpers import call, mcp_app

PAGE = Path(__file__).resolve().parent.parent / "docs" / "handlers.md"
SECTIONS = ("What a handler may return", "Schemas, titles, icons and `_meta`")
_BLOCK = re.compile(r"```python\n(.*?)```", re.DOTALL)

# What each example tool answers with (its content blocks' types), called with these
# arguments (else none): a new example must be added here, or the test fails.
CONTENT = {
    "greet": ["text"],
    "price": ["text"],
    "chart": ["image"],
    "jingle": ["audio"],
    "report": ["text", "image", "text"],
    "invoice": ["resource_link", "resource", "resource"],
    "restock": ["text", "image"],
    "ship": ["text"],
    "cancel_order": ["text"],
}
ARGUMENTS = {"ship": {"address": "1 Main St"}}


def sections(text: str, titles: tuple[str, ...]) -> str:
    """The text of the `## ` sections called `titles`."""
    parts = re.split(r"^## ", text, flags=re.MULTILINE)
    return "\n".join(p for p in parts if p.split("\n", 1)[0].strip() in titles)


def png() -> bytes:
    """A real 1x1 PNG."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)
    pixels = zlib.compress(b"\x00\xff\x00\x00")
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")
    )


@pytest.fixture
def server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> McpServer:
    """The page's server, its examples run in order in a folder with the files they read."""
    (tmp_path / "chart.png").write_bytes(png())
    (tmp_path / "hello.wav").write_bytes(b"RIFF\x24\x00\x00\x00WAVEfmt ")
    (tmp_path / "report.pdf").write_bytes(b"%PDF-1.7\n%%EOF\n")
    monkeypatch.chdir(tmp_path)
    blocks = _BLOCK.findall(sections(PAGE.read_text(encoding="utf-8"), SECTIONS))
    assert len(blocks) >= 10
    namespace: dict[str, Any] = {"__name__": "handlers_md"}
    for block in blocks:
        exec(compile(textwrap.dedent(block), str(PAGE), "exec"), namespace)
    built = namespace["server"]
    assert isinstance(built, McpServer)
    return built


async def test_every_example_tool_answers_with_its_blocks(server: McpServer) -> None:
    """Each tool's result is a valid CallToolResult with the blocks the page shows."""
    app = mcp_app(server)
    listed = types.ListToolsResult.model_validate((await call(app, "tools/list")).result)
    assert sorted(tool.name for tool in listed.tools) == sorted(CONTENT)
    for name, kinds in CONTENT.items():
        params = {"name": name, "arguments": ARGUMENTS.get(name, {})}
        raw = (await call(app, "tools/call", params)).result
        result = types.CallToolResult.model_validate(raw)
        assert not result.is_error, (name, raw["content"])
        assert [block.type for block in result.content] == kinds, name


async def test_every_example_resource_and_prompt_answers(server: McpServer) -> None:
    """Each resource reads, and each prompt renders, into the SDK's result types."""
    app = mcp_app(server)
    listed = types.ListResourcesResult.model_validate((await call(app, "resources/list")).result)
    assert {str(r.uri) for r in listed.resources} == {"shop://catalogue", "shop://terms"}
    for resource in listed.resources:
        raw = (await call(app, "resources/read", {"uri": str(resource.uri)})).result
        assert types.ReadResourceResult.model_validate(raw).contents
    prompts = types.ListPromptsResult.model_validate((await call(app, "prompts/list")).result)
    assert {p.name for p in prompts.prompts} == {"review_chart", "weekly"}
    for prompt in prompts.prompts:
        raw = (await call(app, "prompts/get", {"name": prompt.name})).result
        assert types.GetPromptResult.model_validate(raw).messages
