"""`McpError` answers a spec error with the status the spec gives its code (400 for -32020,
-32021, -32022; 404 for -32601; `http_status=` for the rest), while the reply has not
started; once an SSE reply has sent an event the error is in-band under 200, and 2025-era
sessions always get errors in-band."""

from __future__ import annotations

import json
from typing import Any

import pytest

from mcp_asgi import McpError

from ..helpers import asgi_request, call, mcp_app
from .handler_apps import erring_server


async def fail(mode: str, code: int, **arguments: Any) -> Any:
    app = mcp_app(erring_server(), response_mode=mode)
    params = {"name": "fail", "arguments": {"code": code, **arguments}}
    return await call(app, "tools/call", params, progress=True)


@pytest.mark.parametrize(
    ("code", "status", "expected"),
    [
        (-32021, 0, 400),  # MissingRequiredClientCapability
        (-32020, 0, 400),  # HeaderMismatch
        (-32022, 0, 400),  # UnsupportedProtocolVersion
        (-32601, 0, 404),  # Method not found
        (-32602, 0, 200),  # Invalid params: in-band...
        (-32602, 400, 400),  # ...unless it is about a malformed _meta
        (4001, 0, 200),  # an application error
    ],
)
@pytest.mark.parametrize("mode", ["json", "sse"])
async def test_an_error_raised_before_the_reply_started_has_its_status(
    mode: str, code: int, status: int, expected: int
) -> None:
    """Nothing was sent yet: the status is the spec's (or the one given), in either mode.
    An error status is one JSON body, like every rejection before a handler runs."""
    wire = await fail(mode, code, status=status)
    assert wire.status == expected
    assert wire.error == {"code": code, "message": f"failed with {code}", "data": {"code": code}}
    if expected != 200:
        assert wire.content_type == "application/json"


@pytest.mark.parametrize("mode", ["sse", "auto"])
async def test_once_an_sse_reply_has_started_the_error_is_in_band(mode: str) -> None:
    """A progress notification went out first: the status is fixed at 200 and the error is
    the stream's last event."""
    wire = await fail(mode, -32021, notify_first=True)
    assert wire.status == 200
    assert wire.content_type == "text/event-stream"
    assert wire.messages[0]["method"] == "notifications/progress"
    assert wire.error["code"] == -32021


async def test_a_2025_era_session_gets_errors_in_band() -> None:
    """To a 2025-era client a 404 means its session is gone: every error is in-band."""
    app = mcp_app(erring_server(), response_mode="json")
    headers = {"content-type": "application/json", "accept": "application/json"}
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}},
    }
    opened = await asgi_request(app, body=json.dumps(init).encode(), headers=headers)
    session = {**headers, "mcp-session-id": opened.headers["mcp-session-id"]}
    for code in (-32601, -32021):
        body = {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "fail", "arguments": {"code": code}},
        }
        wire = await asgi_request(app, body=json.dumps(body).encode(), headers=session)
        assert (wire.status, wire.error["code"]) == (200, code)


def test_the_status_follows_the_code_unless_given() -> None:
    assert McpError(-32021, "x").http_status == 400
    assert McpError(-32601, "x").http_status == 404
    assert McpError(-32602, "x").http_status == 200
    assert McpError(-32602, "x", http_status=400).http_status == 400
    assert McpError(-32601, "x", http_status=200).http_status == 200
    with pytest.raises(ValueError, match="http_status"):
        McpError(1, "x", http_status=302)
