"""mcp_asgi: serve the Model Context Protocol (Streamable HTTP, 2026-07-28) from any ASGI app,
with requests cancelled the moment the client gives up, and traced with OpenTelemetry."""

from mcp_asgi._version import __version__
from mcp_asgi.auth.metadata import ProtectedResourceMetadata
from mcp_asgi.auth.principal import Principal
from mcp_asgi.auth.verifier import InvalidToken, TokenVerifier
from mcp_asgi.downstream import (
    Downstream,
    DownstreamInputUnsupported,
    DownstreamPrompts,
    DownstreamResources,
    DownstreamTools,
    DownstreamUnavailable,
)
from mcp_asgi.lifecycle.cancel import CancelReason, CancelToken, RequestCancelled
from mcp_asgi.lifespan import mounted_lifespan
from mcp_asgi.middleware import McpMiddleware
from mcp_asgi.protocol.jsonrpc import McpError
from mcp_asgi.routes import AppRoutes
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
from mcp_asgi.server.sources import PromptSource, ResourceSource, SourceTool, ToolSource
from mcp_asgi.settings import McpSettings
from mcp_asgi.stdio import run_stdio, serve_stdio

__all__ = [
    "Annotations",
    "AppRoutes",
    "Audio",
    "BlobResource",
    "CancelReason",
    "CancelToken",
    "ContentBlock",
    "Context",
    "Downstream",
    "DownstreamInputUnsupported",
    "DownstreamPrompts",
    "DownstreamResources",
    "DownstreamTools",
    "DownstreamUnavailable",
    "EmbeddedResource",
    "Icon",
    "Image",
    "InvalidToken",
    "McpError",
    "McpMiddleware",
    "McpServer",
    "McpSettings",
    "Principal",
    "PromptSource",
    "ProtectedResourceMetadata",
    "RequestCancelled",
    "ResourceLink",
    "ResourceSource",
    "SourceTool",
    "TextContent",
    "TextResource",
    "TokenVerifier",
    "ToolAnnotations",
    "ToolNameWarning",
    "ToolResult",
    "ToolSource",
    "__version__",
    "mounted_lifespan",
    "run_stdio",
    "serve_stdio",
]
