"""The same `McpServer` over stdio: one JSON-RPC message a line on stdin and stdout.

    lines        reading stdin (a bounded read-ahead, EOF seen at once), a bounded queue
                 of lines written to stdout in order, and `StdioWriter`, the reply
                 writer of one request on the pipe
    connection   `StdioConnection`: both eras on one pipe, a bounded number of requests
                 in flight by id, `notifications/cancelled` and EOF turned into
                 cancellations
    serve        `serve_stdio` / `run_stdio`: the connection on this process's stdin/stdout,
                 with the server's bus and telemetry; `python -m mcp_asgi.stdio module:server`

Requests run exactly as over HTTP: each in its own `RequestScope` with the same `Context`,
telemetry and cancellation log; only the transport's signals differ (docs/stdio.md).
A top layer beside the middleware: it may import every layer below, and nothing in the
package imports it; it never imports the middleware or the HTTP endpoints. Public:
`run_stdio` and `serve_stdio` (docs/reference/stdio.md).
"""

from mcp_asgi.stdio.serve import run_stdio, serve_stdio

__all__ = ["run_stdio", "serve_stdio"]
