"""The host app's own identity (auth_host_identity): Starlette's AuthenticationMiddleware
in front of the endpoint; ctx.principal, scopes, sessions bound to it, record_principal."""

from __future__ import annotations

import json
from typing import Any

from starlette.authentication import (
    AuthCredentials,
    AuthenticationBackend,
    BaseUser,
    SimpleUser,
)
from starlette.middleware.authentication import AuthenticationMiddleware
from starlette.requests import HTTPConnection

from mcp_asgi import McpMiddleware, McpSettings

from ..helpers import Otel, asgi_request, call, host_app
from ..servers import LATEST
from .apps import Ran, protected_server


class HeaderAuth(AuthenticationBackend):
    """The host app's authentication: `x-user: name scope scope...` (a stand-in for a
    session cookie or the app's own token check)."""

    async def authenticate(self, conn: HTTPConnection) -> tuple[AuthCredentials, BaseUser] | None:
        value = conn.headers.get("x-user")
        if not value:
            return None
        name, *scopes = value.split()
        return AuthCredentials(scopes), SimpleUser(name)


def host_authenticated(ran: Ran, otel: Otel | None = None, **settings: Any) -> Any:
    """The recipe: the host's AuthenticationMiddleware outside McpMiddleware."""
    mcp = McpMiddleware(
        host_app(),
        server=protected_server(ran),
        settings=McpSettings(auth_host_identity=True, **settings),
        tracer_provider=otel.tracer_provider if otel else None,
        meter_provider=otel.meter_provider if otel else None,
    )
    return AuthenticationMiddleware(mcp, backend=HeaderAuth())


async def test_the_host_identity_is_the_principal() -> None:
    """ctx.principal is the host app's user with its AuthCredentials scopes; per-tool
    scopes apply; without the host's identity the request is refused (401)."""
    ran = Ran()
    app = host_authenticated(ran)
    served = await call(
        app,
        "tools/call",
        {"name": "whoami", "arguments": {}},
        headers={"x-user": "alice tools:read"},
    )
    forbidden = await call(
        app,
        "tools/call",
        {"name": "purge", "arguments": {}},
        headers={"x-user": "alice tools:read"},
    )
    anonymous = await call(app, "tools/call", {"name": "whoami", "arguments": {}})
    assert served.result["structuredContent"] == {
        "subject": "alice",
        "scopes": ["tools:read"],
        "client_id": None,
        "issuer": None,
        "source": "host",
        "aud": None,
    }
    assert forbidden.status == 403
    assert forbidden.headers["www-authenticate"] == (
        'Bearer error="insufficient_scope", scope="admin", '
        'error_description="This operation needs the scopes: admin"'
    )
    assert anonymous.status == 401
    assert anonymous.headers["www-authenticate"] == "Bearer"
    assert ran.calls == ["whoami"]


async def test_a_session_belongs_to_the_host_user() -> None:
    """A 2025-era session opened by alice is 404 to bob (POST, GET, DELETE)."""
    ran = Ran()
    app = host_authenticated(ran)

    def headers(user: str, session: str | None = None) -> list[tuple[str, str]]:
        items = [
            ("content-type", "application/json"),
            ("accept", "application/json, text/event-stream"),
            ("mcp-protocol-version", LATEST),
            ("x-user", user),
        ]
        return [*items, ("mcp-session-id", session)] if session else items

    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": LATEST, "capabilities": {}},
    }
    opened = await asgi_request(
        app, headers=headers("alice tools:read"), body=json.dumps(init).encode()
    )
    session = opened.headers["mcp-session-id"]
    body = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "whoami", "arguments": {}},
        }
    ).encode()
    bob = headers("bob tools:read", session)
    post = await asgi_request(app, headers=bob, body=body)
    get = await asgi_request(app, headers=bob, method="GET")
    delete = await asgi_request(app, headers=bob, method="DELETE")
    assert (post.status, get.status, delete.status) == (404, 404, 404)
    assert ran.calls == []
    mine = await asgi_request(app, headers=headers("alice tools:read", session), body=body)
    assert mine.status == 200
    assert mine.final["result"]["structuredContent"]["subject"] == "alice"


async def test_record_principal_puts_the_subject_on_spans() -> None:
    """enduser.id is recorded only with record_principal=True."""
    for record, expected in ((False, None), (True, "alice")):
        otel = Otel()
        app = host_authenticated(Ran(), otel, record_principal=record)
        await call(
            app,
            "tools/call",
            {"name": "whoami", "arguments": {}},
            headers={"x-user": "alice tools:read"},
        )
        attributes = dict(otel.span("tools/call whoami").attributes or {})
        assert attributes.get("enduser.id") == expected
        assert attributes["mcp_asgi.auth.outcome"] == "host"
        otel.shutdown()


async def test_the_fastapi_dependency_recipe() -> None:
    """docs/authorization.md: the app's FastAPI security dependency, called from an
    authentication backend, identifies the caller of a FastAPI app's endpoint."""
    from fastapi import FastAPI
    from fastapi.security import HTTPBearer
    from starlette.requests import Request

    keys = {"key-alice": ("alice", ["tools:read"])}
    bearer = HTTPBearer(auto_error=False)

    async def current_user(request: Request) -> tuple[str, list[str]] | None:
        credentials = await bearer(request)
        return keys.get(credentials.credentials) if credentials else None

    class DependencyBackend(AuthenticationBackend):
        async def authenticate(
            self, conn: HTTPConnection
        ) -> tuple[AuthCredentials, BaseUser] | None:
            user = await current_user(Request(conn.scope))
            return (AuthCredentials(user[1]), SimpleUser(user[0])) if user else None

    ran = Ran()
    app = FastAPI()
    app.add_middleware(
        McpMiddleware, server=protected_server(ran), settings=McpSettings(auth_host_identity=True)
    )
    app.add_middleware(AuthenticationMiddleware, backend=DependencyBackend())
    known = await call(
        app,
        "tools/call",
        {"name": "whoami", "arguments": {}},
        headers={"authorization": "Bearer key-alice"},
    )
    unknown = await call(
        app,
        "tools/call",
        {"name": "whoami", "arguments": {}},
        headers={"authorization": "Bearer key-mallory"},
    )
    assert known.result["structuredContent"]["subject"] == "alice"
    assert unknown.status == 401
    assert ran.calls == ["whoami"]
