"""Mounting on FastAPI, Starlette and bare ASGI apps: paths, root_path, pass-through, settings."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx
import pytest
import uvicorn
from fastapi import FastAPI
from pydantic import Field
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse
from starlette.routing import Mount, Route, WebSocketRoute
from starlette.testclient import TestClient
from starlette.types import Receive, Scope, Send
from starlette.websockets import WebSocket

from mcp_asgi import CancelReason, Context, McpMiddleware, McpServer, McpSettings
from mcp_asgi.testing import McpTestClient, serve

from ..helpers import Probe, asgi_request, drop_mid_call, mcp_body, mcp_headers, wait_for

BASE = "http://127.0.0.1:8000"


def mcp_server() -> McpServer:
    server = McpServer("mounted")

    @server.tool()
    async def echo(text: str) -> str:
        """Echo the text."""
        return text

    return server


def fastapi_app(**options: Any) -> FastAPI:
    app = FastAPI()

    @app.get("/")
    async def home() -> dict[str, str]:
        return {"app": "fastapi"}

    @app.post("/mcp-like")
    async def similar() -> dict[str, str]:
        return {"app": "similar"}

    @app.websocket("/ws")
    async def ws(websocket: WebSocket) -> None:
        await websocket.accept()
        await websocket.send_text("hello from the app")
        await websocket.close()

    app.add_middleware(McpMiddleware, server=mcp_server(), **options)
    return app


async def home(request: Request) -> PlainTextResponse:
    return PlainTextResponse(f"starlette at {request.url.path}")


def starlette_app(**options: Any) -> Starlette:
    app = Starlette(routes=[Route("/", home), Route("/page", home)])
    app.add_middleware(McpMiddleware, server=mcp_server(), **options)
    return app


async def bare_app(asgi_scope: Scope, receive: Receive, send: Send) -> None:
    """A host app without any framework: answers every HTTP request with 418."""
    if asgi_scope["type"] != "http":
        return
    await send({"type": "http.response.start", "status": 418, "headers": []})
    await send({"type": "http.response.body", "body": asgi_scope["path"].encode()})


def echo_request(text: str = "hi") -> tuple[dict[str, str], bytes]:
    body = mcp_body("tools/call", {"name": "echo", "arguments": {"text": text}})
    return dict(mcp_headers(body)), json.dumps(body).encode()


async def post_mcp(app: Any, url: str, *, root_path: str = "") -> httpx.Response:
    transport = httpx.ASGITransport(app=app, root_path=root_path)
    async with httpx.AsyncClient(transport=transport, base_url=BASE) as client:
        headers, body = echo_request()
        return await client.post(url, headers=headers, content=body)


async def get(app: Any, url: str) -> httpx.Response:
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=BASE) as client:
        return await client.get(url)


def echoed(response: httpx.Response) -> str:
    assert response.status_code == 200, response.text
    text: str = response.json()["result"]["content"][0]["text"]
    return text


# -- frameworks ----------------------------------------------------------------------


async def test_fastapi_add_middleware() -> None:
    """On FastAPI, `add_middleware` serves MCP at /mcp and the app's routes keep working."""
    app = fastapi_app()
    assert echoed(await post_mcp(app, "/mcp")) == "hi"
    assert (await get(app, "/")).json() == {"app": "fastapi"}
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=BASE) as c:
        assert (await c.post("/mcp-like")).json() == {"app": "similar"}
        assert (await c.get("/missing")).status_code == 404


async def test_starlette_add_middleware() -> None:
    """On Starlette, `add_middleware` serves MCP and the app's routes keep working."""
    app = starlette_app()
    assert echoed(await post_mcp(app, "/mcp")) == "hi"
    assert (await get(app, "/page")).text == "starlette at /page"


async def test_starlette_middleware_list() -> None:
    """`Starlette(middleware=[Middleware(McpMiddleware, ...)])` works as add_middleware does."""
    app = Starlette(
        routes=[Route("/", home)],
        middleware=[Middleware(McpMiddleware, server=mcp_server(), path="/tools")],
    )
    assert echoed(await post_mcp(app, "/tools")) == "hi"
    assert (await get(app, "/")).text == "starlette at /"


