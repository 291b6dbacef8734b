"""A JSON-RPC message's strings arrive as sent, however they are written: raw UTF-8 or
`\\u` escapes (Python's json.dumps writes every non-ASCII character as one). pydantic-core
before 2.18.4 (pydantic < 2.7.3, hence the floor) read an escape's UTF-8 bytes as Latin-1
("\\u00e9" gave "Ã©"); `make fastapi-range` runs this with the floor installed."""

from __future__ import annotations

import json

import pytest

from mcp_asgi import McpServer
from mcp_asgi.protocol.message import load

from ..helpers import call, mcp_app

TEXTS = ["\x80", "é", "naïve café", "€", "日本", "😀", "a\u00e9\nb\\u00e9", "\x7f"]


@pytest.mark.parametrize("ensure_ascii", [True, False], ids=["escaped", "utf-8"])
def test_strings_are_read_as_written(ensure_ascii: bool) -> None:
    body = json.dumps({"texts": TEXTS}, ensure_ascii=ensure_ascii).encode()
    assert load(body, max_values=100) == {"texts": TEXTS}


async def test_a_tool_gets_the_texts_as_sent_and_returns_them_unchanged() -> None:
    server = McpServer("echo")
    received: list[list[str]] = []

    @server.tool()
    async def echo(texts: list[str]) -> list[str]:
        received.append(texts)
        return texts

    wire = await call(
        mcp_app(server), "tools/call", {"name": "echo", "arguments": {"texts": TEXTS}}
    )
    assert received == [TEXTS]  # json.dumps escaped them
    assert wire.result["structuredContent"] == {"result": TEXTS}
