"""Downstream MCP servers: calling another MCP server from a handler, with the inbound
request's cancellation reaching the request it minted downstream.

    client   `Downstream`: one downstream server (a stdio child process, or Streamable
             HTTP by URL in either era), its connection kept and restarted with backoff,
             and `call_tool` / `list_tools` from a handler: a CLIENT span under the tool's
             span, the trace context in `_meta`, progress relayed upstream

The protocol side is the official MCP Python SDK client (`mcp`, the `downstream` extra),
which cancels by each transport's rule when the calling task is cancelled (docs/downstream.md).
Sits above the server (it takes a handler's `Context`); nothing in the package imports it
but the root re-exports.
"""

from mcp_asgi.downstream.client import Downstream, DownstreamUnavailable

__all__ = ["Downstream", "DownstreamUnavailable"]
