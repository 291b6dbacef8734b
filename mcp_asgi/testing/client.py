"""`serve` (a real uvicorn server on 127.0.0.1) and `McpTestClient` (HTTP/1.1 over a real
socket, so dropping a stream really closes the connection); the package docstring shows
them together."""

from __future__ import annotations

import base64
import itertools
import json
import re
import threading
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import anyio
from anyio.abc import SocketStream
from starlette.types import ASGIApp

from mcp_asgi.protocol.request import MCP_NAME_PARAM, PROTOCOL_VERSION
from mcp_asgi.testing.http_client import BodyReader, event_data, parse_messages, split_event

_SAFE = re.compile(r"^[\x21-\x7e]([\x20-\x7e]*[\x21-\x7e])?$")


@dataclass(frozen=True)
class LiveServer:
    """A running server: `url` is its base URL, e.g. `http://127.0.0.1:54321`."""

    url: str
    """The base URL, without a path: append the endpoint's (`server.url + "/mcp"`)."""
    port: int
    """The port uvicorn listens on."""


@contextmanager
def serve(app: ASGIApp, **config: Any) -> Iterator[LiveServer]:
    """Run `app` with uvicorn on 127.0.0.1, on a free port, in a background thread.

    `with serve(app) as server:` yields once uvicorn has started (lifespan included) and
    stops it when the block ends. `config` is passed to `uvicorn.Config`, e.g.
    `timeout_graceful_shutdown=1` or `lifespan="off"`. It runs on uvicorn's pure-Python
    stack (h11 on asyncio) whatever else is installed; `http="httptools", loop="uvloop"`
    picks the `uvicorn[standard]` one.
    """
    import uvicorn

    options: dict[str, Any] = {
        "host": "127.0.0.1",
        "port": 0,
        "log_level": "warning",
        "lifespan": "auto",
        "http": "h11",
        "loop": "asyncio",
    }
    options.update(config)
    server = uvicorn.Server(uvicorn.Config(app, **options))
    thread = threading.Thread(target=server.run, name="mcp-asgi-test-server", daemon=True)
    thread.start()
    try:
        while not server.started:
            if not thread.is_alive():
                raise RuntimeError("uvicorn failed to start")
            threading.Event().wait(0.005)
        port = server.servers[0].sockets[0].getsockname()[1]
        yield LiveServer(url=f"http://127.0.0.1:{port}", port=port)
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def encode_header_value(value: str) -> str:
    """Encode an MCP header value, using `=?base64?…?=` when it is not plain ASCII."""
    if value == "" or _SAFE.match(value):
        return value
    return "=?base64?" + base64.b64encode(value.encode("utf-8")).decode("ascii") + "?="


