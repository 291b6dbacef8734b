"""The validation ladder: every malformed request gets its HTTP status and JSON-RPC error."""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any

import pytest
from pydantic import Field

from mcp_asgi import McpMiddleware, McpServer, McpSettings
from mcp_asgi.protocol.headers import RequestHeaders
from mcp_asgi.protocol.jsonrpc import ProtocolError
from mcp_asgi.protocol.message import parse_message
from mcp_asgi.protocol.validate import validate
from mcp_asgi.testing import McpResponse, McpTestClient, serve

from ..helpers import Wire, asgi_request, http_scope, mcp_app, mcp_body, mcp_headers, post

ID = 7
Region = Annotated[str, Field(json_schema_extra={"x-mcp-header": "Region"})]
Count = Annotated[int, Field(json_schema_extra={"x-mcp-header": "Count"})]
Flag = Annotated[bool, Field(json_schema_extra={"x-mcp-header": "Flag"})]


def b64(text: str) -> str:
    return "=?base64?" + base64.b64encode(text.encode()).decode() + "?="


def build_server() -> McpServer:
    server = McpServer("validation")

    @server.tool()
    async def echo(text: str) -> str:
        """Echo the text."""
        return text

    @server.tool()
    async def regional(region: Region, count: Count = 1, flag: Flag = False) -> str:
        """A tool whose arguments are mirrored in Mcp-Param-* headers."""
        return f"{region}:{count}:{flag}"

    @server.resource("docs://readme")
    async def readme() -> str:
        """A static resource."""
        return "read me"

    @server.resource("docs://grüße")
    async def greet() -> str:
        """A resource whose URI is not ASCII (tool names must be)."""
        return "hallo"

    return server


def make_app(**settings: Any) -> McpMiddleware:
    return mcp_app(build_server(), **{"max_body_bytes": 1024, **settings})


# -- building requests ---------------------------------------------------------------


def tool_call(name: str = "echo", arguments: Mapping[str, Any] | None = None) -> dict[str, Any]:
    return mcp_body("tools/call", {"name": name, "arguments": dict(arguments or {"text": "hi"})})


def regional(**arguments: Any) -> dict[str, Any]:
    return tool_call("regional", arguments)


def with_meta(body: dict[str, Any], **changes: Any) -> dict[str, Any]:
    """`body` with `_meta` keys replaced (None removes them); short keys get the prefix."""
    meta = dict(body["params"]["_meta"])
    for key, value in changes.items():
        full = key if key == "progressToken" else f"io.modelcontextprotocol/{key}"
        if value is None:
            meta.pop(full, None)
        else:
            meta[full] = value
    return {**body, "params": {**body["params"], "_meta": meta}}


@dataclass
class Case:
    """One request and the answer it must get."""

    name: str
    status: int
    code: int | None
    body: Any = field(default_factory=tool_call)
    headers: Mapping[str, str | None] = field(default_factory=dict)
    extra_headers: list[tuple[str, str]] = field(default_factory=list)
    http_method: str = "POST"
    echoes_id: bool = True
    header_body: Any = None  # derive the standard headers from this body instead
    settings: dict[str, Any] = field(default_factory=dict)
    server: tuple[str, int] = ("127.0.0.1", 8000)

    def raw_body(self) -> bytes:
        if isinstance(self.body, bytes):
            return self.body
        return json.dumps(self.body).encode()

    def request_headers(self) -> list[tuple[str, str]]:
        source = self.header_body if self.header_body is not None else self.body
        if not isinstance(source, dict) or "method" not in source:
            source = tool_call()
        return mcp_headers(source, **self.headers) + self.extra_headers


def case(name: str, status: int, code: int | None, **kw: Any) -> Any:
    return pytest.param(Case(name, status, code, **kw), id=name)


