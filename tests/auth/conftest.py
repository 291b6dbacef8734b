"""The authorization tests' fixtures: one oidc-provider for the session, and the ports of
the MCP servers it issues tokens for (a resource URL names its port, so the ports are
chosen before the authorization server starts)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from mcp_asgi.testing import McpTestClient, serve

from ..helpers import Otel
from .apps import Ran, protected_app, protected_server
from .authserver import AuthServer, free_port, run_authserver


@dataclass(frozen=True)
class AuthEnv:
    """The authorization server, and the resource URL of each MCP server the tests run."""

    server: AuthServer
    jwt_port: int
    opaque_port: int
    mounted_port: int
    sdk_port: int

    @property
    def issuer(self) -> str:
        return self.server.issuer

    @property
    def jwt_resource(self) -> str:
        return f"http://127.0.0.1:{self.jwt_port}/mcp"

    @property
    def opaque_resource(self) -> str:
        return f"http://127.0.0.1:{self.opaque_port}/mcp"

    @property
    def opaque_elsewhere(self) -> str:
        """Another resource whose tokens are opaque."""
        return f"http://127.0.0.1:{self.opaque_port}/elsewhere"

    @property
    def mounted_resource(self) -> str:
        return f"http://127.0.0.1:{self.mounted_port}/api/mcp"

    @property
    def sdk_resource(self) -> str:
        return f"http://127.0.0.1:{self.sdk_port}/mcp"


@pytest.fixture(scope="session")
def auth_env() -> Iterator[AuthEnv]:
    ports = [free_port() for _ in range(4)]
    env = AuthEnv(None, *ports)  # type: ignore[arg-type]
    resources = {
        env.jwt_resource: "jwt",
        env.opaque_resource: "opaque",
        env.opaque_elsewhere: "opaque",
        env.mounted_resource: "jwt",
        env.sdk_resource: "jwt",
    }
    with run_authserver(resources) as server:
        yield AuthEnv(server, *ports)


@dataclass
class Live:
    """The protected server on a live uvicorn (JWT verification), its handlers' record and
    telemetry."""

    url: str
    env: AuthEnv
    ran: Ran
    otel: Otel

    @property
    def metadata_url(self) -> str:
        return f"http://127.0.0.1:{self.env.jwt_port}/.well-known/oauth-protected-resource/mcp"

    def client(self, token: str | None = None, **options: Any) -> McpTestClient:
        headers = {"authorization": f"Bearer {token}"} if token is not None else {}
        return McpTestClient(self.url, headers=headers, **options)

    def token(self, scope: str = "tools:read notes", **client: str) -> str:
        return self.env.server.token(self.env.jwt_resource, scope, **client)


@pytest.fixture(scope="module")
def live(auth_env: AuthEnv) -> Iterator[Live]:
    ran, otel = Ran(), Otel()
    app = protected_app(
        protected_server(ran),
        otel,
        auth_resource=auth_env.jwt_resource,
        auth_issuers=[auth_env.issuer],
        auth_jwks_min_refetch=60,
        auth_failure_rate=None,  # the battery's refusals all come from 127.0.0.1
        request_state_key="k" * 32,
    )
    with serve(app, port=auth_env.jwt_port) as server:
        yield Live(server.url + "/mcp", auth_env, ran, otel)
    otel.shutdown()


@pytest.fixture
def ran(live: Live) -> Ran:
    live.ran.calls.clear()
    return live.ran