async def test_wraps_a_bare_asgi_callable() -> None:
    """McpMiddleware wraps any ASGI callable; other paths reach it unchanged."""
    app = McpMiddleware(bare_app, server=mcp_server())
    assert echoed(await post_mcp(app, "/mcp")) == "hi"
    response = await get(app, "/else")
    assert (response.status_code, response.text) == (418, "/else")


# -- exact path match ----------------------------------------------------------------


@pytest.mark.parametrize("url", ["/mcp", "/mcp/"])
async def test_exact_path_with_or_without_slash(url: str) -> None:
    """/mcp and /mcp/ are both the endpoint, answered directly: no 307 redirect."""
    response = await post_mcp(fastapi_app(), url)
    assert "location" not in response.headers
    assert echoed(response) == "hi"


@pytest.mark.parametrize("url", ["/mcpx", "/mcp/x", "/MCP", "/api/mcp", "/mcp//"])
async def test_other_paths_pass_through(url: str) -> None:
    """Paths that are not exactly the endpoint go to the host app."""
    response = await post_mcp(McpMiddleware(bare_app, server=mcp_server()), url)
    assert response.status_code == 418


async def test_path_option_overrides_settings() -> None:
    """`path=` wins over `settings.path`; the settings' path is then an ordinary path."""
    app = McpMiddleware(bare_app, server=mcp_server(), settings=McpSettings(path="/a"), path="/b/")
    assert echoed(await post_mcp(app, "/b")) == "hi"
    assert (await post_mcp(app, "/a")).status_code == 418


async def test_root_path_endpoint() -> None:
    """An endpoint at `/` is served at the app's root, with or without root_path."""
    app = McpMiddleware(bare_app, server=mcp_server(), path="/")
    assert echoed(await post_mcp(app, "/")) == "hi"
    assert (await post_mcp(app, "/mcp")).status_code == 418


@pytest.mark.parametrize("path", ["mcp", "/mcp?x=1", 5])
def test_bad_path_is_refused(path: Any) -> None:
    """A path that is not absolute (or has a query) is a configuration error."""
    with pytest.raises(ValueError, match="path"):
        McpMiddleware(bare_app, server=mcp_server(), path=path)


def test_constructor_checks_its_arguments() -> None:
    """A wrong server or settings object is a TypeError at construction."""
    with pytest.raises(TypeError, match="McpServer"):
        McpMiddleware(bare_app, server=object())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="McpSettings"):
        McpMiddleware(bare_app, server=mcp_server(), settings={"path": "/x"})  # type: ignore[arg-type]


# -- root_path -----------------------------------------------------------------------


async def test_mounted_under_a_prefix() -> None:
    """A FastAPI app mounted at /api serves MCP at /api/mcp (root_path is honoured)."""
    outer = Starlette(routes=[Mount("/api", app=fastapi_app())])
    assert echoed(await post_mcp(outer, "/api/mcp")) == "hi"
    assert (await get(outer, "/api/")).json() == {"app": "fastapi"}
    assert (await post_mcp(outer, "/mcp")).status_code == 404


async def test_root_path_from_the_server() -> None:
    """With root_path=/api (uvicorn --root-path), /api/mcp is the endpoint."""
    app = McpMiddleware(bare_app, server=mcp_server())
    headers, body = echo_request()
    reply = await asgi_request(
        app, path="/mcp", root_path="/api", headers=list(headers.items()), body=body
    )
    assert reply.result["content"][0]["text"] == "hi"


async def test_uvicorn_root_path_live() -> None:
    """Behind a proxy that strips /api, uvicorn --root-path /api serves /mcp as /api/mcp."""
    with serve(fastapi_app(), root_path="/api") as server:
        client = McpTestClient(server.url + "/mcp")
        result = await client.call_tool("echo", {"text": "proxied"})
        assert result["content"][0]["text"] == "proxied"