def param(name: str, status: int, code: int | None, arguments: Any, **headers: str) -> Any:
    """A call of `regional` with `arguments`, sending each of `headers` as Mcp-Param-<key>."""
    params = {f"mcp-param-{key}": value for key, value in headers.items()}
    return case(name, status, code, body=regional(**arguments), headers=params)


EU = {"region": "eu"}
OK, INVALID_REQUEST, PARSE, NOT_FOUND, PARAMS = 200, -32600, -32700, -32601, -32602
MISMATCH, UNSUPPORTED = -32020, -32022

CASES = [
    # HTTP method, media types, size
    case("GET", 405, INVALID_REQUEST, http_method="GET", body=b"", echoes_id=False),
    case("DELETE", 405, INVALID_REQUEST, http_method="DELETE", body=b"", echoes_id=False),
    case("PUT", 405, INVALID_REQUEST, http_method="PUT", echoes_id=False),
    case("accept-html", 406, INVALID_REQUEST, headers={"accept": "text/html"}),
    case(
        "accept-json-q0",
        406,
        INVALID_REQUEST,
        headers={"accept": "application/json;q=0, text/html"},
    ),
    case("accept-absent", OK, None, headers={"accept": None}),
    case("accept-json-only", OK, None, headers={"accept": "application/json"}),
    case("accept-sse-only", OK, None, headers={"accept": "text/event-stream"}),
    case("accept-any", OK, None, headers={"accept": "*/*"}),
    case("content-type-text", 415, INVALID_REQUEST, headers={"content-type": "text/plain"}),
    case("content-type-absent", 415, INVALID_REQUEST, headers={"content-type": None}),
    case(
        "content-type-form",
        415,
        INVALID_REQUEST,
        headers={"content-type": "application/x-www-form-urlencoded"},
    ),
    case(
        "content-type-charset",
        OK,
        None,
        headers={"content-type": "application/json; charset=utf-8"},
    ),
    case(
        "too-large",
        413,
        INVALID_REQUEST,
        body=tool_call(arguments={"text": "x" * 2000}),
        echoes_id=False,
    ),
    case(
        "too-many-values",
        413,
        INVALID_REQUEST,
        body=tool_call(arguments={"text": "hi", "more": [{}] * 100}),
        settings={"max_json_values": 200},
        echoes_id=False,
    ),
    case(
        "commas-in-strings-are-not-values",
        OK,
        None,
        body=tool_call(arguments={"text": "[{,:" * 150}),
        settings={"max_json_values": 200},
    ),
    # JSON and JSON-RPC shape
    case("bad-json", 400, PARSE, body=b'{"jsonrpc": "2.0", "id": 7,', echoes_id=False),
    case("not-utf8", 400, PARSE, body=b'{"x": "\xff"}', echoes_id=False),
    case("empty-body", 400, PARSE, body=b"", echoes_id=False),
    case("utf8-bom", OK, None, body=b"\xef\xbb\xbf" + json.dumps(tool_call()).encode()),
    case(
        "utf16",
        400,
        PARSE,
        body=json.dumps(tool_call()).encode("utf-16"),
        echoes_id=False,
    ),
    case(
        "lone-surrogate",
        400,
        PARSE,
        body=b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"x":"\\ud800"}}',
        echoes_id=False,
    ),
    case(
        "deeply-nested",
        400,
        PARSE,
        body=b"[" * 50_000,
        settings={"max_body_bytes": 1_000_000},
        echoes_id=False,
    ),
    case("batch", 400, INVALID_REQUEST, body=[tool_call()], echoes_id=False),
    case("empty-batch", 400, INVALID_REQUEST, body=[], echoes_id=False),
    case("json-string", 400, INVALID_REQUEST, body="tools/call", echoes_id=False),
    case("json-null", 400, INVALID_REQUEST, body=None, echoes_id=False),
    case("jsonrpc-1.0", 400, INVALID_REQUEST, body={**tool_call(), "jsonrpc": "1.0"}),
    case(
        "jsonrpc-missing",
        400,
        INVALID_REQUEST,
        body={k: v for k, v in tool_call().items() if k != "jsonrpc"},
    ),
    case("method-missing", 400, INVALID_REQUEST, body={"jsonrpc": "2.0", "id": ID, "params": {}}),
    case("method-number", 400, INVALID_REQUEST, body={**tool_call(), "method": 42}),
    case("method-empty", 400, INVALID_REQUEST, body={**tool_call(), "method": ""}),
    case("params-array", 400, INVALID_REQUEST, body={**tool_call(), "params": [1]}),
    case("id-bool", 400, INVALID_REQUEST, body={**tool_call(), "id": True}, echoes_id=False),
    case("id-float", 400, INVALID_REQUEST, body={**tool_call(), "id": 1.5}, echoes_id=False),
    case("id-null", 400, INVALID_REQUEST, body={**tool_call(), "id": None}, echoes_id=False),
    case("response-result", 400, INVALID_REQUEST, body={"jsonrpc": "2.0", "id": ID, "result": {}}),
    case(
        "response-error",
        400,
        INVALID_REQUEST,
        body={"jsonrpc": "2.0", "id": ID, "error": {"code": 1, "message": "x"}},
    ),
    # the _meta envelope
    case("params-absent", 400, PARAMS, body={"jsonrpc": "2.0", "id": ID, "method": "tools/list"}),
    case("meta-absent", 400, PARAMS, body={**tool_call(), "params": {"name": "echo"}}),
    case(
        "meta-not-object", 400, PARAMS, body={**tool_call(), "params": {"name": "echo", "_meta": 1}}
    ),
    case("meta-no-version", 400, PARAMS, body=with_meta(tool_call(), protocolVersion=None)),
    case("meta-version-number", 400, PARAMS, body=with_meta(tool_call(), protocolVersion=2026)),
    case("meta-no-capabilities", 400, PARAMS, body=with_meta(tool_call(), clientCapabilities=None)),
    case("meta-capabilities-list", 400, PARAMS, body=with_meta(tool_call(), clientCapabilities=[])),
    case("meta-client-info-string", 400, PARAMS, body=with_meta(tool_call(), clientInfo="me")),
    case("meta-no-client-info", OK, None, body=with_meta(tool_call(), clientInfo=None)),
    case("meta-bad-log-level", 400, PARAMS, body=with_meta(tool_call(), logLevel="verbose")),
    case("meta-progress-bool", 400, PARAMS, body=with_meta(tool_call(), progressToken=True)),
    case("meta-progress-float", 400, PARAMS, body=with_meta(tool_call(), progressToken=1.5)),
    # protocol version
    case("version-header-missing", 400, MISMATCH, headers={"mcp-protocol-version": None}),
    case("version-header-mismatch", 400, MISMATCH, headers={"mcp-protocol-version": "2025-11-25"}),
    case(
        "version-body-mismatch",
        400,
        MISMATCH,
        body=with_meta(tool_call(), protocolVersion="2025-11-25"),
    ),
    case("version-header-padded", OK, None, headers={"mcp-protocol-version": " 2026-07-28\t"}),
    case(
        "version-duplicated",
        400,
        MISMATCH,
        extra_headers=[("mcp-protocol-version", "2026-07-28")],
    ),
    # standard headers
    case("mcp-method-missing", 400, MISMATCH, headers={"mcp-method": None}),
    case("mcp-method-mismatch", 400, MISMATCH, headers={"mcp-method": "tools/list"}),
    case("mcp-method-case", 400, MISMATCH, headers={"mcp-method": "Tools/Call"}),
    case("mcp-method-padded", OK, None, headers={"mcp-method": "  tools/call "}),
    case("mcp-name-missing", 400, MISMATCH, headers={"mcp-name": None}),
    case("mcp-name-mismatch", 400, MISMATCH, headers={"mcp-name": "other"}),
    case("mcp-name-padded", OK, None, headers={"mcp-name": "\techo "}),
    case("mcp-name-base64", OK, None, headers={"mcp-name": b64("echo")}),
    case(
        "mcp-name-base64-unicode",
        OK,
        None,
        body=mcp_body("resources/read", {"uri": "docs://grüße"}),
        headers={"mcp-name": b64("docs://grüße")},
    ),
    case(
        "mcp-name-raw-unicode",
        400,
        MISMATCH,
        body=mcp_body("resources/read", {"uri": "docs://grüße"}),
        headers={"mcp-name": "docs://grüße"},
    ),
    case("mcp-name-bad-base64", 400, MISMATCH, headers={"mcp-name": "=?base64?!!!?="}),
    case("mcp-name-base64-not-utf8", 400, MISMATCH, headers={"mcp-name": "=?base64?/w==?="}),
    case("mcp-name-control-char", 400, MISMATCH, headers={"mcp-name": "ec\x01ho"}),
    case("mcp-name-duplicated", 400, MISMATCH, extra_headers=[("mcp-name", "echo")]),
    case(
        "name-not-string",
        400,
        PARAMS,
        body=mcp_body("tools/call", {"name": 5}),
        header_body=tool_call(),
    ),
    case(
        "resource-mcp-name",
        OK,
        None,
        body=mcp_body("resources/read", {"uri": "docs://readme"}),
    ),
    case(
        "resource-mcp-name-mismatch",
        400,
        MISMATCH,
        body=mcp_body("resources/read", {"uri": "docs://readme"}),
        headers={"mcp-name": "docs://other"},
    ),
    # Mcp-Param-*
    param("param-match", OK, None, EU, region="eu"),
    param("param-missing", 400, MISMATCH, EU),
    param("param-mismatch", 400, MISMATCH, EU, region="us"),
    param("param-case-sensitive", 400, MISMATCH, EU, region="EU"),
    param("param-padded", OK, None, EU, region="  eu\t"),
    param("param-base64", OK, None, {"region": " eü "}, region=b64(" eü ")),
    param("param-bad-base64", 400, MISMATCH, EU, region="=?base64?e===?="),
    param("param-int", OK, None, {**EU, "count": 42}, region="eu", count="42"),
    param("param-int-decimal", OK, None, {**EU, "count": 42}, region="eu", count="42.0"),
    param("param-int-body-float", OK, None, {**EU, "count": 42.0}, region="eu", count="42"),
    param("param-int-mismatch", 400, MISMATCH, {**EU, "count": 42}, region="eu", count="43"),
    param("param-int-fraction", 400, MISMATCH, {**EU, "count": 42}, region="eu", count="42.5"),
    param("param-int-exponent", 400, MISMATCH, {**EU, "count": 42}, region="eu", count="4.2e1"),
    param("param-bool", OK, None, {**EU, "flag": True}, region="eu", flag="true"),
    param("param-bool-false", OK, None, {**EU, "flag": False}, region="eu", flag="false"),
    param("param-bool-capital", 400, MISMATCH, {**EU, "flag": True}, region="eu", flag="True"),
    param("param-bool-digit", 400, MISMATCH, {**EU, "flag": True}, region="eu", flag="1"),
    param("param-absent-no-header", OK, None, EU, region="eu"),
    param("param-null-no-header", OK, None, {"region": None}),
    param("param-header-without-value", 400, MISMATCH, EU, region="eu", count="3"),
    case(
        "param-duplicated",
        400,
        MISMATCH,
        body=regional(**EU),
        headers={"mcp-param-region": "eu"},
        extra_headers=[("mcp-param-region", "eu")],
    ),
    case(
        "param-unknown-header-ignored",
        OK,
        None,
        body=tool_call(),
        extra_headers=[("mcp-param-region", "eu")],
    ),
    # methods
    case("unknown-method", 404, NOT_FOUND, body=mcp_body("tools/destroy")),
    case("initialize", 404, NOT_FOUND, body=mcp_body("initialize")),
    case("ping", 404, NOT_FOUND, body=mcp_body("ping")),
    case("logging-setLevel", 404, NOT_FOUND, body=mcp_body("logging/setLevel", {"level": "info"})),
    case(
        "resources-subscribe",
        404,
        NOT_FOUND,
        body=mcp_body("resources/subscribe", {"uri": "docs://readme"}),
    ),
    case(
        "resources-unsubscribe",
        404,
        NOT_FOUND,
        body=mcp_body("resources/unsubscribe", {"uri": "docs://readme"}),
    ),
    case("prompts-not-advertised", 404, NOT_FOUND, body=mcp_body("prompts/list")),
    case("completion-not-advertised", 404, NOT_FOUND, body=mcp_body("completion/complete")),
    # ladder order: the earliest failing step answers
    case(
        "order-version-before-meta",
        400,
        UNSUPPORTED,
        body={**tool_call(), "params": {"name": "echo"}},
        headers={"mcp-protocol-version": "2099-01-01"},
    ),
    case(
        "order-meta-before-method",
        400,
        PARAMS,
        body=with_meta(mcp_body("ping"), clientCapabilities=None),
    ),
    case(
        "order-method-before-headers",
        404,
        NOT_FOUND,
        body=mcp_body("ping"),
        headers={"mcp-method": None},
    ),
    # Origin
    case("origin-absent", OK, None),
    case("origin-same-host", OK, None, headers={"origin": "http://127.0.0.1:8000"}),
    case(
        "origin-foreign",
        403,
        INVALID_REQUEST,
        headers={"origin": "http://evil.example"},
        echoes_id=False,
    ),
    case("origin-null", 403, INVALID_REQUEST, headers={"origin": "null"}, echoes_id=False),
    case(
        "origin-other-port",
        403,
        INVALID_REQUEST,
        headers={"origin": "http://127.0.0.1:9000"},
        echoes_id=False,
    ),
    case(
        "origin-localhost",
        OK,
        None,
        headers={"host": "localhost:8000", "origin": "http://localhost:8000"},
    ),
    case(
        "origin-allowed-list",
        OK,
        None,
        headers={"origin": "https://app.example"},
        settings={"allowed_origins": ["https://app.example"]},
    ),
    case(
        "origin-allowed-list-normalised",
        OK,
        None,
        headers={"origin": "https://APP.example:443"},
        settings={"allowed_origins": ["https://app.example/"]},
    ),
    case(
        "origin-not-in-list",
        403,
        INVALID_REQUEST,
        headers={"origin": "https://other.example"},
        settings={"allowed_origins": ["https://app.example"]},
        echoes_id=False,
    ),
    case(
        "origin-star",
        OK,
        None,
        headers={"origin": "https://anything.example"},
        settings={"allowed_origins": ["*"]},
    ),
    case(
        "origin-dns-rebinding",
        403,
        INVALID_REQUEST,
        headers={"host": "evil.example:8000", "origin": "http://evil.example:8000"},
        echoes_id=False,
    ),
    case(
        "origin-public-socket-same-host",
        OK,
        None,
        headers={"host": "mcp.example", "origin": "https://mcp.example"},
        server=("10.1.2.3", 443),
    ),
    case(
        "origin-public-socket-default-port",
        OK,
        None,
        headers={"host": "mcp.example:443", "origin": "https://mcp.example"},
        server=("10.1.2.3", 443),
    ),
]


