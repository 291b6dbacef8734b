"""The protocol, pure: JSON-RPC shapes and error codes, the MCP request and its validation.

    jsonrpc    JSON-RPC 2.0 messages, MCP error codes, McpError and ProtocolError
    message    parse_message: a body -> IncomingMessage (-32700, -32600, 413 past max values)
    sizes      how big JSON is: its values, and its parsed objects at most
    request    McpRequest and the protocol's constants (versions, `_meta` keys, log levels)
    headers    reading request headers; decoding MCP header values
    validate   the 2026-07-28 validation ladder: IncomingMessage -> McpRequest

The bottom layer: no I/O, and it imports nothing else from mcp_asgi.
"""
