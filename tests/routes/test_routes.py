"""The app's routes as tools, in process (scripted ASGI): what is exposed and how, what a
call sends the route, and what its answer becomes."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
from fastapi import FastAPI
from opentelemetry.instrumentation.fastapi import FastAPIInstrumentor
from opentelemetry.trace import SpanKind
from starlette.applications import Starlette
from starlette.authentication import AuthCredentials, AuthenticationBackend, SimpleUser
from starlette.middleware.authentication import AuthenticationMiddleware
from starlette.requests import HTTPConnection, Request
from starlette.responses import JSONResponse
from starlette.routing import Mount, Route
from starlette.schemas import SchemaGenerator

from mcp_asgi import McpMiddleware, McpServer, McpSettings
from mcp_asgi.routes import AppRoutes

from ..helpers import Otel, asgi_request, call, mcp_body, mcp_headers, wait_for
from .apps import TOKENS, Record, mcp_routes_app


async def tools_of(app: Any) -> dict[str, dict[str, Any]]:
    listed = await call(app, "tools/list")
    return {tool["name"]: tool for tool in listed.result["tools"]}


async def call_tool(app: Any, tool: str, /, **arguments: Any) -> dict[str, Any]:
    response = await call(app, "tools/call", {"name": tool, "arguments": arguments})
    assert response.status == 200, response.body
    result: dict[str, Any] = response.result
    return result


def text(result: dict[str, Any]) -> str:
    return "\n".join(block["text"] for block in result["content"] if block["type"] == "text")


# -- what is exposed ---------------------------------------------------------------------


async def test_only_safe_methods_by_default_with_annotations_from_the_method() -> None:
    """Default: GET and HEAD routes only; opting in exposes the others, each annotated by
    its method; the form route is skipped with a logged reason, decorated tools stay."""
    record = Record()
    app, _, _ = mcp_routes_app(record, routes=AppRoutes())
    safe = await tools_of(app)
    assert {t["annotations"]["readOnlyHint"] for t in safe.values() if t["name"] != "ping"} == {
        True
    }
    assert "create_item" not in safe
    assert "delete_item" not in safe
    assert "ping" in safe
    app, _, _ = mcp_routes_app(record)
    tools = await tools_of(app)
    assert tools["create_item"]["annotations"] == {"readOnlyHint": False}
    assert tools["replace_item"]["annotations"] == {"readOnlyHint": False, "idempotentHint": True}
    assert tools["delete_item"]["annotations"] == {
        "readOnlyHint": False,
        "destructiveHint": True,
        "idempotentHint": True,
    }
    assert "upload" not in tools


async def test_form_routes_are_skipped_with_a_logged_reason(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, "mcp_asgi.routes")
    app, _, _ = mcp_routes_app(Record(), routes=AppRoutes(methods=["POST"]))
    assert set(await tools_of(app)) == {"ping", "create_item"}
    (skipped,) = [r for r in caplog.records if r.name == "mcp_asgi.routes"]
    assert skipped.getMessage() == (
        "route POST /upload is not exposed as a tool: its body is a form or multipart "
        "(application/x-www-form-urlencoded): only JSON bodies are sent"
    )


async def test_the_input_schema_merges_parameters_and_body() -> None:
    """Path, query and header parameters, then the body's fields, in one object; a name
    taken by an earlier one gets its location as a prefix; title and description come
    from the summary and docstring; outputSchema from the response model."""
    app, _, _ = mcp_routes_app(Record())
    tools = await tools_of(app)
    read = tools["read_item_items__item_id__get"]
    assert read["title"] == "Read an item"
    assert read["description"] == "Read one item by its id."
    assert list(read["inputSchema"]["properties"]) == ["item_id", "q", "x-shop-tag"]
    assert read["inputSchema"]["required"] == ["item_id"]
    assert read["outputSchema"]["required"] == ["name", "price"]
    assert list(tools["get_thing"]["inputSchema"]["properties"]) == ["id", "query_id"]
    create = tools["create_item"]["inputSchema"]
    assert list(create["properties"]) == ["notify", "name", "price", "tags"]
    assert create["required"] == ["name", "price"]
    assert "$ref" not in json.dumps(create)
    tree = tools["tree"]["outputSchema"]  # a recursive model: one $defs entry
    assert tree["properties"]["children"]["items"] == {"$ref": "#/$defs/Node"}
    assert set(tree["$defs"]) == {"Node"}
    assert "outputSchema" not in tools["stream"]


async def test_selectors_names_and_prefix() -> None:
    """include/exclude by operation id, tag, path pattern and method; names and prefix."""
    source = AppRoutes(
        include=["tag:items", "path:/admin/*", "whoami"],
        exclude=["get_thing", "method:POST"],
        methods=["GET", "POST"],
        names={"read_item_items__item_id__get": "read_item"},
        prefix="shop.",
    )
    app, _, _ = mcp_routes_app(Record(), routes=source)
    assert set(await tools_of(app)) == {
        "ping",
        "read_item",
        "shop.tree",
        "shop.stats",
        "shop.whoami",
    }
    result = await call_tool(app, "read_item", item_id=1)
    assert result["structuredContent"]["name"] == "kettle"


def test_bad_options_are_refused_at_once() -> None:
    with pytest.raises(ValueError, match="TRACE"):
        AppRoutes(methods=["GET", "TRACE"])
    with pytest.raises(ValueError, match="authorization"):
        AppRoutes(forward_headers=["Authorization"])
    with pytest.raises(ValueError, match="Mcp-"):
        AppRoutes(forward_headers=["mcp-session-id"])
    with pytest.raises(TypeError, match="selector"):
        AppRoutes(include="tag:items")
    with pytest.raises(TypeError, match="openapi"):
        AppRoutes(Starlette())
    with pytest.raises(ValueError, match="max_response_bytes"):
        AppRoutes(max_response_bytes=0)
    with pytest.raises(ValueError, match="task must be one of"):
        AppRoutes(task="sometimes")  # type: ignore[arg-type]


# -- a call ---------------------------------------------------------------------------------


async def test_arguments_go_where_the_route_takes_them() -> None:
    """Path, query (an aliased one under its prefixed name), header and body."""
    app, _, _ = mcp_routes_app(Record())
    read = await call_tool(
        app, "read_item_items__item_id__get", item_id=1, q="x", **{"x-shop-tag": "t"}
    )
    assert read["structuredContent"] == {"name": "kettle x t", "price": 25.0, "tags": ["kitchen"]}
    assert json.loads(text(read)) == read["structuredContent"]
    thing = await call_tool(app, "get_thing", id="a b", query_id="q&r=s")
    assert thing["structuredContent"] == {"path": "a b", "query": "q&r=s"}
    slash = await call(app, "tools/call", {"name": "get_thing", "arguments": {"id": "a/b"}})
    assert slash.error["code"] == -32602  # another path: refused (tests/routes/test_selection.py)
    created = await call_tool(app, "create_item", name="cup", price=3, notify=True)
    assert created["structuredContent"] == {"name": "cup", "price": 3.0, "tags": []}


async def test_errors_carry_the_status_and_the_detail() -> None:
    """A 404's detail, a 422's problems, bad arguments before the call, and a route that
    raises: its 500, the exception logged and never shown."""
    app, _, _ = mcp_routes_app(Record())
    missing = await call_tool(app, "read_item_items__item_id__get", item_id=9)
    assert missing["isError"] is True
    assert text(missing) == "HTTP 404 Not Found: Item 9 not found"
    invalid = await call_tool(app, "read_item_items__item_id__get", item_id="nine")
    assert invalid["isError"] is True
    assert text(invalid).startswith("Invalid arguments for tool 'read_item_items__item_id__get'")
    broken = await call_tool(app, "broken")
    assert broken["isError"] is True
    assert text(broken) == "HTTP 500 Internal Server Error: Internal Server Error"
    assert "secret" not in json.dumps(broken)
    loop = await call_tool(app, "loop")  # the route at the MCP path: never re-entered
    assert loop["isError"] is True
    assert text(loop) == (
        "HTTP 508 Loop Detected: a route called as a tool cannot call the MCP endpoint"
    )


async def test_a_422_lists_each_problem() -> None:
    """FastAPI's own validation (our schema let the value through): each problem."""
    apps: list[FastAPI] = []
    app, _, _ = mcp_routes_app(Record(), routes=AppRoutes(openapi=lambda: _lenient(apps[0])))
    apps.append(app)
    result = await call_tool(app, "read_item_items__item_id__get", item_id="nine")
    assert result["isError"] is True
    assert text(result).startswith("HTTP 422 Unprocessable")
    assert "path.item_id: Input should be a valid integer" in text(result)


