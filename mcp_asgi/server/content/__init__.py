"""Content blocks and results a handler returns, in the 2026-07-28 shapes.

    blocks      TextContent, Image, Audio, ResourceLink, EmbeddedResource (ContentBlock)
    resources   TextResource, BlobResource: a resource's contents
    result      ToolResult: a whole tools/call result
    read        what a handler returned -> blocks or contents (InvalidResult if it can't)
    _fields     the checks and JSON helpers they share

Each type is a frozen dataclass that checks its fields when it is made (`TypeError` or
`ValueError` naming the class, the field and what is wrong) and turns into its JSON object
with `to_json()`. Binary data is held as raw `bytes` and sent base64-encoded.
"""

from mcp_asgi.server.content.blocks import (
    Audio,
    ContentBlock,
    EmbeddedResource,
    Image,
    ResourceLink,
    TextContent,
)
from mcp_asgi.server.content.read import (
    InvalidResult,
    may_be_content,
    message_content,
    resource_contents,
    tool_content,
)
from mcp_asgi.server.content.resources import BlobResource, ResourceContents, TextResource
from mcp_asgi.server.content.result import ToolResult

__all__ = [
    "Audio",
    "BlobResource",
    "ContentBlock",
    "EmbeddedResource",
    "Image",
    "InvalidResult",
    "ResourceContents",
    "ResourceLink",
    "TextContent",
    "TextResource",
    "ToolResult",
    "may_be_content",
    "message_content",
    "resource_contents",
    "tool_content",
]