@pytest.mark.parametrize("c", CASES)
async def test_validation_ladder(c: Case) -> None:
    """Each request gets its status and JSON-RPC code, echoing the id when it was readable."""
    reply = await asgi_request(
        make_app(**c.settings),
        method=c.http_method,
        headers=c.request_headers(),
        body=c.raw_body(),
        server=c.server,
    )
    assert reply.status == c.status, reply.body
    if c.code is None:
        assert "result" in reply.final, reply.body
        assert reply.final["id"] == ID
        return
    assert reply.content_type == "application/json"
    assert int(reply.headers["content-length"]) == len(reply.body)
    message = reply.final
    assert message["jsonrpc"] == "2.0"
    assert message["error"]["code"] == c.code
    assert message["error"]["message"]
    assert message["id"] == (ID if c.echoes_id else None)


async def test_405_allows_post() -> None:
    """GET and DELETE on the endpoint answer 405 with `Allow: POST`."""
    for method in ("GET", "DELETE"):
        reply = await asgi_request(make_app(), method=method)
        assert reply.status == 405
        assert reply.headers["allow"] == "POST"


@pytest.mark.parametrize(
    ("accept", "content_type"),
    [
        (None, "application/json"),
        ("application/json", "application/json"),
        ("text/event-stream", "text/event-stream"),
        ("application/json, text/event-stream", "application/json"),
    ],
)
async def test_accept_picks_reply_format(accept: str | None, content_type: str) -> None:
    """No Accept or JSON-only is answered with JSON, SSE-only with SSE, both with `auto`."""
    reply = await post(make_app(), tool_call(), accept=accept)
    assert reply.status == 200
    assert reply.content_type == content_type
    assert reply.result["content"] == [{"type": "text", "text": "hi"}]