def _lenient(app: FastAPI) -> dict[str, Any]:
    """The app's OpenAPI document with item_id accepting any string (so FastAPI checks it)."""
    document: dict[str, Any] = json.loads(json.dumps(app.openapi()))
    for parameter in document["paths"]["/items/{item_id}"]["get"]["parameters"]:
        if parameter["name"] == "item_id":
            parameter["schema"] = {"type": "string"}
    return document


async def test_content_types_become_content_blocks() -> None:
    app, _, _ = mcp_routes_app(Record())
    plain = await call_tool(app, "text")
    assert plain == {
        "content": [{"type": "text", "text": "plain words"}],
        "resultType": "complete",
    } | {k: plain[k] for k in plain if k == "_meta"}
    streamed = await call_tool(app, "stream", lines=3)
    assert text(streamed) == "line 0\nline 1\nline 2\n"
    assert "isError" not in streamed


async def test_a_long_stream_is_cut_and_the_route_told_the_client_left() -> None:
    """Past max_response_bytes the answer is cut (the result says so) and the streaming
    route's generator is closed, however long it would have run."""
    record = Record()
    app, _, _ = mcp_routes_app(record, routes=AppRoutes(max_response_bytes=20))
    result = await call_tool(app, "stream", lines=1_000_000)
    lines = text(result).splitlines()
    assert lines[:3] == ["line 0", "line 1", "line 2"]
    assert lines[-1] == "[the answer was cut at 20 bytes (max_response_bytes)]"
    assert "isError" not in result
    assert record.stream_closed.is_set()


