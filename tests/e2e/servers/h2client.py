"""A small HTTP/2 client on the `h2` library: one connection, many calls on their own
streams, and `reset(stream)` sends RST_STREAM (CANCEL) for one of them while the connection
stays open (httpx/httpcore close the stream without a reset when a request is cancelled)."""

from __future__ import annotations

import json
import ssl
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
import h2.config
import h2.connection
import h2.errors
import h2.events
from anyio.abc import ByteStream, TaskGroup
from anyio.streams.tls import TLSAttribute

from mcp_asgi.testing import McpTestClient
from mcp_asgi.testing.http_client import parse_messages


@dataclass
class H2Stream:
    """One call: its response as it comes."""

    stream_id: int
    status: int = 0
    headers: dict[str, str] = field(default_factory=dict)
    body: bytearray = field(default_factory=bytearray)
    ended: anyio.Event = field(default_factory=anyio.Event)
    head: anyio.Event = field(default_factory=anyio.Event)
    reset_by_server: bool = False

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The JSON-RPC messages received so far (a JSON body or SSE events)."""
        return parse_messages(self.headers, bytes(self.body))


class H2Client:
    """MCP calls over one HTTP/2 connection (TLS with ALPN h2)."""

    def __init__(self, sock: ByteStream, authority: str, tg: TaskGroup) -> None:
        self._sock = sock
        self._authority = authority
        self._conn = h2.connection.H2Connection(
            h2.config.H2Configuration(client_side=True, header_encoding="utf-8")
        )
        self._streams: dict[int, H2Stream] = {}
        self._builder = McpTestClient(f"https://{authority}/mcp")
        self._lock = anyio.Lock()
        self.closed = anyio.Event()
        self.goaway = anyio.Event()
        """Set when the server sends GOAWAY."""
        self._conn.initiate_connection()
        tg.start_soon(self._read)

    @classmethod
    @asynccontextmanager
    async def connect(
        cls, host: str, port: int, ssl_context: ssl.SSLContext
    ) -> AsyncIterator[H2Client]:
        """Open the connection; closing the block closes it (the TCP socket)."""
        sock = await anyio.connect_tcp(
            host, port, ssl_context=ssl_context, tls_standard_compatible=False
        )
        try:
            assert sock.extra(TLSAttribute.alpn_protocol) == "h2"
            async with anyio.create_task_group() as tg:
                client = cls(sock, f"{host}:{port}", tg)
                await client._flush()
                try:
                    yield client
                finally:
                    tg.cancel_scope.cancel()
        finally:
            await sock.aclose()

    async def _flush(self) -> None:
        data = self._conn.data_to_send()
        if data:
            async with self._lock:
                await self._sock.send(data)

    async def _read(self) -> None:
        try:
            while True:
                try:
                    data = await self._sock.receive()
                except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
                    return
                for event in self._conn.receive_data(data):
                    self._handle(event)
                await self._flush()
        finally:
            self.closed.set()
            for stream in self._streams.values():
                stream.ended.set()
            with anyio.CancelScope(shield=True):
                await self._sock.aclose()  # the server has closed: so does a client

    def _handle(self, event: h2.events.Event) -> None:
        stream = self._streams.get(getattr(event, "stream_id", 0) or 0)
        if isinstance(event, h2.events.ResponseReceived) and stream:
            headers = {_text(k): _text(v) for k, v in event.headers or []}
            stream.status = int(headers.pop(":status"))
            stream.headers = headers
            stream.head.set()
        elif isinstance(event, h2.events.DataReceived) and stream:
            stream.body.extend(event.data or b"")
            self._conn.acknowledge_received_data(
                event.flow_controlled_length or 0, stream.stream_id
            )
        elif isinstance(event, h2.events.StreamEnded) and stream:
            stream.ended.set()
        elif isinstance(event, h2.events.StreamReset) and stream:
            stream.reset_by_server = True
            stream.ended.set()
        elif isinstance(event, h2.events.ConnectionTerminated):
            self.goaway.set()

    async def start(
        self,
        method: str,
        params: dict[str, Any],
        *,
        id: str,
        accept: str = "application/json, text/event-stream",
        progress: bool = False,
    ) -> H2Stream:
        """Send one request on a new stream (HEADERS, DATA with END_STREAM)."""
        body = self._builder.build(method, params, id=id, progress=progress)
        headers = self._builder.headers_for(body)
        headers["accept"] = accept
        payload = json.dumps(body).encode()
        stream_id = self._conn.get_next_available_stream_id()
        stream = self._streams[stream_id] = H2Stream(stream_id)
        request_headers = [
            (":method", "POST"),
            (":scheme", "https"),
            (":authority", self._authority),
            (":path", "/mcp"),
            ("content-length", str(len(payload))),
            *headers.items(),
        ]
        self._conn.send_headers(stream_id, request_headers)
        self._conn.send_data(stream_id, payload, end_stream=True)
        await self._flush()
        return stream

    async def reset(self, stream: H2Stream) -> None:
        """RST_STREAM (CANCEL) for one stream; the connection stays open."""
        self._conn.reset_stream(stream.stream_id, h2.errors.ErrorCodes.CANCEL)
        await self._flush()

    async def response(self, stream: H2Stream, limit: float = 10) -> list[dict[str, Any]]:
        """Wait for the end of a stream's response; its JSON-RPC messages."""
        with anyio.fail_after(limit):
            await stream.ended.wait()
        assert not stream.reset_by_server, "the server reset the stream"
        return stream.messages

    async def call(self, method: str, params: dict[str, Any], *, id: str) -> dict[str, Any]:
        """One whole call; its final message."""
        messages = await self.response(await self.start(method, params, id=id))
        return messages[-1]


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value
