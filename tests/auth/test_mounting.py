"""The endpoint mounted under a prefix: the outer app serves the Protected Resource
Metadata (ProtectedResourceMetadata); the CORS recipe: a preflight needs no token, and a
browser client can read WWW-Authenticate."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from fastapi import FastAPI
from starlette.applications import Starlette
from starlette.middleware.cors import CORSMiddleware
from starlette.routing import Mount

from mcp_asgi import McpMiddleware, McpSettings
from mcp_asgi.auth import ProtectedResourceMetadata
from mcp_asgi.testing import McpTestClient, serve

from .apps import Ran, protected_server
from .conftest import AuthEnv

ORIGIN = "https://app.example"


@pytest.fixture(scope="module")
def mounted(auth_env: AuthEnv) -> Iterator[tuple[str, str]]:
    """FastAPI with the MCP endpoint, mounted at /api of a Starlette app; the outer app
    serves the metadata and CORS (the documented recipe)."""
    server = protected_server(Ran())
    settings = McpSettings(
        auth_resource=auth_env.mounted_resource,
        auth_issuers=(auth_env.issuer,),
        allowed_origins=(ORIGIN,),
    )
    inner = FastAPI()
    inner.add_middleware(McpMiddleware, server=server, settings=settings)
    outer = Starlette(routes=[Mount("/api", inner)])
    outer.add_middleware(ProtectedResourceMetadata, server=server, settings=settings)
    outer.add_middleware(
        CORSMiddleware,
        allow_origins=[ORIGIN],
        allow_methods=["GET", "POST", "DELETE"],
        allow_headers=["*"],
        expose_headers=["WWW-Authenticate", "Mcp-Session-Id"],
    )
    with serve(outer, port=auth_env.mounted_port) as live:
        yield live.url, live.url + "/api/mcp"


async def test_metadata_on_the_outer_app(auth_env: AuthEnv, mounted: tuple[str, str]) -> None:
    """The path-inserted URI names the prefix; the root one is served too; the 401 points
    at the path-inserted one; a token for the prefixed resource works."""
    base, url = mounted
    async with httpx.AsyncClient() as http:
        inserted = await http.get(base + "/.well-known/oauth-protected-resource/api/mcp")
        root = await http.get(base + "/.well-known/oauth-protected-resource")
    assert inserted.status_code == root.status_code == 200
    assert inserted.json()["resource"] == auth_env.mounted_resource
    assert root.json() == inserted.json()
    async with McpTestClient(url) as client:
        refused = await client.request("tools/call", {"name": "whoami", "arguments": {}})
    assert refused.status == 401
    assert refused.headers["www-authenticate"] == (
        f'Bearer resource_metadata="{base}/.well-known/oauth-protected-resource/api/mcp"'
    )
    token = auth_env.server.token(auth_env.mounted_resource, "tools:read")
    async with McpTestClient(url, headers={"authorization": f"Bearer {token}"}) as client:
        result = await client.call_tool("whoami")
    assert result["structuredContent"]["aud"] == auth_env.mounted_resource


async def test_cors_preflight_needs_no_token(mounted: tuple[str, str]) -> None:
    """A browser's preflight is answered without a token; the 401 exposes WWW-Authenticate."""
    _, url = mounted
    async with httpx.AsyncClient() as http:
        preflight = await http.options(
            url,
            headers={
                "origin": ORIGIN,
                "access-control-request-method": "POST",
                "access-control-request-headers": "authorization, content-type",
            },
        )
        refused = await http.post(
            url,
            content=b"{}",
            headers={
                "origin": ORIGIN,
                "content-type": "application/json",
                "accept": "application/json",
            },
        )
    assert preflight.status_code == 200
    assert preflight.headers["access-control-allow-origin"] == ORIGIN
    assert refused.status_code == 401
    assert "www-authenticate" in refused.headers["access-control-expose-headers"].lower()
