"""`ToolResult`: a whole `tools/call` result, for a tool that wants full control."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from mcp_asgi.protocol.jsonrpc import JsonObject
from mcp_asgi.server.content._fields import kind
from mcp_asgi.server.content.blocks import BLOCK_TYPES, ContentBlock, TextContent
from mcp_asgi.server.metadata import check_meta

NOT_A_BLOCK = "not a content block (TextContent, Image, Audio, ResourceLink, EmbeddedResource)"


@dataclass(frozen=True, slots=True)
class ToolResult:
    """A `tools/call` result in full: content blocks, structured content, `isError` and
    `_meta`, sent as given: `ToolResult(["Found 2 books."], structured_content={"count": 2})`.

    A `str` in `content` is a text block. The tool's output schema, if it has one, still
    checks `structured_content` (unless `is_error`). MCP asks a tool that returns structured
    content to return its JSON as text too, for older clients; here that is up to you.
    """

    content: Sequence[ContentBlock | str] = ()
    """The content blocks, in order; a `str` is a text block."""
    structured_content: Any = field(default=None, kw_only=True)
    """Any JSON value, or a pydantic model or dataclass (dumped in JSON mode); None for no
    `structuredContent`."""
    is_error: bool = field(default=False, kw_only=True)
    """Whether the call failed: an error the model can read and act on."""
    meta: Mapping[str, Any] | None = field(default=None, kw_only=True)
    """The result's `_meta` (the server adds its `serverInfo` to it)."""

    def __post_init__(self) -> None:
        if isinstance(self.content, (str, bytes)) or not isinstance(self.content, Sequence):
            raise TypeError(
                f"ToolResult.content must be a list of content blocks, not {kind(self.content)}"
            )
        blocks = tuple(TextContent(i) if isinstance(i, str) else i for i in self.content)
        for index, block in enumerate(blocks):
            if not isinstance(block, BLOCK_TYPES):
                raise TypeError(f"ToolResult.content[{index}] is {kind(block)}, {NOT_A_BLOCK}")
        object.__setattr__(self, "content", blocks)
        if not isinstance(self.is_error, bool):
            raise TypeError(f"ToolResult.is_error must be a bool, not {kind(self.is_error)}")
        check_meta(self.meta, owner="ToolResult")

    def to_json(self, structured: Any = None) -> JsonObject:
        """MCP's `CallToolResult` (without `resultType`, which the server adds), with
        `structured`, the JSON of `structured_content`, as its `structuredContent`."""
        blocks = (TextContent(b) if isinstance(b, str) else b for b in self.content)
        result: JsonObject = {"content": [block.to_json() for block in blocks]}
        if structured is not None:
            result["structuredContent"] = structured
        if self.is_error:
            result["isError"] = True
        meta = check_meta(self.meta, owner="ToolResult")
        if meta is not None:
            result["_meta"] = meta
        return result
