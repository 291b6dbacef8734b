"""The client side of HTTP/1.1 and SSE for `mcp_asgi.testing`: reading a response head
and body (content-length, chunked, or until close) from a real socket, and splitting an
event stream into JSON-RPC messages."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import anyio
from anyio.abc import SocketStream


class BodyReader:
    """Reads an HTTP/1.1 response head and body (content-length, chunked, or until close)."""

    def __init__(self, sock: SocketStream) -> None:
        self._sock = sock
        self._buf = b""
        self._remaining: int | None = None
        self._chunked = False
        self._done = False

    async def _fill(self) -> bool:
        try:
            data = await self._sock.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            return False
        self._buf += data
        return True

    async def read_head(self) -> tuple[int, dict[str, str]]:
        while b"\r\n\r\n" not in self._buf:
            if not await self._fill():
                raise ConnectionError("connection closed before the response head")
        head, self._buf = self._buf.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1])
        headers: dict[str, str] = {}
        for line in lines[1:]:
            key, _, value = line.partition(":")
            headers[key.strip().lower()] = value.strip()
        self._chunked = headers.get("transfer-encoding", "").lower() == "chunked"
        if "content-length" in headers:
            self._remaining = int(headers["content-length"])
        return status, headers

    async def read_chunk(self) -> bytes:
        """The next piece of body; b"" at the end."""
        if self._done:
            return b""
        if self._chunked:
            while b"\r\n" not in self._buf:
                if not await self._fill():
                    self._done = True
                    return b""
            size_line, rest = self._buf.split(b"\r\n", 1)
            size = int(size_line.split(b";")[0], 16)
            while len(rest) < size + 2:
                if not await self._fill():
                    self._done = True
                    return b""
                rest = self._buf.split(b"\r\n", 1)[1]
            self._buf = rest[size + 2 :]
            if size == 0:
                self._done = True
            return rest[:size]
        if self._remaining is not None:
            if self._remaining == 0:
                self._done = True
                return b""
            if not self._buf and not await self._fill():
                self._done = True
                return b""
            piece, self._buf = self._buf[: self._remaining], self._buf[self._remaining :]
            self._remaining -= len(piece)
            return piece
        if not self._buf and not await self._fill():
            self._done = True
            return b""
        piece, self._buf = self._buf, b""
        return piece

    async def read_all(self) -> bytes:
        parts = []
        while chunk := await self.read_chunk():
            parts.append(chunk)
        return b"".join(parts)


def split_event(buffer: bytes) -> tuple[bytes, bytes, bytes]:
    for sep in (b"\r\n\r\n", b"\n\n"):
        if sep in buffer:
            event, rest = buffer.split(sep, 1)
            return event, sep, rest
    return buffer, b"", b""


def event_data(event: bytes) -> str | None:
    """An SSE event's data; None when it carries no message (no data, or the empty data of
    a priming event, which only gives the client an id to resume from)."""
    lines = [ln[5:].lstrip() for ln in event.decode("utf-8").splitlines() if ln.startswith("data:")]
    data = "\n".join(lines)
    return data if data.strip() else None


def parse_messages(headers: Mapping[str, str], raw: bytes) -> list[dict[str, Any]]:
    if headers.get("content-type", "").startswith("text/event-stream"):
        messages = []
        rest = raw
        while True:
            event, sep, rest = split_event(rest)
            data = event_data(event)
            if data is not None:
                messages.append(json.loads(data))
            if not sep:
                return messages
    if not raw:
        return []
    return [json.loads(raw)]
