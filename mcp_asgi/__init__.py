"""mcp_asgi: serve the Model Context Protocol (Streamable HTTP, 2026-07-28) from any ASGI app,
with requests cancelled the moment the client gives up, and traced with OpenTelemetry.

The root holds what a handler author needs: the server, its middleware and settings, what
a handler takes, returns and raises, and the base classes of the server's sources. Each
integration is a public subpackage of its own: `mcp_asgi.auth` (authorization),
`mcp_asgi.routes` (the host app's routes as tools), `mcp_asgi.downstream` (other MCP
servers), `mcp_asgi.stdio`, `mcp_asgi.bus` (change notifications across processes),
`mcp_asgi.input` (the answers of input requests) and `mcp_asgi.testing`. Every other module
is internal (docs/reference/index.md).
"""

from mcp_asgi._version import __version__
from mcp_asgi.lifecycle.cancel import CancelReason, CancelToken, RequestCancelled
from mcp_asgi.lifespan import mounted_lifespan
from mcp_asgi.middleware import McpMiddleware
from mcp_asgi.protocol.jsonrpc import McpError
from mcp_asgi.server.content import (
    Audio,
    BlobResource,
    ContentBlock,
    EmbeddedResource,
    Image,
    ResourceLink,
    TextContent,
    TextResource,
    ToolResult,
)
from mcp_asgi.server.context import Context
from mcp_asgi.server.mcp_server import McpServer
from mcp_asgi.server.metadata import Annotations, Icon, ToolAnnotations
from mcp_asgi.server.registry import ToolNameWarning
from mcp_asgi.server.sources import PromptSource, ResourceSource, SourceItem, ToolSource
from mcp_asgi.settings import McpSettings

__all__ = [
    "Annotations",
    "Audio",
    "BlobResource",
    "CancelReason",
    "CancelToken",
    "ContentBlock",
    "Context",
    "EmbeddedResource",
    "Icon",
    "Image",
    "McpError",
    "McpMiddleware",
    "McpServer",
    "McpSettings",
    "PromptSource",
    "RequestCancelled",
    "ResourceLink",
    "ResourceSource",
    "SourceItem",
    "TextContent",
    "TextResource",
    "ToolAnnotations",
    "ToolNameWarning",
    "ToolResult",
    "ToolSource",
    "__version__",
    "mounted_lifespan",
]
