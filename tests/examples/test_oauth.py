"""examples/oauth on uvicorn, against a real authorization server (oidc-provider, standing
in for Keycloak, Entra or Auth0), driven by the official MCP Python SDK client: it finds the
issuer from the endpoint's metadata, gets a token by the client-credentials grant and calls
the tools its scopes allow; a request without a token gets the 401 challenge; the app
refuses to start without its authorization settings."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import Client
from mcp.client.auth.extensions.client_credentials import ClientCredentialsOAuthProvider
from mcp.client.streamable_http import streamable_http_client

from examples.oauth.main import create_app
from mcp_asgi import McpSettings
from mcp_asgi.testing import McpTestClient, serve

from ..auth.authserver import CLIENT_ID, CLIENT_SECRET, MemoryStorage, free_port, run_authserver
from ..servers import MODERN, ROOT


@pytest.fixture(scope="module")
def live() -> Iterator[tuple[str, str]]:
    """The example's MCP URL, and the issuer it trusts."""
    port = free_port()
    resource = f"http://127.0.0.1:{port}/mcp"
    with run_authserver({resource: "jwt"}) as auth:
        settings = McpSettings(auth_resource=resource, auth_issuers=(auth.issuer,))
        with serve(create_app(settings), port=port) as server:
            yield server.url + "/mcp", auth.issuer


async def test_the_sdk_client_gets_a_token_and_calls_the_tools(live: tuple[str, str]) -> None:
    url, issuer = live
    provider = ClientCredentialsOAuthProvider(
        server_url=url,
        storage=MemoryStorage(),
        client_id=CLIENT_ID,
        client_secret=CLIENT_SECRET,
        scope="notes notes:write",
        issuer=issuer,  # client credentials go to this authorization server only
    )
    async with (
        httpx2.AsyncClient(auth=provider, timeout=10) as http,
        Client(streamable_http_client(url, http_client=http), mode=MODERN) as client,
    ):
        caller = await client.call_tool("whoami", {})
        added = await client.call_tool("add_note", {"text": "hello"})
        notes = await client.call_tool("list_notes", {})
    structured: Any = caller.structured_content
    assert structured == {
        "subject": CLIENT_ID,
        "client_id": CLIENT_ID,
        "scopes": ["notes", "notes:write"],
    }
    assert added.structured_content == {"result": 1}
    assert notes.structured_content == {"result": [f"hello (by {CLIENT_ID})"]}


async def test_no_token_gets_the_challenge(live: tuple[str, str]) -> None:
    response = await McpTestClient(live[0]).request("tools/list")
    assert response.status == 401
    assert "resource_metadata=" in response.headers["www-authenticate"]


def test_without_authorization_settings_uvicorn_exits() -> None:
    """Run as the example says (`--lifespan on`) with no `MCP_AUTH_*` in the environment:
    uvicorn exits at startup, and the error says which settings to set."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCP_")}
    argv = [str(Path(sys.executable).parent / "uvicorn"), "--factory", "--lifespan", "on"]
    argv += ["examples.oauth.main:create_app", "--host", "127.0.0.1", "--port", "0"]
    ran = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=30)
    assert ran.returncode == 3, ran.stderr
    assert "declares scopes (notes, notes:write" in ran.stderr
    assert "set McpSettings.auth_resource and auth_issuers" in ran.stderr