async def test_root_path_app_state_and_headers_carried_over() -> None:
    """The route's path is put under the MCP request's root_path (an app mounted under
    /api), the app's state reaches it, only allow-listed headers are forwarded."""
    record = Record()
    app, _, _ = mcp_routes_app(record, routes=AppRoutes(forward_headers=["accept-language"]))
    outer = Starlette(routes=[Mount("/api", app)])
    body = mcp_body(
        "tools/call", {"name": "read_item_items__item_id__get", "arguments": {"item_id": 1}}
    )
    headers = [*mcp_headers(body), ("accept-language", "fr"), ("x-other", "no")]
    response = await asgi_request(
        outer, headers=headers, body=json.dumps(body).encode(), path="/api/mcp"
    )
    assert response.result["structuredContent"]["name"] == "kettle"
    assert record.headers == {"authorization": None, "accept-language": "fr"}
    assert record.state == ("open", None)


# -- cancellation and telemetry ----------------------------------------------------------


async def test_the_deadline_cancels_the_route_and_closes_its_dependency() -> None:
    """A source timeout: the route's work is cancelled (its `yield` dependency closed with
    the cancellation) and the client gets the timeout error."""
    record = Record()
    app, _, _ = mcp_routes_app(record, routes=AppRoutes(timeout=0.3))
    response = await call(app, "tools/call", {"name": "slow", "arguments": {}})
    await wait_for(record.exited)
    await wait_for(record.closed)
    assert response.error["data"] == {"reason": "timeout"}
    assert record.events == ["open", "route CancelledError", "closed by CancelledError"]