def _too_large_body() -> bytes:
    return json.dumps(tool_call(arguments={"text": "x" * 3000})).encode()


@pytest.mark.parametrize(
    ("name", "content_length", "chunks"),
    [
        ("declared", True, 1),
        ("chunked-no-length", False, 8),
        ("length-lies", None, 8),
    ],
)
async def test_body_limit(name: str, content_length: bool | None, chunks: int) -> None:
    """A body over max_body_bytes is refused with 413, whatever Content-Length says."""
    raw = _too_large_body()
    body = tool_call()
    headers = mcp_headers(body)
    if content_length is True:
        headers.append(("content-length", str(len(raw))))
    elif content_length is None:
        headers.append(("content-length", "10"))
    size = len(raw) // chunks + 1
    pieces = [raw[i : i + size] for i in range(0, len(raw), size)]
    reply = await asgi_request(make_app(), headers=headers, body=pieces)
    assert reply.status == 413
    assert reply.error["code"] == INVALID_REQUEST


async def test_body_limit_does_not_read_a_declared_oversize_body() -> None:
    """A Content-Length over the limit is refused before the body is read."""
    reads = 0
    sent: list[dict[str, Any]] = []
    body = tool_call()
    scope = http_scope([*mcp_headers(body), ("content-length", "999999")])

    async def receive() -> dict[str, Any]:
        nonlocal reads
        reads += 1
        return {"type": "http.request", "body": b"x" * 1000, "more_body": True}

    async def send(message: Any) -> None:
        sent.append(dict(message))

    await make_app()(scope, receive, send)
    assert reads == 0
    assert sent[0]["status"] == 413


