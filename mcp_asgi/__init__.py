"""mcp_asgi: serve the Model Context Protocol (Streamable HTTP, 2026-07-28) from any ASGI app,
with requests cancelled the moment the client gives up, and traced with OpenTelemetry."""

from ._version import __version__
from .cancel import CancelReason, CancelToken, RequestCancelled
from .context import Context
from .jsonrpc import McpError
from .middleware import McpMiddleware
from .server import McpServer
from .settings import McpSettings

__all__ = [
    "CancelReason",
    "CancelToken",
    "Context",
    "McpError",
    "McpMiddleware",
    "McpServer",
    "McpSettings",
    "RequestCancelled",
    "__version__",
]
