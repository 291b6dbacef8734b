"""Property-based tests of the wire (Hypothesis): random bodies, headers and JSON values
(huge numbers, deep nesting, NaN) through the whole validation ladder of the middleware.
Never a 500, never a hang; every refusal is a JSON-RPC error with a documented status.

In process, through the scripted ASGI client (one event loop per example); the live
checks of the same rules are in tests/e2e and tests/limits.
"""

from __future__ import annotations

import json
from typing import Any

import anyio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mcp_asgi import McpMiddleware

from ..helpers import Wire, mcp_body, mcp_headers
from ..servers import Seen, scripted_app

REFUSALS = {400, 403, 404, 405, 406, 408, 413, 415, 429}
PROPERTIES = settings(
    max_examples=100,
    deadline=None,
    database=None,  # nothing written into the working tree
    suppress_health_check=[HealthCheck.too_slow],
)

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**400), max_value=10**400)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=30,
)
methods = st.sampled_from(
    ["tools/call", "tools/list", "resources/read", "server/discover", "ping", "nope", ""]
)
header_values = st.sampled_from(
    [
        "application/json",
        "text/event-stream",
        "application/json, text/event-stream",
        "*/*",
        "",
        "2026-07-28",
        "2025-11-25",
        "tools/call",
        "echo",
        "=?base64?ZWNobw==?=",
        "\x7f",
        "x" * 300,
    ]
)
header_names = st.sampled_from(
    [
        "content-type",
        "accept",
        "mcp-protocol-version",
        "mcp-method",
        "mcp-name",
        "mcp-session-id",
        "origin",
        "content-length",
    ]
)
literals = st.sampled_from(
    [
        b"NaN",
        b"Infinity",
        b"-Infinity",
        b"1e999",
        b"[" * 5000 + b"]" * 5000,
        b"1" * 5000,
        b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"x":NaN}}',
        b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"x":1e400}}',
        b"\xff\xfe",
        b"\xef\xbb\xbf{}",
        b"",
    ]
)


def app() -> McpMiddleware:
    return scripted_app(Seen(), max_body_bytes=64 * 1024)


def serve_once(
    middleware: McpMiddleware, body: bytes, headers: list[tuple[str, str]], method: str = "POST"
) -> tuple[int, bytes, dict[str, str]]:
    """One exchange; fails if it takes more than 5 s."""
    wire = Wire(body, headers, leave_when_done=True, method=method)

    async def run() -> None:
        with anyio.fail_after(5):
            await wire.run(middleware)

    anyio.run(run)
    start = next(m for m in wire.sent if m["type"] == "http.response.start")
    sent = {k.decode().lower(): v.decode() for k, v in start["headers"]}
    raw = b"".join(m.get("body", b"") for m in wire.sent if m["type"] == "http.response.body")
    return start["status"], raw, sent


def check(status: int, raw: bytes, headers: dict[str, str]) -> None:
    """A documented status; a refusal carries one JSON-RPC error object."""
    assert status in REFUSALS or status in (200, 202), status  # never a 500
    if status in REFUSALS:
        message = json.loads(raw)
        assert message["jsonrpc"] == "2.0"
        assert isinstance(message["error"]["code"], int)
        assert isinstance(message["error"]["message"], str)
    elif status == 200 and headers.get("content-type") == "application/json":
        message = json.loads(raw)
        assert ("result" in message) != ("error" in message)


MIDDLEWARE = app()


@PROPERTIES
@given(
    body=st.binary(max_size=300) | literals,
    extra=st.lists(st.tuples(header_names, header_values), max_size=4),
)
def test_random_bodies_and_headers(body: bytes, extra: list[tuple[str, str]]) -> None:
    """Any bytes, with the standard headers some of which are replaced or repeated."""
    headers = [("content-type", "application/json"), ("accept", "application/json"), *extra]
    check(*serve_once(MIDDLEWARE, body, headers))


@PROPERTIES
@given(
    method=methods,
    params=json_values,
    request_id=json_values,
    name=st.text(max_size=10),
    arguments=json_values,
)
def test_random_values_in_a_request(
    method: str, params: Any, request_id: Any, name: str, arguments: Any
) -> None:
    """A well-framed request whose id, params and arguments are any JSON values (huge
    integers and nesting included); the headers match what the body says when they can."""
    body = mcp_body("tools/call", {"name": name or "echo", "arguments": arguments})
    headers = mcp_headers(body)
    body["method"] = method
    if isinstance(params, dict):
        body["params"] = {**params, "_meta": body["params"]["_meta"]}
    body["id"] = request_id
    check(*serve_once(MIDDLEWARE, json.dumps(body).encode(), headers))


@PROPERTIES
@given(value=json_values, http_method=st.sampled_from(["GET", "DELETE", "PUT", "PATCH"]))
def test_other_http_methods(value: Any, http_method: str) -> None:
    """Not a POST (and no session): 405 or 400/404 for a 2025-era session request."""
    body = json.dumps(value).encode()
    status, raw, headers = serve_once(
        MIDDLEWARE, body, [("content-type", "application/json")], http_method
    )
    check(status, raw, headers)
    assert status in (400, 404, 405)


def test_non_finite_numbers_are_parse_errors() -> None:
    """NaN, Infinity, -Infinity and a number a double cannot hold are 400/-32700."""
    too_many_digits = b"1" + b"0" * 400 + b".5"  # no exponent, still past 1.8e308
    for literal in (b"NaN", b"Infinity", b"-Infinity", b"1e999", b"-1E400", too_many_digits):
        body = mcp_body("tools/call", {"name": "echo", "arguments": {"text": "x"}})
        raw = json.dumps(body).replace('"x"', literal.decode()).encode()
        status, reply, _ = serve_once(MIDDLEWARE, raw, mcp_headers(body))
        assert status == 400, literal
        assert json.loads(reply)["error"]["code"] == -32700