def unsupported_version_reply(reply: Wire) -> dict[str, Any]:
    assert reply.status == 400
    assert reply.error["code"] == UNSUPPORTED
    assert reply.final["id"] == ID
    data: dict[str, Any] = reply.error["data"]
    return data


async def test_unsupported_version_names_supported_and_requested() -> None:
    """An unsupported version is -32022 with data.supported and data.requested."""
    body = with_meta(tool_call(), protocolVersion="2099-01-01")
    reply = await post(make_app(), body, mcp_protocol_version="2099-01-01")
    data = unsupported_version_reply(reply)
    assert data == {"supported": ["2026-07-28"], "requested": "2099-01-01"}


async def test_removed_methods_name_supported_versions() -> None:
    """`initialize` is 404/-32601 and its error names the versions this server speaks."""
    reply = await post(make_app(), mcp_body("initialize"))
    assert reply.status == 404
    assert reply.error["data"] == {"supported": ["2026-07-28"]}


@pytest.mark.parametrize(
    "body",
    [
        {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "method": "notifications/whatever", "params": {}},
    ],
    ids=["cancelled", "initialized", "unknown"],
)
async def test_notification_is_accepted_with_empty_202(body: dict[str, Any]) -> None:
    """A notification POST is answered 202 with an empty body (and ignored)."""
    reply = await post(make_app(), body, headers_of=tool_call())
    assert reply.status == 202
    assert reply.body == b""