# -- websockets and lifespan ---------------------------------------------------------


def test_websockets_pass_through() -> None:
    """Websocket connections reach the app, even on the MCP path."""
    seen: list[str] = []

    async def ws_endpoint(websocket: WebSocket) -> None:
        await websocket.accept()
        seen.append(websocket.url.path)
        await websocket.send_text("app")
        await websocket.close()

    app = Starlette(
        routes=[WebSocketRoute("/mcp", ws_endpoint), WebSocketRoute("/ws", ws_endpoint)]
    )
    app.add_middleware(McpMiddleware, server=mcp_server())
    with TestClient(app) as client:
        for path in ("/mcp", "/ws"):
            with client.websocket_connect(path) as websocket:
                assert websocket.receive_text() == "app"
    assert seen == ["/mcp", "/ws"]


def test_fastapi_websocket_route_keeps_working() -> None:
    """A FastAPI websocket route beside the middleware still works."""
    with TestClient(fastapi_app()) as client, client.websocket_connect("/ws") as websocket:
        assert websocket.receive_text() == "hello from the app"


async def test_host_lifespan_runs() -> None:
    """The host app's lifespan runs (startup and shutdown) with nothing wired for MCP."""
    events: list[str] = []

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        events.append("startup")
        yield
        events.append("shutdown")

    app = FastAPI(lifespan=lifespan)
    app.add_middleware(McpMiddleware, server=mcp_server())
    with serve(app) as server:
        assert events == ["startup"]
        result = await McpTestClient(server.url + "/mcp").call_tool("echo", {"text": "live"})
        assert result["content"][0]["text"] == "live"
    assert events == ["startup", "shutdown"]


async def test_lifespan_messages_are_passed_unchanged() -> None:
    """Lifespan events reach a bare app as they were sent."""
    received: list[str] = []

    async def app(asgi_scope: Scope, receive: Receive, send: Send) -> None:
        assert asgi_scope["type"] == "lifespan"
        while True:
            message = await receive()
            received.append(message["type"])
            await send({"type": message["type"] + ".complete"})
            if message["type"] == "lifespan.shutdown":
                return

    incoming = [{"type": "lifespan.startup"}, {"type": "lifespan.shutdown"}]
    sent: list[str] = []

    async def receive() -> dict[str, Any]:
        return incoming.pop(0)

    async def send(message: Any) -> None:
        sent.append(message["type"])

    await McpMiddleware(app, server=mcp_server())({"type": "lifespan"}, receive, send)
    assert received == ["lifespan.startup", "lifespan.shutdown"]
    assert sent == ["lifespan.startup.complete", "lifespan.shutdown.complete"]


# -- two middlewares -------------------------------------------------------------------


def named_server(name: str) -> McpServer:
    server = McpServer(name)

    @server.tool(name=f"{name}_tool")
    async def tool() -> str:
        """A tool of this server."""
        return name

    return server