async def test_the_route_span_is_a_child_of_the_tool_call_span() -> None:
    """Under FastAPI instrumentation: one trace, the tool call's span the parent of the
    route's own span."""
    otel = Otel()
    app, _, _ = mcp_routes_app(Record(), otel=otel)
    FastAPIInstrumentor.instrument_app(app, tracer_provider=otel.tracer_provider)
    try:
        await call_tool(app, "read_item_items__item_id__get", item_id=1)
    finally:
        FastAPIInstrumentor.uninstrument_app(app)
    tool = otel.span("tools/call read_item_items__item_id__get")
    (route,) = [s for s in otel.spans.get_finished_spans() if s.name == "GET /items/{item_id}"]
    (post,) = [s for s in otel.spans.get_finished_spans() if s.name == "POST /mcp"]
    assert tool.parent is not None
    assert route.parent is not None
    assert tool.context
    assert route.context
    assert route.parent.span_id == tool.context.span_id
    assert route.context.trace_id == tool.context.trace_id
    assert post.context is not None
    assert tool.parent.span_id == post.context.span_id
    assert route.kind in (SpanKind.SERVER, SpanKind.INTERNAL)


# -- a Starlette app with a schema ---------------------------------------------------------


async def test_a_starlette_app_with_its_schema() -> None:
    """Any app whose OpenAPI document is given: here Starlette's SchemaGenerator's."""
    schemas = SchemaGenerator({"openapi": "3.0.0", "info": {"title": "s", "version": "1"}})

    async def hello(request: Request) -> JSONResponse:
        """
        summary: Say hello
        operationId: hello
        parameters:
          - {name: who, in: query, required: true, schema: {type: string, nullable: true}}
        responses:
          200: {description: a greeting}
        """
        return JSONResponse({"hello": request.query_params["who"]})

    host = Starlette(routes=[Route("/hello", hello)])
    server = McpServer("starlette")
    server.add_source(AppRoutes(host, openapi=lambda: schemas.get_schema(host.routes)))
    app = McpMiddleware(host, server=server, settings=McpSettings())
    tools = await tools_of(app)
    assert tools["hello"]["inputSchema"]["properties"]["who"]["type"] == ["string", "null"]
    result = await call_tool(app, "hello", who="you")
    assert result["structuredContent"] == {"hello": "you"}


async def test_the_sources_scopes_filter_the_list_and_refuse_the_call() -> None:
    """With authorization on, `scopes=` on the routes: a caller without them neither sees
    nor calls them (403 insufficient_scope); the decorated tool stays."""
    app, _, _ = mcp_routes_app(
        Record(), protected=True, routes=AppRoutes(include=["tree"], scopes=["items:admin"])
    )
    bob = {"authorization": "Bearer bob-token"}
    alice = {"authorization": "Bearer alice-token"}
    listed = await call(app, "tools/list", headers=bob)
    assert [tool["name"] for tool in listed.result["tools"]] == ["ping"]
    refused = await call(app, "tools/call", {"name": "tree", "arguments": {}}, headers=bob)
    assert refused.status == 403
    allowed = await call(app, "tools/list", headers=alice)
    assert [tool["name"] for tool in allowed.result["tools"]] == ["ping", "tree"]
    tree = await call(app, "tools/call", {"name": "tree", "arguments": {}}, headers=alice)
    assert tree.result["structuredContent"]["label"] == "root"


class _TokenBackend(AuthenticationBackend):
    """The host app's authentication middleware: a bearer token of TOKENS."""

    async def authenticate(self, conn: HTTPConnection) -> tuple[AuthCredentials, SimpleUser] | None:
        scheme, _, token = conn.headers.get("authorization", "").partition(" ")
        principal = TOKENS.get(token) if scheme.lower() == "bearer" else None
        if principal is None:
            return None
        return AuthCredentials(sorted(principal.scopes)), SimpleUser(f"mw:{principal.subject}")


async def test_middleware_added_after_mcp_applies_to_the_call() -> None:
    """The call enters the app at the top of its stack: an authentication middleware added
    after McpMiddleware (outside it) authenticates the forwarded token."""
    routes = AppRoutes(include=["whoami"], forward_authorization=True)
    app, _, _ = mcp_routes_app(Record(), routes=routes)
    app.add_middleware(AuthenticationMiddleware, backend=_TokenBackend())
    response = await call(
        app,
        "tools/call",
        {"name": "whoami", "arguments": {}},
        headers={"authorization": "Bearer alice-token"},
    )
    assert response.result["structuredContent"] == {
        "subject": "alice",
        "authorization": "Bearer alice-token",
        "user": "mw:alice",
    }