async def test_cancelled_notification_does_not_cancel_anything() -> None:
    """`notifications/cancelled` over HTTP names a request but is ignored: it is stdio's."""
    app = make_app()
    cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": ID}}
    first = await post(app, cancel, headers_of=tool_call())
    second = await post(app, tool_call())
    assert first.status == 202
    assert second.result["content"][0]["text"] == "hi"


async def test_other_paths_reach_the_host_app() -> None:
    """Requests to other paths are not validated: the wrapped app answers them."""
    reply = await asgi_request(make_app(), method="GET", path="/elsewhere")
    assert (reply.status, reply.body) == (404, b"host app")


@pytest.mark.parametrize(
    "origin",
    [
        "example.com",
        "",
        "https://",
        "https://a.example/app",
        "https://a.example?x=1",
        "http://a:99999",
    ],
)
def test_bad_allowed_origins_are_refused(origin: str) -> None:
    """An allowed_origins entry that is not an origin is a configuration error."""
    with pytest.raises(ValueError, match="allowed origin"):
        McpSettings(allowed_origins=(origin,))


async def test_dns_rebinding_is_refused_on_a_real_loopback_socket() -> None:
    """On uvicorn bound to 127.0.0.1, a foreign Host+Origin pair is 403; localhost is served."""
    with serve(make_app(), lifespan="off") as server:
        port = server.port

        async def post(host: str) -> McpResponse:
            headers = {"host": f"{host}:{port}", "origin": f"http://{host}:{port}"}
            client = McpTestClient(server.url + "/mcp", headers=headers)
            return await client.request("tools/call", {"name": "echo", "arguments": {"text": "x"}})

        rebound = await post("evil.example")
        local = await post("localhost")
    assert rebound.status == 403
    assert rebound.final["error"]["code"] == INVALID_REQUEST
    assert local.status == 200
    assert local.final["result"]["content"][0]["text"] == "x"