def shadow_records(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [
        r
        for r in caplog.records
        if r.name.startswith("mcp_asgi") and "two McpMiddleware serve" in r.getMessage()
    ]


async def test_two_middlewares_on_one_path_fail_the_startup(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """McpMiddleware added twice on /mcp: the inner one (whose tools the outer one would
    hide) fails the lifespan startup, naming the path, both servers and what to do; uvicorn
    does not start."""
    app = FastAPI()
    app.add_middleware(McpMiddleware, server=named_server("inner"))
    app.add_middleware(McpMiddleware, server=named_server("outer"))
    server = uvicorn.Server(uvicorn.Config(app, port=0, log_level="critical", lifespan="on"))
    with pytest.raises(SystemExit) as exited:  # uvicorn's exit on a failed startup
        await server.serve()
    assert exited.value.code == 3
    assert not server.started
    [record] = shadow_records(caplog)
    assert record.levelno == logging.ERROR
    assert record.getMessage() == (
        "the MCP server cannot start: two McpMiddleware serve the path '/mcp': the outer "
        "one (server 'outer') answers every request to it, so this one (server 'inner') "
        "would never be reached and its tools never listed. Add McpMiddleware once per "
        "path, or give this one another path (path= or McpSettings.path)"
    )


async def test_two_middlewares_on_two_paths_both_serve(caplog: pytest.LogCaptureFixture) -> None:
    """Two servers on different paths, one middleware inside the other: both start and
    serve their own tools, nothing is logged about them."""
    inner = McpMiddleware(bare_app, server=named_server("inner"), path="/inner")
    with serve(McpMiddleware(inner, server=named_server("outer"), path="/outer")) as live:
        for name in ("inner", "outer"):
            client = McpTestClient(f"{live.url}/{name}")
            assert [t["name"] for t in await client.list_tools()] == [f"{name}_tool"]
    assert shadow_records(caplog) == []


async def test_without_a_lifespan_the_first_request_logs_the_shadowed_one(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """With lifespan off nothing can fail the start: the inner middleware logs the same
    error once, at the first request it sees (one the outer passed on)."""
    inner = McpMiddleware(bare_app, server=named_server("inner"))
    with serve(McpMiddleware(inner, server=named_server("outer")), lifespan="off") as live:
        async with httpx.AsyncClient(base_url=live.url) as http:
            for _ in range(2):
                assert (await http.get("/")).status_code == 418  # bare_app's answer
    [record] = shadow_records(caplog)
    assert record.levelno == logging.ERROR
    assert "(server 'inner') would never be reached" in record.getMessage()


# -- settings ------------------------------------------------------------------------


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for key in list(os.environ):
        if key.startswith(("MCP_", "APP_")):
            monkeypatch.delenv(key)
    return monkeypatch


async def test_settings_from_environment(clean_env: pytest.MonkeyPatch) -> None:
    """MCP_* environment variables configure a middleware built without settings."""
    clean_env.setenv("MCP_PATH", "/from-env/")
    clean_env.setenv("MCP_ALLOWED_ORIGINS", '["https://app.example"]')
    clean_env.setenv("MCP_MAX_BODY_BYTES", "2048")
    clean_env.setenv("MCP_RESPONSE_MODE", "json")
    clean_env.setenv("MCP_MAX_REQUEST_DURATION", "none")
    clean_env.setenv("MCP_PAGE_SIZE", "7")
    app = McpMiddleware(bare_app, server=mcp_server())
    settings = app.settings
    assert settings.path == "/from-env"
    assert settings.allowed_origins == ("https://app.example",)
    assert settings.max_body_bytes == 2048
    assert settings.response_mode == "json"
    assert settings.max_request_duration is None
    assert settings.page_size == 7
    assert echoed(await post_mcp(app, "/from-env")) == "hi"


def test_invalid_environment_is_refused(clean_env: pytest.MonkeyPatch) -> None:
    """A bad MCP_* value fails loudly at construction."""
    clean_env.setenv("MCP_RESPONSE_MODE", "xml")
    with pytest.raises(ValueError, match="response_mode"):
        McpSettings()


LIST_SETTINGS = {
    "allowed_origins": ("https://a.example", "https://b.example:8443"),
    "auth_issuers": ("https://id.example/realms/mcp", "https://id2.example"),
    "auth_required_scopes": ("mcp", "files:read"),
    "auth_algorithms": ("RS256", "ES256"),
    "auth_token_types": ("at+jwt", "jwt"),
}


def test_every_list_setting_is_covered() -> None:
    """Every tuple-typed setting reads its environment variable as a list (NoDecode: no
    JSON-only parse before the validator) and is in LIST_SETTINGS below."""
    listed = {
        name
        for name, field in McpSettings.model_fields.items()
        if getattr(field.annotation, "__origin__", None) is tuple
    }
    assert listed == set(LIST_SETTINGS)
    assert all(NoDecode in McpSettings.model_fields[name].metadata for name in listed)


@pytest.mark.parametrize("name", LIST_SETTINGS)
@pytest.mark.parametrize("style", ["comma", "json"])
def test_list_settings_from_environment(
    clean_env: pytest.MonkeyPatch, name: str, style: str
) -> None:
    """A list setting's MCP_* variable is a comma-separated list (spaces around items and
    empty items dropped) or a JSON list. (An auth setting needs authorization on.)"""
    items = LIST_SETTINGS[name]
    if name.startswith("auth_"):
        clean_env.setenv("MCP_AUTH_RESOURCE", "https://mcp.example/mcp")
        clean_env.setenv("MCP_AUTH_ISSUERS", "https://id.example")
    text = " , ".join(items) + "," if style == "comma" else json.dumps(items)
    clean_env.setenv(f"MCP_{name.upper()}", text)
    assert getattr(McpSettings(), name) == items


def test_list_setting_with_broken_json_names_the_variable(clean_env: pytest.MonkeyPatch) -> None:
    """A list variable that starts like JSON but is not a JSON list fails naming the
    variable and both formats it takes."""
    clean_env.setenv("MCP_ALLOWED_ORIGINS", '["https://a.example"')
    with pytest.raises(ValueError, match=r"MCP_ALLOWED_ORIGINS\) is not a list.*comma-separated"):
        McpSettings()


def test_nested_list_setting_takes_a_comma_separated_list(clean_env: pytest.MonkeyPatch) -> None:
    """Through an app's own settings class (env_nested_delimiter) too."""

    class AppSettings(BaseSettings):
        model_config = SettingsConfigDict(env_prefix="APP_", env_nested_delimiter="__")
        mcp: McpSettings = Field(default_factory=McpSettings)

    clean_env.setenv("APP_MCP__ALLOWED_ORIGINS", "https://a.example,https://b.example")
    assert AppSettings().mcp.allowed_origins == ("https://a.example", "https://b.example")


@pytest.mark.parametrize(
    ("settings", "named"),
    [
        ({"cancel_grace": 1.0}, r"process_kill_grace \(2 s\) must not exceed cancel_grace"),
        (
            {"cancel_grace": 3.0, "process_kill_grace": 5.0},
            r"process_kill_grace \(5 s\).*MCP_PROCESS_KILL_GRACE.*MCP_CANCEL_GRACE",
        ),
        (
            {"max_client_info_bytes": 2048, "max_session_bytes": 1024},
            r"max_client_info_bytes \(2048\) must not exceed max_session_bytes \(1024\)",
        ),
    ],
)
def test_contradicting_settings_are_refused(settings: dict[str, Any], named: str) -> None:
    """Settings that cannot work together fail when built, naming both settings."""
    with pytest.raises(ValueError, match=named):
        McpSettings(**settings)


def test_contradicting_environment_is_refused(clean_env: pytest.MonkeyPatch) -> None:
    """The same from the environment: MCP_CANCEL_GRACE=1 with the default kill grace."""
    clean_env.setenv("MCP_CANCEL_GRACE", "1")
    with pytest.raises(ValueError, match="process_kill_grace"):
        McpSettings()
    clean_env.setenv("MCP_PROCESS_KILL_GRACE", "0.5")
    assert McpSettings().process_kill_grace == 0.5


async def test_settings_nested_in_app_settings(clean_env: pytest.MonkeyPatch) -> None:
    """McpSettings nests in an app's own settings class, configured through its env prefix."""

    class AppSettings(BaseSettings):
        model_config = SettingsConfigDict(env_prefix="APP_", env_nested_delimiter="__")
        title: str = "service"
        mcp: McpSettings = Field(default_factory=McpSettings)

    clean_env.setenv("APP_MCP__PATH", "/nested")
    clean_env.setenv("APP_MCP__KEEPALIVE_INTERVAL", "2.5")
    clean_env.setenv("MCP_KEEPALIVE_INTERVAL", "9")  # the app's prefix wins...
    clean_env.setenv("MCP_PAGE_SIZE", "7")  # ...and MCP_* fills the rest
    settings = AppSettings()
    assert settings.mcp.path == "/nested"
    assert settings.mcp.keepalive_interval == 2.5
    assert settings.mcp.page_size == 7
    app = FastAPI()
    app.add_middleware(McpMiddleware, server=mcp_server(), settings=settings.mcp)
    assert echoed(await post_mcp(app, "/nested")) == "hi"


async def test_starlette_json_route_beside_mcp() -> None:
    """A host JSON route at a similar path is untouched by the middleware."""

    async def data(request: Request) -> JSONResponse:
        return JSONResponse({"body": (await request.body()).decode()})

    app = Starlette(routes=[Route("/mcp/data", data, methods=["POST"])])
    app.add_middleware(McpMiddleware, server=mcp_server())
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=BASE) as c:
        response = await c.post("/mcp/data", content=b"raw")
    assert response.json() == {"body": "raw"}


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@pytest.mark.parametrize("mode", ["json", "auto"])
async def test_cancel_under_base_http_middleware(mode: str) -> None:
    """With an `@app.middleware("http")` around it, a dropped call is cancelled cleanly:
    the outer middleware still gets a response, so uvicorn logs no ASGI exception."""
    probe, reasons = Probe(), list[CancelReason | None]()
    server = McpServer("wrapped")

    @server.tool()
    async def hang(ctx: Context) -> str:
        """Runs until cancelled."""
        probe.started.set()
        try:
            await anyio.sleep(30)
        finally:
            reasons.append(ctx.cancel_reason)
            probe.exited.set()
        return "never"

    app = FastAPI()
    app.add_middleware(McpMiddleware, server=server, settings=McpSettings(response_mode=mode))  # type: ignore[arg-type]
    statuses: list[int] = []

    @app.middleware("http")
    async def timing(request: Request, call_next: Any) -> Any:
        response = await call_next(request)
        statuses.append(response.status_code)
        return response

    records = _Records()
    uvicorn_errors = logging.getLogger("uvicorn.error")
    with serve(app) as live:
        uvicorn_errors.addHandler(records)
        try:
            client = McpTestClient(live.url + "/mcp")
            await drop_mid_call(client, "hang", probe, {})
            await wait_for(probe.exited)
            assert (await client.request("tools/list")).status == 200
        finally:
            uvicorn_errors.removeHandler(records)
    assert reasons == [CancelReason.CLIENT_DISCONNECT]
    assert 499 in statuses
    assert not [m for m in records.messages if "Exception in ASGI application" in m]


async def test_cors_middleware_added_after_mcp_answers_preflight() -> None:
    """CORSMiddleware added after McpMiddleware wraps it: preflights and browser POSTs work."""
    origin = "https://app.example"
    app = FastAPI()
    app.add_middleware(
        McpMiddleware, server=mcp_server(), settings=McpSettings(allowed_origins=(origin,))
    )
    app.add_middleware(
        CORSMiddleware, allow_origins=[origin], allow_methods=["POST"], allow_headers=["*"]
    )
    headers, body = echo_request()
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=BASE) as c:
        preflight = await c.options(
            "/mcp",
            headers={
                "origin": origin,
                "access-control-request-method": "POST",
                "access-control-request-headers": "content-type,mcp-protocol-version,mcp-method",
            },
        )
        post = await c.post("/mcp", headers={**headers, "origin": origin}, content=body)
    assert preflight.status_code == 200
    assert preflight.headers["access-control-allow-origin"] == origin
    assert "mcp-method" in preflight.headers["access-control-allow-headers"]
    assert echoed(post) == "hi"
    assert post.headers["access-control-allow-origin"] == origin


async def test_internal_error_is_a_json_rpc_error_not_a_crash(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A bug inside the middleware answers 500 with a JSON-RPC -32603 body and is logged."""
    import mcp_asgi.endpoint as endpoint_module

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr(endpoint_module, "validate", broken)
    with caplog.at_level(logging.ERROR, logger="mcp_asgi"):
        response = await post_mcp(McpMiddleware(bare_app, server=mcp_server()), "/mcp")
    assert response.status_code == 500
    assert response.json()["error"]["code"] == -32603
    assert "boom" not in response.text
    assert any(record.exc_info for record in caplog.records)


async def test_internal_error_after_the_reply_started_sends_nothing_more(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A bug once the response has started is logged; no second response is started (the
    client keeps the reply it got)."""
    from mcp_asgi.http.reply import ReplyWriter

    def broken(self: ReplyWriter) -> bool:
        raise RuntimeError("boom")

    monkeypatch.setattr(ReplyWriter, "end_at_once", broken)  # after the reply is written
    with caplog.at_level(logging.ERROR, logger="mcp_asgi"):
        response = await post_mcp(McpMiddleware(bare_app, server=mcp_server()), "/mcp")
    assert response.status_code == 200
    assert echoed(response) == "hi"
    assert any(record.exc_info for record in caplog.records)


MISCONFIGURED_APP = """
from fastapi import FastAPI
from mcp_asgi import McpMiddleware, McpServer

mcp = McpServer("scoped", default_scopes=["admin"])

@mcp.tool()
async def secret() -> str:
    return "s"

app = FastAPI()
app.add_middleware(McpMiddleware, server=mcp)  # scopes, but authorization off
"""


def test_a_refused_configuration_is_logged_at_start_up_under_lifespan_auto(
    tmp_path: Any,
) -> None:
    """uvicorn's default `--lifespan auto` takes the error of a middleware Starlette builds
    at the lifespan startup for "lifespan unsupported" and serves on: mcp_asgi's ERROR line
    still says at start-up why the endpoint cannot start, naming the setting."""
    (tmp_path / "misconfigured.py").write_text(MISCONFIGURED_APP)
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    command = [sys.executable, "-m", "uvicorn", "misconfigured:app", "--port", "0"]
    with subprocess.Popen(
        command, env=env, stderr=subprocess.PIPE, text=True, cwd=tmp_path
    ) as process:
        assert process.stderr is not None
        seen: list[str] = []
        try:
            for line in process.stderr:
                seen.append(line)
                if "Uvicorn running" in line:
                    break
        finally:
            process.terminate()
            process.wait(10)
    refusal = [line for line in seen if "the MCP endpoint cannot start" in line]
    assert refusal, "".join(seen)
    assert "auth_resource" in refusal[0]


def test_an_old_setting_name_is_refused_naming_the_new(clean_env: pytest.MonkeyPatch) -> None:
    """`list_ttl_ms` (milliseconds, the one setting not in seconds) became `list_ttl`: the old
    name, as an argument or an MCP_* variable, is refused with the new one, never ignored."""
    with pytest.raises(ValueError, match=r"list_ttl_ms \(MCP_LIST_TTL_MS\) was renamed list_ttl"):
        McpSettings(list_ttl_ms=5000)  # type: ignore[call-arg]
    clean_env.setenv("MCP_LIST_TTL_MS", "5000")
    with pytest.raises(ValueError, match="was renamed list_ttl, in seconds"):
        McpSettings()
    clean_env.delenv("MCP_LIST_TTL_MS")
    clean_env.setenv("MCP_LIST_TTL", "1.5")
    assert McpSettings().list_ttl == 1.5


@pytest.mark.parametrize("off", [0, 0.0, "0"])
def test_keepalives_are_off_with_none_only(clean_env: pytest.MonkeyPatch, off: object) -> None:
    """ "Off" is None in every setting: keepalive_interval=0 is refused saying so; None (and
    'none' from the environment) turns keep-alives off."""
    with pytest.raises(ValueError, match="None turns keep-alives off"):
        McpSettings(keepalive_interval=off)  # type: ignore[arg-type]
    assert McpSettings(keepalive_interval=None).keepalive_interval is None
    clean_env.setenv("MCP_KEEPALIVE_INTERVAL", "none")
    assert McpSettings().keepalive_interval is None
