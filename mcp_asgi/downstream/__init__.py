"""Downstream MCP servers: calling another MCP server from a handler, with the inbound
request's cancellation reaching the request it minted downstream.

    client   `Downstream`: one downstream server (a stdio child process, or Streamable
             HTTP by URL in either era), its connection kept and restarted with backoff,
             and `call_tool` / `list_tools` from a handler: a CLIENT span under the tool's
             span, the trace context in `_meta`, progress relayed upstream
    relay    the downstream's input requests (elicitation, sampling, roots) asked of the
             calling request's client when it can hold them open
             (`DownstreamInputUnsupported` otherwise)
    watch    while connected: the connection checks (ping, or server/discover) and, at
             2026-07-28, `subscriptions/listen` for its tool changes
    updates  the resources it is kept subscribed to, and their updates' listeners
    mounted  what its mounted sources share: the downstream entered with the server,
             the list read at start (collisions refused), list_changed relayed
    tools    `DownstreamTools`: its tools mounted on an `McpServer` as a tool source
             (prefix, include/exclude, collisions refused at start, list_changed relayed)
    prompts  `DownstreamPrompts`: its prompts, the same way
    resources `DownstreamResources`: its resources and templates (URIs as they are, or
             prefixed), reads routed to it

The protocol side is the official MCP Python SDK client (`mcp`, the `downstream` extra),
which cancels by each transport's rule when the calling task is cancelled (docs/downstream.md).
Sits above the server (it takes a handler's `Context`, and `ToolSource`); nothing in the
package imports it. It never imports settings, inflight, tasks,
the endpoints, legacy, telemetry's internals or the middleware.
"""

from mcp_asgi.downstream.client import Downstream, DownstreamUnavailable
from mcp_asgi.downstream.prompts import DownstreamPrompts
from mcp_asgi.downstream.relay import DownstreamInputUnsupported
from mcp_asgi.downstream.resources import DownstreamResources
from mcp_asgi.downstream.tools import DownstreamTools

__all__ = [
    "Downstream",
    "DownstreamInputUnsupported",
    "DownstreamPrompts",
    "DownstreamResources",
    "DownstreamTools",
    "DownstreamUnavailable",
]
