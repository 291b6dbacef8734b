"""What an endpoint serves: the registry, the handlers' API and the dispatch of MCP methods.

    mcp_server   McpServer: registry + methods + change notifications; dispatch
    registry     the @tool / @resource / @prompt decorators
    primitives   Tool, Resource, Prompt: their descriptions and how to call them
    schema       type hints and docstrings -> JSON Schema, argument validation
    json_schema  a schema given verbatim (input_schema=, output_schema=): checked, validating
    metadata     icons, annotations, _meta: their shapes and checks
    content      content blocks, resource contents, ToolResult: what handlers return
    methods      listing, tools/call, resources/read, prompts/get, completion
    changes      notify_*_changed and runtime removal
    listen       subscriptions/listen streams on the notification bus
    context      Context: what a handler is given
    http_request the read-only Starlette Request a handler may take (ctx.request)
    depends      FastAPI dependencies (Depends) in handlers, resolved around each call

Imports lifecycle (a request's scope), input (MRTR), bus and protocol; never http's
request side, telemetry, legacy or the middleware.
"""

from mcp_asgi.server.mcp_server import McpServer

__all__ = ["McpServer"]
