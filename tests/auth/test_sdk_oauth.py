"""The official Python SDK client's OAuth flow (`mcp` 2.x) against the endpoint and a real
authorization server: discovery from the 401, a token by the client credentials grant, a
tool call; then the 403 challenge for a scope it cannot get."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx2
import pytest
from mcp import Client
from mcp.client.auth.extensions.client_credentials import ClientCredentialsOAuthProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from mcp_asgi.testing import serve

from ..servers import MODERN
from .apps import Ran, protected_app, protected_server
from .authserver import CLIENT_ID, CLIENT_SECRET, MemoryStorage
from .conftest import AuthEnv


@pytest.fixture(scope="module")
def sdk_live(auth_env: AuthEnv) -> Iterator[tuple[str, Ran]]:
    ran = Ran()
    app = protected_app(
        protected_server(ran),
        auth_resource=auth_env.sdk_resource,
        auth_issuers=[auth_env.issuer],
    )
    with serve(app, port=auth_env.sdk_port) as server:
        yield server.url + "/mcp", ran


async def test_sdk_client_credentials_flow(auth_env: AuthEnv, sdk_live: tuple[str, Ran]) -> None:
    """ClientCredentialsOAuthProvider finds the metadata from the 401, the authorization
    server from it, gets a token for this resource and calls a tool; a tool needing a scope
    the client cannot get answers 403 with the insufficient_scope challenge."""
    url, ran = sdk_live
    ran.calls.clear()
    seen: list[tuple[str, int, str | None]] = []

    async def record(response: httpx2.Response) -> None:
        seen.append(
            (
                str(response.request.url),
                response.status_code,
                response.headers.get("www-authenticate"),
            )
        )

    storage = MemoryStorage()
    provider = ClientCredentialsOAuthProvider(
        server_url=url,
        storage=storage,
        client_id=CLIENT_ID,
        client_secret=CLIENT_SECRET,
        scope="tools:read notes",
        issuer=auth_env.issuer,
    )
    http = httpx2.AsyncClient(auth=provider, event_hooks={"response": [record]}, timeout=10)
    async with (
        http,
        Client(streamable_http_client(url, http_client=http), mode=MODERN, cache=None) as client,
    ):
        result = await client.call_tool("whoami", {})
        assert not result.is_error
        structured: Any = result.structured_content
        assert structured["subject"] == "agent"
        assert structured["aud"] == auth_env.sdk_resource
        assert storage.tokens is not None
        metadata = f"http://127.0.0.1:{auth_env.sdk_port}/.well-known/oauth-protected-resource/mcp"
        # discovery: the 401's resource_metadata, then the issuer's metadata, then a token
        assert seen[0][1:] == (401, f'Bearer resource_metadata="{metadata}"')
        assert (seen[1][0], seen[1][1]) == (metadata, 200)
        assert any(u == auth_env.issuer + "/token" and s == 200 for u, s, _ in seen)
        seen.clear()
        with pytest.raises(MCPError, match=r"insufficient scope \(billing\)"):
            await client.call_tool("bill", {})  # the step-up the SDK tries cannot get billing
    refused = [s for s in seen if s[1] == 403]
    assert refused
    assert refused[0][2] == (
        f'Bearer error="insufficient_scope", scope="billing", resource_metadata="{metadata}", '
        'error_description="This operation needs the scopes: billing"'
    )
    assert ran.calls == ["whoami"]
