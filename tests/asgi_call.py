"""A scripted ASGI client: one HTTP request driven straight into an app, no sockets.

Unlike `httpx.ASGITransport` it controls every scope field (the server socket address,
duplicate headers, a Content-Length that lies) and streams the body in chunks. The
client "stays connected" until the response is complete, then reports a disconnect.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio

from mcp_asgi._asgi import ASGIApp, Message
from mcp_asgi.testing import McpTestClient

URL = "http://127.0.0.1:8000/mcp"
Headers = Sequence[tuple[str, str]]


@dataclass
class Reply:
    """A complete response as the client saw it."""

    status: int
    headers: dict[str, str]
    body: bytes
    chunks: list[bytes] = field(default_factory=list)

    @property
    def content_type(self) -> str:
        return self.headers.get("content-type", "")

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The JSON-RPC messages: one JSON body, or every SSE `data:` event."""
        if self.content_type.startswith("text/event-stream"):
            found = []
            for event in self.body.decode().replace("\r\n", "\n").split("\n\n"):
                data = [line[5:].strip() for line in event.split("\n") if line.startswith("data:")]
                if data:
                    found.append(json.loads("\n".join(data)))
            return found
        return [json.loads(self.body)] if self.body else []

    @property
    def final(self) -> dict[str, Any]:
        """The last JSON-RPC message (the response)."""
        return self.messages[-1]

    @property
    def error(self) -> dict[str, Any]:
        """The JSON-RPC `error` member of the final message."""
        error: dict[str, Any] = self.final["error"]
        return error

    @property
    def result(self) -> dict[str, Any]:
        """The JSON-RPC `result` member of the final message."""
        result: dict[str, Any] = self.final["result"]
        return result


async def asgi_request(
    app: ASGIApp,
    *,
    method: str = "POST",
    path: str = "/mcp",
    headers: Headers = (),
    body: bytes | Sequence[bytes] = b"",
    server: tuple[str, int] = ("127.0.0.1", 8000),
    root_path: str = "",
) -> Reply:
    """Send one request to `app` and collect the whole response."""
    chunks = [body] if isinstance(body, bytes) else list(body)
    if not any(k.lower() == "host" for k, _ in headers):
        headers = [("host", f"{server[0]}:{server[1]}"), *headers]
    scope: dict[str, Any] = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.4"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": root_path + path,
        "raw_path": (root_path + path).encode(),
        "root_path": root_path,
        "query_string": b"",
        "headers": [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers],
        "client": ("127.0.0.1", 50000),
        "server": server,
    }
    done = anyio.Event()
    reply = Reply(0, {}, b"")

    async def receive() -> Message:
        if chunks:
            chunk = chunks.pop(0)
            return {"type": "http.request", "body": chunk, "more_body": bool(chunks)}
        await done.wait()
        return {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        if message["type"] == "http.response.start":
            reply.status = message["status"]
            reply.headers = {k.decode(): v.decode() for k, v in message.get("headers", [])}
        elif message["type"] == "http.response.body":
            reply.chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                done.set()

    with anyio.fail_after(10):
        await app(scope, receive, send)
    reply.body = b"".join(reply.chunks)
    return reply


_builder = McpTestClient(URL)


def mcp_body(
    method: str,
    params: Mapping[str, Any] | None = None,
    *,
    id: int | str = 7,
    progress: bool = False,
    log_level: str | None = None,
) -> dict[str, Any]:
    """A valid 2026-07-28 request body (with the `_meta` envelope)."""
    return _builder.build(method, params, id=id, progress=progress, log_level=log_level)


def mcp_headers(body: Mapping[str, Any], **replace: str | None) -> list[tuple[str, str]]:
    """The standard headers matching `body`; `replace` sets (or, with None, drops) headers.

    Keyword names use underscores for dashes: `mcp_name="x"` sets `mcp-name: x`.
    """
    headers = _builder.headers_for(body)
    for key, value in replace.items():
        name = key.replace("_", "-")
        if value is None:
            headers.pop(name, None)
        else:
            headers[name] = value
    return list(headers.items())


async def call(
    app: ASGIApp,
    method: str,
    params: Mapping[str, Any] | None = None,
    *,
    headers: Mapping[str, str] | None = None,
    **options: Any,
) -> Reply:
    """POST a valid request for `method` with matching headers (plus `headers`)."""
    body = mcp_body(method, params, **options)
    all_headers = mcp_headers(body) + list((headers or {}).items())
    return await asgi_request(app, headers=all_headers, body=json.dumps(body).encode())
