"""A route tool runs the route it was made from, whatever its arguments hold, or the call
is refused (-32602 naming the argument): issue 25 items 1 and 9.

The app has unselected routes beside the selected ones, where a crafted value would
lead: `/users/me` before `/users/{user_id}`, `/users/` and `/users/{user_id}/secret`
around it, `/files/secret/{rest:path}` before `/files/{name:path}`, and an included
router's `/orgs/{org}/members/admin`. Each route records that it ran, with what.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Annotated, Any
from urllib.parse import unquote

import anyio
import pytest
from fastapi import APIRouter, FastAPI, Header, Request
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Mount, Route
from starlette.schemas import SchemaGenerator

from mcp_asgi import McpMiddleware, McpServer, McpSettings
from mcp_asgi.routes import AppRoutes
from mcp_asgi.testing import McpTestClient, serve

from ..helpers import call

SELECTED = ["get_user", "get_file", "get_member"]


@dataclass
class Ran:
    """The routes that ran (name, path params, q, x-token), and the scopes' paths."""

    calls: list[tuple[Any, ...]] = field(default_factory=list)
    paths: list[tuple[str, bytes]] = field(default_factory=list)

    def note(self, request: Request, *what: Any) -> dict[str, str]:
        self.calls.append(what)
        self.paths.append((request.scope["path"], request.scope["raw_path"]))
        return {"ran": str(what[0])}


def selection_app(ran: Ran) -> FastAPI:
    app = FastAPI()

    @app.get("/users/me", operation_id="me")
    async def me(request: Request) -> dict[str, str]:
        return ran.note(request, "me")

    @app.get("/users/", operation_id="list_users")
    async def list_users(request: Request) -> dict[str, str]:
        return ran.note(request, "list_users")

    @app.get("/users/{user_id}", operation_id="get_user")
    async def get_user(
        request: Request,
        user_id: str,
        q: str | None = None,
        x_token: Annotated[str | None, Header()] = None,
    ) -> dict[str, str]:
        return ran.note(request, "get_user", user_id, q, x_token)

    @app.get("/users/{user_id}/secret", operation_id="secret")
    async def secret(request: Request, user_id: str) -> dict[str, str]:
        return ran.note(request, "secret", user_id)

    @app.get("/files/secret/{rest:path}", operation_id="secret_file")
    async def secret_file(request: Request, rest: str) -> dict[str, str]:
        return ran.note(request, "secret_file", rest)

    @app.get("/files/{name:path}", operation_id="get_file")
    async def get_file(request: Request, name: str) -> dict[str, str]:
        return ran.note(request, "get_file", name)

    orgs = APIRouter(prefix="/orgs/{org}")

    @orgs.get("/members/admin", operation_id="admin")
    async def admin(request: Request, org: str) -> dict[str, str]:
        return ran.note(request, "admin", org)

    @orgs.get("/members/{member}", operation_id="get_member")
    async def get_member(request: Request, org: str, member: str) -> dict[str, str]:
        return ran.note(request, "get_member", org, member)

    app.include_router(orgs)
    server = McpServer("selection")
    server.add_source(AppRoutes(include=SELECTED))
    app.add_middleware(McpMiddleware, server=server, settings=McpSettings())
    return app


def expected(tool: str, arguments: dict[str, Any]) -> tuple[Any, ...]:
    """What the selected route records when it runs with `arguments`."""
    if tool == "get_user":
        return ("get_user", arguments["user_id"], arguments.get("q"), arguments.get("x-token"))
    if tool == "get_file":
        return ("get_file", arguments["name"])
    return ("get_member", arguments["org"], arguments["member"])