def request_meta(
    *, protocol_version: str = PROTOCOL_VERSION, capabilities: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The `_meta` envelope every 2026-07-28 request carries."""
    return {
        "io.modelcontextprotocol/protocolVersion": protocol_version,
        "io.modelcontextprotocol/clientCapabilities": dict(capabilities or {}),
        "io.modelcontextprotocol/clientInfo": {"name": "mcp-asgi-testing", "version": "1"},
    }


@dataclass
class McpResponse:
    """A whole HTTP response: status, headers (lower-case names), and the JSON-RPC messages."""

    status: int
    """The HTTP status."""
    headers: dict[str, str]
    """The response headers, names in lower case."""
    messages: list[dict[str, Any]] = field(default_factory=list)
    """The JSON-RPC messages: the SSE events' or the JSON body's, in order."""
    raw: bytes = b""
    """The body as received."""

    @property
    def final(self) -> dict[str, Any]:
        """The final JSON-RPC response (the last message)."""
        return self.messages[-1]

    def json(self) -> dict[str, Any]:
        """The final JSON-RPC response, `{"jsonrpc", "id", "result" | "error"}` (as
        `final`), whether the reply was one JSON body or an SSE stream."""
        return self.final


class McpStream:
    """An open response read message by message; `drop()` closes the socket.

    The response head is read lazily: in JSON mode it only arrives with the result, so a
    test can drop the connection while the server has sent nothing yet.
    """

    def __init__(self, sock: SocketStream, reader: BodyReader) -> None:
        self.status = 0
        """The HTTP status; 0 until the head is read (`read_head()`, `next_message()`)."""
        self.headers: dict[str, str] = {}
        """The response headers (lower-case names), once the head is read."""
        self._sock = sock
        self._reader = reader
        self._buffer = b""
        self.closed = False
        """Whether `drop()` closed the connection."""

    async def read_head(self) -> None:
        """Wait for the status line and headers (idempotent)."""
        if not self.status:
            self.status, self.headers = await self._reader.read_head()

    async def next_message(self) -> dict[str, Any] | None:
        """The next JSON-RPC message (SSE event or JSON body), or None at the end."""
        await self.read_head()
        if not self.headers.get("content-type", "").startswith("text/event-stream"):
            body = await self._reader.read_all()
            return json.loads(body) if body else None
        while True:
            event, sep, rest = split_event(self._buffer)
            if sep:
                self._buffer = rest
                data = event_data(event)
                if data is not None:
                    return dict(json.loads(data))
                continue
            chunk = await self._reader.read_chunk()
            if not chunk:
                return None
            self._buffer += chunk

    async def read_raw(self) -> bytes:
        """Everything left in the body, undecoded."""
        await self.read_head()
        return self._buffer + await self._reader.read_all()

    async def drop(self) -> None:
        """Close the TCP connection, as a client that gives up does."""
        self.closed = True
        await self._sock.aclose()


class McpTestClient:
    """A minimal MCP 2026-07-28 client over real sockets, one connection per request.

    `url` is the endpoint's full URL (`server.url + "/mcp"`); `headers` go with every
    request; `capabilities` are the client capabilities every request declares (e.g.
    `{"elicitation": {}}` to let handlers ask for input).
    """

    def __init__(
        self,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        capabilities: Mapping[str, Any] | None = None,
    ) -> None:
        parts = urlsplit(url)
        self.host = parts.hostname or "127.0.0.1"
        """The host of `url`."""
        self.port = parts.port or 80
        """The port of `url`."""
        self.path = parts.path or "/"
        """The endpoint's path, from `url`."""
        self.extra_headers = dict(headers or {})
        """Headers sent with every request (`headers=`), e.g. `Authorization`."""
        self.capabilities = dict(capabilities or {})
        """The client capabilities every request declares in its `_meta`."""
        self._ids = itertools.count(1)

    async def __aenter__(self) -> McpTestClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        return None

    def build(
        self,
        method: str,
        params: Mapping[str, Any] | None = None,
        *,
        id: int | str | None = None,
        progress: bool = False,
        log_level: str | None = None,
    ) -> dict[str, Any]:
        """A JSON-RPC request body with the `_meta` envelope."""
        request_id = next(self._ids) if id is None else id
        body_params = dict(params or {})
        meta = request_meta(capabilities=self.capabilities)
        meta.update(body_params.pop("_meta", {}))
        if progress:
            meta["progressToken"] = f"p-{request_id}"
        if log_level:
            meta["io.modelcontextprotocol/logLevel"] = log_level
        body_params["_meta"] = meta
        return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": body_params}

    def headers_for(self, body: Mapping[str, Any]) -> dict[str, str]:
        """The standard MCP headers matching a request body."""
        method = str(body.get("method"))
        headers = {
            "content-type": "application/json",
            "accept": "application/json, text/event-stream",
            "mcp-protocol-version": PROTOCOL_VERSION,
            "mcp-method": method,
        }
        key = MCP_NAME_PARAM.get(method)
        params = body.get("params")
        if key and isinstance(params, Mapping) and isinstance(params.get(key), str):
            headers["mcp-name"] = encode_header_value(params[key])
        headers.update(self.extra_headers)
        return headers

    async def post(
        self,
        body: bytes | Mapping[str, Any] | list[Any],
        headers: Mapping[str, str] | None = None,
        *,
        http_method: str = "POST",
    ) -> McpResponse:
        """Send one raw request and read the whole response."""
        async with self._open(body, headers, http_method) as stream:
            raw = await stream.read_raw()
            messages = parse_messages(stream.headers, raw)
            return McpResponse(stream.status, stream.headers, messages, raw)

    async def request(
        self, method: str, params: Mapping[str, Any] | None = None, **options: Any
    ) -> McpResponse:
        """Send a request built with the standard headers and read the whole response:
        `.json()` is the final JSON-RPC response, `.messages` every message."""
        body = self.build(method, params, **options)
        return await self.post(body, self.headers_for(body))

    async def call_tool(
        self, name: str, arguments: Mapping[str, Any] | None = None, **options: Any
    ) -> dict[str, Any]:
        """Call a tool; return its result, or raise `AssertionError` on a JSON-RPC error."""
        response = await self.request(
            "tools/call", {"name": name, "arguments": dict(arguments or {})}, **options
        )
        final = response.json()
        if "error" in final:
            raise AssertionError(f"tools/call {name} failed: {final['error']}")
        return dict(final["result"])

    async def list_tools(self, **options: Any) -> list[dict[str, Any]]:
        """The server's tools, every page (`tools/list` following `nextCursor`); raise
        `AssertionError` on a JSON-RPC error."""
        tools: list[dict[str, Any]] = []
        params: dict[str, Any] = {}
        while True:
            final = (await self.request("tools/list", params, **options)).json()
            if "error" in final:
                raise AssertionError(f"tools/list failed: {final['error']}")
            tools += final["result"]["tools"]
            cursor = final["result"].get("nextCursor")
            if cursor is None:
                return tools
            params = {"cursor": cursor}

    @asynccontextmanager
    async def stream(
        self, method: str, params: Mapping[str, Any] | None = None, **options: Any
    ) -> AsyncIterator[McpStream]:
        """Open a request and read its response message by message."""
        body = self.build(method, params, **options)
        async with self._open(body, self.headers_for(body), "POST") as stream:
            yield stream

    @asynccontextmanager
    async def _open(
        self,
        body: bytes | Mapping[str, Any] | list[Any],
        headers: Mapping[str, str] | None,
        http_method: str,
    ) -> AsyncIterator[McpStream]:
        payload = body if isinstance(body, bytes) else json.dumps(body).encode()
        sock = await anyio.connect_tcp(self.host, self.port)
        try:
            extra = {k.lower(): v for k, v in (headers or {}).items()}
            head = [f"{http_method} {self.path} HTTP/1.1"]
            if "host" not in extra:
                head.append(f"host: {self.host}:{self.port}")
            head += [f"content-length: {len(payload)}", "connection: close"]
            head += [
                f"{k}: {v}" for k, v in extra.items() if k not in ("content-length", "connection")
            ]
            await sock.send(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + payload)
            yield McpStream(sock, BodyReader(sock))
        finally:
            await sock.aclose()
