"""A JSON-RPC message's strings arrive as sent, however they are written: raw UTF-8 or
`\\u` escapes (Python's json.dumps writes every non-ASCII character as one). pydantic-core
before 2.18.4 (pydantic < 2.7.3, hence the floor) read an escape's UTF-8 bytes as Latin-1
("\\u00e9" gave "Ã©"); `make fastapi-range` runs this with the floor installed."""

from __future__ import annotations

import json
import sys

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


def test_a_parsed_value_is_held_by_the_message_alone() -> None:
    """A string value (an id, a token, an argument) is not kept by the parser once the
    message is gone: pydantic-core's from_json caches strings of up to 64 bytes by
    default, process-wide, and every new id would take a place in that cache (issue 28:
    the soak's slow rise). Keys may be cached: a client sends the same few."""
    body = b'{"jsonrpc":"2.0","id":"a-unique-id-5f1d","params":{"a-key":"a-unique-value-9c2e"}}'
    first, second = load(body, max_values=100), load(body, max_values=100)
    assert first["id"] == second["id"]
    assert first["id"] is not second["id"]
    value = first["params"]["a-key"]
    assert value is not second["params"]["a-key"]
    del second
    control = "".join(["a-unique-", "value-9c2e"])  # held the same way: a name, a dict
    held = {"a-key": control}
    assert sys.getrefcount(value) == sys.getrefcount(control), held