async def run(app: FastAPI, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """The JSON-RPC answer of calling `tool`, in process."""
    with anyio.fail_after(5):
        response = await call(app, "tools/call", {"name": tool, "arguments": arguments})
    return response.final


RAN = Ran()
APP = selection_app(RAN)  # one app for every example: a new one each is slow


# Values aimed at the routes around the selected ones, then anything.
crafted = st.sampled_from(
    [
        "",
        ".",
        "..",
        "me",
        "alice/secret",
        "secret/x",
        "a/../secret/x",
        "admin",
        "alice\x00",
        "t1\r\nX-Admin: 1",
        "%2F",
        "a%2Fsecret",
        "{member}",
        "{user_id}/secret",
        "x?admin=1",
        "x#y",
        "x&admin=1",
        "\t",
        "é/ü",
    ]
)
pieces = st.sampled_from(list("/.%?#{}&=; \t\r\n\x00\x7fé")) | st.characters()
values = crafted | st.text(pieces, max_size=10)
optional = st.none() | values
PLAIN = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_~ é")


def plain(value: str) -> bool:
    """A value nothing could refuse: one ordinary segment, no route's literal."""
    return bool(value) and set(value) <= PLAIN and value not in ("me", "admin")


@settings(
    max_examples=150,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(
    tool=st.sampled_from(SELECTED),
    first=values,
    second=values,
    q=optional,
    token=optional,
)
def test_a_call_runs_the_selected_route_or_is_refused(
    tool: str, first: str, second: str, q: str | None, token: str | None
) -> None:
    """Whatever the path, query and header values: the route that ran is the tool's, with
    exactly the values given (its scope's raw_path the percent-encoding of its path), or
    the call was refused with -32602 and nothing ran; ordinary values always run."""
    given: dict[str, dict[str, str | None]] = {
        "get_user": {"user_id": first, "q": q, "x-token": token},
        "get_file": {"name": first},
        "get_member": {"org": first, "member": second},
    }
    arguments = {k: v for k, v in given[tool].items() if v is not None}
    RAN.calls.clear()
    RAN.paths.clear()
    message = anyio.run(run, APP, tool, arguments)
    if "error" in message:
        assert message["error"]["code"] == -32602, message
        assert RAN.calls == []
        assert not all(plain(v) for v in arguments.values()), message
        return
    assert "isError" not in message["result"], message
    assert RAN.calls == [expected(tool, arguments)]
    ((path, raw_path),) = RAN.paths
    assert raw_path.isascii()
    assert unquote(raw_path.decode()) == path


def test_the_reported_values_are_refused_naming_the_argument() -> None:
    """The cases of the report, in process: each refused, nothing ran."""
    cases = [
        ("get_user", {"user_id": "alice/secret"}, "'user_id' (a path segment) cannot hold '/'"),
        ("get_user", {"user_id": "alice\x00"}, "'user_id' (in the path) cannot hold NUL"),
        ("get_user", {"user_id": ""}, "'user_id' (a path segment) cannot be empty"),
        ("get_user", {"user_id": ".."}, "'user_id' (a path segment) cannot be '..'"),
        ("get_user", {"user_id": "a", "x-token": "t1\r\nX-Admin: 1"}, "'x-token' (a header)"),
        ("get_user", {"user_id": "me"}, "would not reach the tool's route (GET /users/{user_id})"),
        ("get_file", {"name": "secret/x"}, "would not reach the tool's route"),
        ("get_file", {"name": "a/../secret"}, "'name' (a path) cannot hold a '.' or '..'"),
        ("get_member", {"org": "o", "member": "admin"}, "would not reach"),
    ]
    RAN.calls.clear()
    for tool, arguments, message in cases:
        answer = anyio.run(run, APP, tool, arguments)
        assert answer["error"]["code"] == -32602, (tool, arguments, answer)
        assert message in answer["error"]["message"], answer
        assert f"tool {tool!r}" in answer["error"]["message"]
    assert RAN.calls == []


async def test_values_that_stay_inside_their_route_run_it() -> None:
    """A query value's `&admin=1` stays in the value; a `path` convertor takes `/`; a
    path value's `%2F` and `{...}` are text, encoded in raw_path."""
    ran = Ran()
    app = selection_app(ran)
    for tool, arguments in [
        ("get_user", {"user_id": "alice", "q": "x&admin=1", "x-token": "t1\tt2"}),
        ("get_file", {"name": "docs/a b.txt"}),
        ("get_user", {"user_id": "a%2Fsecret"}),
        ("get_member", {"org": "{member}", "member": "m"}),
    ]:
        answer = await run(app, tool, arguments)
        assert answer["result"]["structuredContent"] == {"ran": tool}, answer
        assert ran.calls[-1] == expected(tool, arguments)
    assert ran.paths[1] == ("/files/docs/a b.txt", b"/files/docs%2Fa%20b.txt")
    assert ran.paths[2] == ("/users/a%2Fsecret", b"/users/a%252Fsecret")
    assert ran.paths[3][0] == "/orgs/{member}/members/m"


async def test_an_app_without_a_router_gets_the_value_checks() -> None:
    """An ASGI app with no router (its document given): '/' and empty values are refused
    all the same."""
    seen: list[str] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        seen.append(scope["path"])
        await JSONResponse({"path": scope["path"]})(scope, receive, send)

    document = {
        "openapi": "3.1.0",
        "info": {"title": "raw", "version": "1"},
        "paths": {
            "/users/{user_id}": {
                "get": {
                    "operationId": "get_user",
                    "parameters": [
                        {
                            "name": "user_id",
                            "in": "path",
                            "required": True,
                            "schema": {"type": "string"},
                        }
                    ],
                    "responses": {"200": {"description": "ok"}},
                }
            }
        },
    }
    server = McpServer("raw")
    server.add_source(AppRoutes(app, openapi=document))
    host = McpMiddleware(Starlette(routes=[Route("/{p:path}", app)]), server=server)
    refused = await call(host, "tools/call", {"name": "get_user", "arguments": {"user_id": "a/b"}})
    assert refused.error["code"] == -32602
    ok = await call(host, "tools/call", {"name": "get_user", "arguments": {"user_id": "a b"}})
    assert ok.result["structuredContent"] == {"path": "/users/a b"}
    assert seen == ["/users/a b"]


async def test_a_starlette_mount_is_looked_into() -> None:
    """A Starlette app with its schema: the routes under a Mount are matched as the router
    will, so `id="me"` (an earlier, unselected `/api/users/me`) is refused."""
    schemas = SchemaGenerator({"openapi": "3.0.0", "info": {"title": "s", "version": "1"}})
    seen: list[str] = []

    async def me(request: Request) -> JSONResponse:
        """
        operationId: me
        responses: {200: {description: the caller}}
        """
        seen.append("me")
        return JSONResponse({"ran": "me"})

    async def get_user(request: Request) -> JSONResponse:
        """
        operationId: get_user
        parameters: [{name: id, in: path, required: true, schema: {type: string}}]
        responses: {200: {description: a user}}
        """
        seen.append("get_user")
        return JSONResponse({"ran": request.path_params["id"]})

    api = Mount("/api", routes=[Route("/users/me", me), Route("/users/{id}", get_user)])
    host = Starlette(routes=[api])
    server = McpServer("starlette")
    server.add_source(
        AppRoutes(host, openapi=lambda: schemas.get_schema(host.routes), include=["get_user"])
    )
    app = McpMiddleware(host, server=server)
    refused = await call(app, "tools/call", {"name": "get_user", "arguments": {"id": "me"}})
    assert "would not reach the tool's route (GET /api/users/{id})" in refused.error["message"]
    ran = await call(app, "tools/call", {"name": "get_user", "arguments": {"id": "mine"}})
    assert ran.result["structuredContent"] == {"ran": "mine"}
    assert seen == ["get_user"]


# -- on a real server ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def live() -> Iterator[tuple[str, Ran]]:
    ran = Ran()
    with serve(selection_app(ran)) as server:
        yield server.url + "/mcp", ran


@pytest.mark.parametrize(
    ("arguments", "argument"),
    [
        ({"user_id": "alice/secret"}, "user_id"),
        ({"user_id": "alice\x00"}, "user_id"),
        ({"user_id": ""}, "user_id"),
        ({"user_id": "alice", "x-token": "t1\r\nX-Admin: 1"}, "x-token"),
    ],
)
async def test_the_reported_cases_on_uvicorn(
    live: tuple[str, Ran], arguments: dict[str, str], argument: str
) -> None:
    """Over HTTP (uvicorn): the report's calls get -32602 naming the argument, and no
    route runs; the query value's `&admin=1` stays inside it."""
    url, ran = live
    ran.calls.clear()
    client = McpTestClient(url)
    response = await client.request("tools/call", {"name": "get_user", "arguments": arguments})
    error = response.final["error"]
    assert error["code"] == -32602
    assert f"argument {argument!r}" in error["message"]
    assert ran.calls == []
    result = await client.call_tool("get_user", {"user_id": "alice", "q": "x&admin=1"})
    assert json.loads(result["content"][0]["text"]) == {"ran": "get_user"}
    assert ran.calls == [("get_user", "alice", "x&admin=1", None)]
