"""`auth_failure_rate` with concurrent requests from one address: valid tokens never spend
the budget (however many are being verified at once), refused ones do, and the tokens of one
address being verified at once stay within what its budget has left."""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from typing import Any

import anyio
import pytest

from mcp_asgi import McpMiddleware, McpSettings
from mcp_asgi.auth import Principal
from mcp_asgi.auth.jwt import JwtVerifier
from mcp_asgi.testing import McpTestClient, serve

from ..helpers import host_app
from .apps import Ran, protected_app, protected_server
from .authserver import SERVER_CLIENT_ID, SERVER_CLIENT_SECRET
from .conftest import AuthEnv

BURST = 5
N = 3 * BURST


class Arrivals:
    """An ASGI wrapper counting the HTTP requests that reached the app, until `expected`."""

    def __init__(self, expected: int) -> None:
        self.app: Any = None
        self.expected = expected
        self.count = 0
        self._all_in: anyio.Event | None = None

    def all_in(self) -> anyio.Event:
        """Set once `expected` requests have arrived (made on the server's loop)."""
        if self._all_in is None:
            self._all_in = anyio.Event()
        return self._all_in

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            self.count += 1
            if self.count >= self.expected:
                self.all_in().set()
        await self.app(scope, receive, send)


class Held:
    """A TokenVerifier around the real `JwtVerifier`: every verification waits until all
    the expected requests have reached the app (so they all overlap, whatever the
    scheduling), and the most verifications in progress at once is recorded."""

    def __init__(self, inner: JwtVerifier, arrivals: Arrivals) -> None:
        self.inner = inner
        self.arrivals = arrivals
        self.calls = 0
        self.in_flight = 0
        self.most = 0

    async def verify(self, token: str) -> Principal:
        self.calls += 1
        self.in_flight += 1
        self.most = max(self.most, self.in_flight)
        try:
            await self.arrivals.all_in().wait()
            return await self.inner.verify(token)
        finally:
            self.in_flight -= 1


def held_app(auth_env: AuthEnv, expected: int) -> tuple[Arrivals, Held]:
    settings = McpSettings(
        auth_resource=auth_env.jwt_resource,
        auth_issuers=(auth_env.issuer,),
        auth_failure_burst=BURST,
        auth_failure_rate=0.01,
    )
    inner = JwtVerifier(issuers=[auth_env.issuer], audiences=[auth_env.jwt_resource])
    arrivals = Arrivals(expected)
    held = Held(inner, arrivals)
    arrivals.app = McpMiddleware(
        host_app(), server=protected_server(Ran()), settings=settings, token_verifier=held
    )
    return arrivals, held


async def statuses(url: str, tokens: Sequence[str]) -> list[int]:
    """Each token in its own request, all at once; the statuses in the tokens' order."""
    found = [0] * len(tokens)

    async def one(i: int, token: str) -> None:
        async with McpTestClient(url, headers={"authorization": f"Bearer {token}"}) as mcp:
            response = await mcp.request("tools/call", {"name": "whoami", "arguments": {}})
        found[i] = response.status
        if response.status == 429:
            assert response.final["error"]["data"]["limit"] == "auth_failure_rate"

    async with anyio.create_task_group() as group:
        for i, token in enumerate(tokens):
            group.start_soon(one, i, token)
    return found


@pytest.mark.parametrize("verification", ["jwt", "introspection"])
async def test_one_valid_token_in_many_concurrent_requests_at_cold_start(
    auth_env: AuthEnv, verification: str
) -> None:
    """The built-in verifiers, nothing fetched or cached yet (the issuer's metadata, its
    JWKS, the introspection answer): 3 x auth_failure_burst requests with one valid token
    at once are all served (none was refused, nothing is spent)."""
    settings: dict[str, Any] = {}
    if verification == "jwt":
        resource, port = auth_env.jwt_resource, auth_env.jwt_port
    else:
        resource, port = auth_env.opaque_resource, auth_env.opaque_port
        settings = {
            "auth_verification": "introspection",
            "auth_client_id": SERVER_CLIENT_ID,
            "auth_client_secret": SERVER_CLIENT_SECRET,
        }
    app = protected_app(
        protected_server(Ran()),
        auth_resource=resource,
        auth_issuers=[auth_env.issuer],
        auth_failure_burst=BURST,
        auth_failure_rate=0.01,
        **settings,
    )
    token = auth_env.server.token(resource, "tools:read")
    with serve(app, port=port) as server:
        assert await statuses(server.url + "/mcp", [token] * N) == [200] * N


async def test_concurrent_requests_with_one_token_share_its_verification(
    auth_env: AuthEnv,
) -> None:
    """All the requests overlap (held until every one has arrived): every one is served,
    and the token is verified once for them all."""
    arrivals, held = held_app(auth_env, N)
    token = auth_env.server.token(auth_env.jwt_resource, "tools:read")
    with serve(arrivals, port=auth_env.jwt_port) as server:
        assert await statuses(server.url + "/mcp", [token] * N) == [200] * N
    assert held.calls == 1


async def test_many_valid_tokens_of_one_address_wait_for_their_turn(auth_env: AuthEnv) -> None:
    """3 x auth_failure_burst different valid tokens at once (many users behind one NAT): all
    served, at most auth_failure_burst of them being verified at a time."""
    arrivals, held = held_app(auth_env, N)
    tokens = [auth_env.server.token(auth_env.jwt_resource, "tools:read") for _ in range(N)]
    assert len(set(tokens)) == N
    with serve(arrivals, port=auth_env.jwt_port) as server:
        assert await statuses(server.url + "/mcp", tokens) == [200] * N
    assert held.calls == N
    assert held.most <= BURST


@pytest.mark.parametrize("concurrent", [True, False])
async def test_bad_tokens_spend_the_budget(auth_env: AuthEnv, concurrent: bool) -> None:
    """3 x auth_failure_burst bad tokens from one address, at once or one after another:
    auth_failure_burst are verified and refused (401, never more at once), the others get
    429 unverified, and so does a valid token after them."""
    arrivals, held = held_app(auth_env, N if concurrent else 0)
    bad = [secrets.token_urlsafe(24) for _ in range(N)]
    good = auth_env.server.token(auth_env.jwt_resource, "tools:read")
    with serve(arrivals, port=auth_env.jwt_port) as server:
        url = server.url + "/mcp"
        if concurrent:
            found = await statuses(url, bad)
        else:
            found = [(await statuses(url, [token]))[0] for token in bad]
        after = await statuses(url, [good])
    assert sorted(found) == [401] * BURST + [429] * (N - BURST)
    assert held.calls == BURST
    assert held.most <= BURST
    assert after == [429]
