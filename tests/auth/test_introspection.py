"""Opaque access tokens through the authorization server's RFC 7662 introspection."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import pytest

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


async def test_opaque_token_is_introspected_and_cached(
    auth_env: AuthEnv, opaque_live: tuple[str, Ran], monkeypatch: pytest.MonkeyPatch
) -> None:
    """An opaque token issued for this resource works; its positive answer is cached (one
    introspection for two calls), and ctx.principal comes from the answer."""
    from mcp_asgi.auth import discovery

    asked: list[str] = []
    original = discovery.post_form

    async def counting(url: str, form: Mapping[str, str], **options: Any) -> dict[str, Any]:
        asked.append(url)
        return await original(url, form, **options)

    monkeypatch.setattr("mcp_asgi.auth.introspection.post_form", counting)
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