_STANDARD = [
    (b"MCP-Protocol-Version", b"2026-07-28"),
    (b"Mcp-Method", b"tools/call"),
    (b"Mcp-Name", b"echo"),
]


@pytest.mark.parametrize(
    ("headers", "error"),
    [
        (_STANDARD, None),
        (
            [*_STANDARD, (b"mcp-protocol-version", b"2026-07-28")],
            "Header mismatch: MCP-Protocol-Version header appears more than once",
        ),
        (
            [*_STANDARD, (b"MCP-METHOD", b"tools/call")],
            "Header mismatch: Mcp-Method header appears more than once",
        ),
        (
            [*_STANDARD[:2], (b"mcp-name", b"echo"), (b"mCP-nAME", b"other")],
            "Header mismatch: Mcp-Name header appears more than once",
        ),
        (
            [*_STANDARD[:2], (b"MCP-Name", b"other")],
            "Header mismatch: Mcp-Name header value 'other' does not match body value 'echo'",
        ),
    ],
)
def test_header_names_are_read_in_any_case(
    headers: list[tuple[bytes, bytes]], error: str | None
) -> None:
    """ASGI servers send lower-case names, but a name in another case is the same header
    (and a second one in any case is a duplicate)."""
    message = parse_message(json.dumps(tool_call()).encode(), 1000)
    read = RequestHeaders([(b"host", b"127.0.0.1:8000"), *headers])
    if error is None:
        assert validate(read, message, build_server()).method == "tools/call"
        return
    with pytest.raises(ProtocolError) as caught:
        validate(read, message, build_server())
    assert (caught.value.http_status, caught.value.code) == (400, MISMATCH)
    assert caught.value.message == error
