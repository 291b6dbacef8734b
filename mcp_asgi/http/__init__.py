"""The HTTP side of one MCP POST: reading the body, Origin and Accept, writing the reply.

    body      read_body (size limit, 413), check_content_type (415), ClientGone
    origin    Origin validation against DNS rebinding (403)
    accept    Accept negotiation: a JSON body or an SSE stream (406)
    reply     ReplyWriter: one request's JSON body or SSE stream, the only writer of `send`
    exchange  Exchange: one POST as read (ASGI scope, receive, send, body, arrival, mode)

Owns the ASGI `send` channel and the bytes on the wire. Knows nothing about MCP methods,
handlers or cancellation: it imports only `mcp_asgi.protocol` (never lifecycle, server,
input, bus, telemetry, legacy or the middleware).
"""
