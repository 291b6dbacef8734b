"""What a handler returned, read as content: the blocks of a tool's result, the contents of
a resource, the content of a prompt message. A shape that cannot be sent is an
`InvalidResult` saying what is wrong where; plain data (dicts, lists, numbers, models) is
left to the caller (None)."""

from __future__ import annotations

import collections.abc
import types
import typing
from typing import Any

from mcp_asgi.protocol.jsonrpc import JsonObject
from mcp_asgi.server.content._fields import kind
from mcp_asgi.server.content.blocks import BLOCK_TYPES, TextContent
from mcp_asgi.server.content.resources import BlobResource, ResourceContents, TextResource
from mcp_asgi.server.content.result import NOT_A_BLOCK, ToolResult

_CONTENTS = (TextResource, BlobResource)
_BLOCK_TYPE_NAMES = frozenset({"text", "image", "audio", "resource_link", "resource"})
_UNIONS = (typing.Union, types.UnionType)
# what a list or tuple (the containers tool_content reads) may be annotated as
_SEQUENCES = (
    list,
    tuple,
    collections.abc.Sequence,
    collections.abc.MutableSequence,
    collections.abc.Collection,
    collections.abc.Iterable,
)


class InvalidResult(ValueError):
    """A handler returned something that cannot be sent as its result."""


def may_be_content(annotation: Any) -> bool:
    """Whether a tool's return annotation admits what `tool_content` reads as content: it
    names a content block or `ToolResult` anywhere (in a union, a list...), or it is
    `object`, or a list, tuple or sequence whose items may be anything (`list[Any]`,
    `list[object]`, bare `list`). Such a tool has no `outputSchema` derived from its
    annotation: a result made of blocks has no structured content to keep that promise."""
    if _names_block(annotation) or _open(annotation):
        return True
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return may_be_content(typing.get_args(annotation)[0])
    if origin in _UNIONS:
        return any(may_be_content(arg) for arg in typing.get_args(annotation))
    if annotation in _SEQUENCES or origin in _SEQUENCES:
        items = typing.get_args(annotation)
        return not items or any(_open(item) for item in items)
    return False


def _names_block(annotation: Any) -> bool:
    if isinstance(annotation, type) and issubclass(annotation, (*BLOCK_TYPES, ToolResult)):
        return True
    return any(_names_block(arg) for arg in typing.get_args(annotation))


def _open(annotation: Any) -> bool:
    """`Any` or `object`, alone or in a union: a value that may be a content block."""
    if annotation is Any or annotation is object:
        return True
    origin = typing.get_origin(annotation)
    return origin in _UNIONS and any(_open(arg) for arg in typing.get_args(annotation))


def tool_content(value: Any) -> list[JsonObject] | None:
    """The content blocks a tool's return value stands for: a block, or a list holding at
    least one block (its `str` items become text blocks). None if the value is data."""
    if isinstance(value, BLOCK_TYPES):
        return [value.to_json()]
    if isinstance(value, _CONTENTS):
        raise InvalidResult(
            f"{type(value).__name__} is a resource's contents, not a content block: "
            "wrap it in EmbeddedResource(...)"
        )
    if isinstance(value, ToolResult):
        raise InvalidResult("a ToolResult must be returned on its own")
    if not isinstance(value, (list, tuple)) or not any(isinstance(v, BLOCK_TYPES) for v in value):
        return None
    blocks: list[JsonObject] = []
    for index, item in enumerate(value):
        block = TextContent(item) if isinstance(item, str) else item
        if not isinstance(block, BLOCK_TYPES):
            raise InvalidResult(
                f"item {index} of the list is {kind(item)}, {NOT_A_BLOCK} or a str (a list "
                "holding content blocks is content: return a ToolResult to send data too)"
            )
        blocks.append(block.to_json())
    return blocks


def resource_contents(value: Any) -> list[ResourceContents] | None:
    """The contents a resource handler's return value stands for: a `TextResource` or
    `BlobResource`, or a list holding them only. None for anything else."""
    if isinstance(value, _CONTENTS):
        return [value]
    if isinstance(value, (*BLOCK_TYPES, ToolResult)):
        raise InvalidResult(
            f"{type(value).__name__} is not a resource's contents: return str, bytes, "
            "TextResource or BlobResource, or a list of TextResource and BlobResource"
        )
    if not isinstance(value, (list, tuple)) or not any(isinstance(v, _CONTENTS) for v in value):
        return None
    for index, item in enumerate(value):
        if not isinstance(item, _CONTENTS):
            raise InvalidResult(
                f"item {index} of the list is {kind(item)}, not a TextResource or BlobResource"
            )
    return list(value)


def message_content(content: Any, where: str) -> JsonObject:
    """A prompt message's content block: a `str` is text, a block is its JSON, a dict must
    already be a content block's JSON (it is sent as it is)."""
    if isinstance(content, str):
        return TextContent(content).to_json()
    if isinstance(content, BLOCK_TYPES):
        return content.to_json()
    if isinstance(content, dict) and content.get("type") in _BLOCK_TYPE_NAMES:
        return content
    raise InvalidResult(f"{where} is {kind(content)}, {NOT_A_BLOCK}, a str or a block's dict")
