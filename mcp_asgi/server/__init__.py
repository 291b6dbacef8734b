"""What an endpoint serves: the registry, the handlers' API and the dispatch of MCP methods.

    mcp_server       McpServer: the decorators, change notifications, dispatch; owns the parts
    registry         Registry: what the decorators and add_source registered; announces changes
    primitives       Tool, Resource, Prompt: their descriptions and how to call them
    schema           type hints and docstrings -> JSON Schema, argument validation
    json_schema      a schema given verbatim (input_schema=, output_schema=): checked, validating
    metadata         icons, annotations, _meta: their shapes and checks
    content          content blocks, resource contents, ToolResult: what handlers return
    methods          Methods: listing, tools/call, resources/read, prompts/get, completion
    required_scopes  RequiredScopes: the OAuth scopes each primitive and request needs
    oauth_scopes     the OAuth scopes given with scopes= and by FastAPI Security dependencies
    sources          Source, ToolSource, PromptSource, ResourceSource: items from elsewhere
    catalogs         SourceCatalogs: what each source exposes on the server, read when
    listen           subscriptions/listen streams on the notification bus
    context          Context: what a handler is given
    http_request     the read-only Starlette Request a handler may take (ctx.request)
    depends          FastAPI dependencies (Depends) in handlers, resolved around each call

Imports lifecycle (a request's life and cancellation), input (MRTR), bus and protocol;
never http's request side, telemetry, legacy or the middleware.
"""

from mcp_asgi.server.mcp_server import McpServer

__all__ = ["McpServer"]
