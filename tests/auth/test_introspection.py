"""Opaque access tokens through the authorization server's RFC 7662 introspection."""

from __future__ import annotations

import secrets
from collections.abc import Iterator, Mapping
from typing import Any

import httpx
import pytest

from mcp_asgi.auth.discovery import HttpJson
from mcp_asgi.testing import McpTestClient, serve

from .apps import Ran, protected_app, protected_server
from .authserver import SERVER_CLIENT_ID, SERVER_CLIENT_SECRET
from .conftest import AuthEnv


@pytest.fixture(scope="module")
def opaque_live(auth_env: AuthEnv) -> Iterator[tuple[str, Ran]]:
    ran = Ran()
    app = protected_app(
        protected_server(ran),
        auth_resource=auth_env.opaque_resource,
        auth_issuers=[auth_env.issuer],
        auth_verification="introspection",
        auth_client_id=SERVER_CLIENT_ID,
        auth_client_secret=SERVER_CLIENT_SECRET,
    )
    with serve(app, port=auth_env.opaque_port) as server:
        yield server.url + "/mcp", ran


def client(url: str, token: str) -> McpTestClient:
    return McpTestClient(url, headers={"authorization": f"Bearer {token}"})


@pytest.fixture
def asked(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The URLs of the introspection requests the endpoint makes, counted on our side."""
    asked: list[str] = []
    original = HttpJson.post_form

    async def counting(
        http: HttpJson, url: str, form: Mapping[str, str], **options: Any
    ) -> dict[str, Any]:
        asked.append(url)
        return await original(http, url, form, **options)

    monkeypatch.setattr(HttpJson, "post_form", counting)
    return asked


async def test_opaque_token_is_introspected_and_cached(
    auth_env: AuthEnv, opaque_live: tuple[str, Ran], asked: list[str]
) -> None:
    """An opaque token issued for this resource works; its positive answer is cached (one
    introspection for two calls), and ctx.principal comes from the answer."""
    url, _ = opaque_live
    token = auth_env.server.token(auth_env.opaque_resource, "tools:read notes")
    assert token.count(".") == 0  # opaque, not a JWT
    async with client(url, token) as mcp:
        first = await mcp.call_tool("whoami")
        second = await mcp.call_tool("whoami")
    assert first["structuredContent"]["client_id"] == "agent"
    assert first["structuredContent"]["scopes"] == ["notes", "tools:read"]
    assert first["structuredContent"]["aud"] == auth_env.opaque_resource
    assert second == first
    assert asked == [auth_env.issuer + "/token/introspection"]


@pytest.mark.parametrize("case", ["unknown token", "for another resource", "a JWT"])
async def test_refused_opaque_tokens(
    auth_env: AuthEnv, opaque_live: tuple[str, Ran], case: str
) -> None:
    """An inactive token, one the server will not introspect, or an active one for another
    resource: 401 invalid_token."""
    url, ran = opaque_live
    ran.calls.clear()
    if case == "unknown token":
        token, reason = "not-a-token-the-server-issued", "inactive"
    elif case == "a JWT":  # oidc-provider does not introspect its JWT access tokens (400)
        token, reason = auth_env.server.token(auth_env.jwt_resource, "tools:read"), "inactive"
    else:
        token = auth_env.server.token(auth_env.opaque_elsewhere, "tools:read")
        reason = "wrong_audience"
    async with client(url, token) as mcp:
        response = await mcp.request("tools/call", {"name": "whoami", "arguments": {}})
    assert response.status == 401
    assert response.final["error"]["data"] == {"reason": reason}
    assert 'error="invalid_token"' in response.headers["www-authenticate"]
    assert ran.calls == []


class CountedClients:
    """Every httpx.AsyncClient made while the test runs."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.made: list[httpx.AsyncClient] = []
        made = self.made

        class Counted(httpx.AsyncClient):
            def __init__(self, **options: Any) -> None:
                super().__init__(**options)
                made.append(self)

        monkeypatch.setattr(httpx, "AsyncClient", Counted)


async def test_bad_tokens_are_rate_limited_before_introspection(
    auth_env: AuthEnv, asked: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """One client sending bad tokens: a token sent again is introspected once (its refusal
    is cached); past auth_failure_burst refusals every further request is 429 with
    Retry-After before anything is introspected; a valid token spends nothing. Every
    introspection goes through one HTTP client, closed at the app's shutdown."""
    clients = CountedClients(monkeypatch)
    app = protected_app(
        protected_server(Ran()),
        auth_resource=auth_env.opaque_resource,
        auth_issuers=[auth_env.issuer],
        auth_verification="introspection",
        auth_client_id=SERVER_CLIENT_ID,
        auth_client_secret=SERVER_CLIENT_SECRET,
        auth_failure_burst=5,
        auth_failure_rate=0.1,
    )
    good = auth_env.server.token(auth_env.opaque_resource, "tools:read")
    statuses: list[int] = []
    with serve(app) as server:
        url = server.url + "/mcp"
        async with client(url, good) as mcp:
            for _ in range(8):  # valid tokens never use the budget up
                await mcp.call_tool("whoami")
        for token in ["the-same-bad-token"] * 3 + [secrets.token_urlsafe(24) for _ in range(12)]:
            async with client(url, token) as mcp:
                response = await mcp.request("tools/call", {"name": "whoami", "arguments": {}})
            statuses.append(response.status)
            if response.status == 429:
                assert response.final["error"]["data"]["limit"] == "auth_failure_rate"
                assert int(response.headers["retry-after"]) >= 1
        assert len(clients.made) == 1  # one client for everything
    assert statuses[:5] == [401] * 5
    assert statuses[5:] == [429] * 10
    # the good token once, the repeated bad one once, two random ones: then nothing more
    assert len(asked) == 4
    assert clients.made[0].is_closed
