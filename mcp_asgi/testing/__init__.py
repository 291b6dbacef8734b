"""Test helpers: a real uvicorn server on 127.0.0.1 and a client that can drop the connection.

`httpx.ASGITransport` buffers whole responses and cannot show a disconnect; these helpers
speak HTTP/1.1 over a real socket, so closing a stream really closes the TCP connection::

    with serve(app) as server:
        async with McpTestClient(server.url + "/mcp") as client:
            tools = await client.list_tools()   # every page of tools/list
            result = await client.call_tool("echo", {"text": "hi"})
            response = await client.request("tools/list")   # the whole HTTP response
            assert response.status == 200 and "tools" in response.json()["result"]
            async with client.stream("tools/call", {"name": "slow", "arguments": {}}) as s:
                await s.next_message()      # e.g. the first progress notification
                await s.drop()              # the socket is closed: the server must cancel

    client        McpTestClient, McpStream, McpResponse; serve and LiveServer
    http_client   the client side of HTTP/1.1 and SSE

A client of the library, outside its layers: imports nothing from mcp_asgi but the
protocol's constants.
"""

from mcp_asgi.protocol.request import PROTOCOL_VERSION
from mcp_asgi.testing.client import (
    LiveServer,
    McpResponse,
    McpStream,
    McpTestClient,
    encode_header_value,
    request_meta,
    serve,
)

__all__ = [
    "PROTOCOL_VERSION",
    "LiveServer",
    "McpResponse",
    "McpStream",
    "McpTestClient",
    "encode_header_value",
    "request_meta",
    "serve",
]
