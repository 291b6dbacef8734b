"""The pieces, in process: the scope hierarchy, the settings' refusals, a custom
TokenVerifier, and the body left unread for an unauthenticated request."""

from __future__ import annotations

import re

import anyio
import pytest
from pydantic import ValidationError

from mcp_asgi import McpMiddleware, McpServer, McpSettings
from mcp_asgi.auth import InvalidToken, Principal, TokenVerifier
from mcp_asgi.auth.principal import missing_scopes, scope_covers

from ..helpers import Lifespan, Wire, call, host_app, mcp_body, mcp_headers
from .apps import Ran, protected_server

RESOURCE = "https://mcp.example.com/mcp"
ISSUER = "https://id.example.com"


@pytest.mark.parametrize(
    ("granted", "required", "covers"),
    [
        ("files", "files", True),
        ("files", "files:read", True),
        ("files", "files:read:all", True),
        ("files:read", "files", False),
        ("files:read", "files:write", False),
        ("files", "filesystem", False),
        ("tools:read", "tools", False),
    ],
)
def test_scope_hierarchy(granted: str, required: str, covers: bool) -> None:
    """A granted scope covers itself and what extends it after a colon; nothing else."""
    assert scope_covers(granted, required) is covers


def test_missing_scopes_keeps_order() -> None:
    assert missing_scopes({"a", "b:c"}, ["a:x", "b", "c", "b:c:d"]) == ["b", "c"]


@pytest.mark.parametrize("algorithms", [("HS256",), ("none",), ("RS256", "HS512"), ()])
def test_symmetric_and_none_algorithms_are_refused(algorithms: tuple[str, ...]) -> None:
    with pytest.raises(ValidationError, match="public-key"):
        McpSettings(auth_algorithms=algorithms)


def test_a_resource_needs_an_issuer_and_an_absolute_url(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ValidationError, match="auth_issuers"):
        McpSettings(auth_resource=RESOURCE)
    with pytest.raises(ValidationError, match="absolute"):
        McpSettings(auth_resource="/mcp", auth_issuers=(ISSUER,))
    monkeypatch.setenv("MCP_AUTH_RESOURCE", RESOURCE)
    monkeypatch.setenv("MCP_AUTH_ISSUERS", f'["{ISSUER}"]')
    monkeypatch.setenv("MCP_AUTH_REQUIRED_SCOPES", '["mcp"]')
    monkeypatch.setenv("MCP_AUTH_VERIFICATION", "introspection")
    settings = McpSettings()
    assert (settings.auth_resource, settings.auth_issuers) == (RESOURCE, (ISSUER,))
    assert settings.auth_required_scopes == ("mcp",)
    assert settings.auth_verification == "introspection"


BEARER = {"auth_resource": RESOURCE, "auth_issuers": (ISSUER,)}


@pytest.mark.parametrize(
    ("settings", "named"),
    [
        ({"auth_issuers": (ISSUER,)}, "auth_issuers set, but authorization is off"),
        ({"auth_required_scopes": ("mcp",)}, "auth_required_scopes set, but authorization is off"),
        ({"auth_verification": "introspection"}, "auth_verification set, but authorization"),
        ({"auth_introspection_url": ISSUER + "/i"}, "auth_introspection_url set, but author"),
        ({"auth_client_id": "c", "auth_audience": "api://x"}, "auth_audience, auth_client_id set"),
        ({"auth_host_identity": True, "auth_issuers": (ISSUER,)}, "auth_issuers set, but they"),
        ({"auth_host_identity": True, "auth_token_types": ("JWT",)}, "need auth_resource"),
        ({**BEARER, "auth_client_id": "c"}, "auth_client_id set, but they do nothing with"),
        ({**BEARER, "auth_cache_ttl": 5.0}, "auth_cache_ttl set, but they do nothing with"),
        (
            {**BEARER, "auth_verification": "introspection", "auth_jwks_url": ISSUER + "/k"},
            "auth_jwks_url set, but they do nothing with auth_verification='introspection'",
        ),
        (
            {**BEARER, "auth_verification": "introspection", "auth_client_secret": "s"},
            "auth_client_secret needs auth_client_id",
        ),
        ({"auth_resource": RESOURCE, "auth_required_scopes": ("mcp",)}, "auth_issuers"),
    ],
)
def test_auth_settings_that_would_do_nothing_are_refused(
    settings: dict[str, object], named: str
) -> None:
    """No auth setting is silently ignored: each is refused, named, with what to do."""
    with pytest.raises(ValidationError, match=re.escape(named)):
        McpSettings(**settings)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "settings",
    [
        {},
        {"auth_host_identity": True, "auth_required_scopes": ("mcp",)},
        {**BEARER, "auth_host_identity": True, "auth_required_scopes": ("mcp",)},
        {**BEARER, "auth_verification": "introspection", "auth_client_id": "c"},
        {**BEARER, "auth_verification": "introspection"},
        {**BEARER, "auth_audience": "api://x", "auth_token_types": ("at+jwt", "JWT")},
    ],
)
def test_auth_settings_that_are_allowed(settings: dict[str, object]) -> None:
    McpSettings(**settings)  # type: ignore[arg-type]


def test_declared_scopes_need_authorization() -> None:
    """A server whose default_scopes or tools' scopes nobody would check (authorization
    off) is refused when the middleware is built, naming the scopes and what to set."""
    with pytest.raises(ValueError, match=r"'protected' declares scopes \(admin, billing, "):
        McpMiddleware(host_app(), server=protected_server(Ran()), settings=McpSettings())
    only_tools = McpServer("tools")

    @only_tools.tool(scopes=["admin"])
    async def purge() -> str:
        return "purged"

    with pytest.raises(ValueError, match=r"\(admin: .*auth_resource and auth_issuers"):
        McpMiddleware(host_app(), server=only_tools, settings=McpSettings())
    McpMiddleware(host_app(), server=McpServer("open"), settings=McpSettings())
    McpMiddleware(host_app(), server=only_tools, settings=McpSettings(auth_host_identity=True))


async def test_scopes_declared_after_construction_fail_the_startup(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A tool with scopes registered after the middleware was built, authorization off:
    the lifespan startup fails, saying why."""
    server = McpServer("late")
    app = McpMiddleware(host_app(), server=server, settings=McpSettings())

    @server.tool(scopes=["admin"])
    async def purge() -> str:
        return "purged"

    life = Lifespan()
    with anyio.fail_after(5):
        await app({"type": "lifespan", "asgi": {"version": "3.0"}}, life.receive, life.send)
    assert life.sent == ["lifespan.startup.failed"]
    assert "'late' declares scopes (admin" in caplog.text


def test_a_custom_verifier_with_the_built_in_verifiers_settings_is_refused() -> None:
    """token_verifier= replaces what auth_verification, auth_audience, ... configure."""
    settings = McpSettings(**BEARER, auth_audience="api://x")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="auth_audience set, but a token_verifier is given"):
        McpMiddleware(
            host_app(),
            server=protected_server(Ran()),
            settings=settings,
            token_verifier=StaticVerifier(),
        )


class StaticVerifier:
    """A custom TokenVerifier: one known token."""

    async def verify(self, token: str) -> Principal:
        if token != "let-me-in":
            raise InvalidToken("unknown", "Not a token of ours")
        return Principal(
            "carol", frozenset({"tools:read", "mcp"}), {"sub": "carol"}, "app-1", ISSUER
        )


def app(ran: Ran) -> McpMiddleware:
    settings = McpSettings(
        auth_resource=RESOURCE, auth_issuers=(ISSUER,), auth_required_scopes=("mcp",)
    )
    return McpMiddleware(
        host_app(), server=protected_server(ran), settings=settings, token_verifier=StaticVerifier()
    )


async def test_a_custom_token_verifier() -> None:
    """token_verifier= replaces the JWT/introspection verifier; the endpoint's required
    scopes are checked after it, and named in every challenge."""
    assert isinstance(StaticVerifier(), TokenVerifier)
    ran = Ran()
    mcp = app(ran)
    served = await call(
        mcp,
        "tools/call",
        {"name": "whoami", "arguments": {}},
        headers={"authorization": "Bearer let-me-in"},
    )
    refused = await call(
        mcp,
        "tools/call",
        {"name": "whoami", "arguments": {}},
        headers={"authorization": "Bearer nope"},
    )
    anonymous = await call(mcp, "tools/list")
    assert served.result["structuredContent"]["subject"] == "carol"
    assert refused.status == 401
    assert refused.error["data"] == {"reason": "unknown"}
    metadata = "https://mcp.example.com/.well-known/oauth-protected-resource/mcp"
    assert refused.headers["www-authenticate"] == (
        f'Bearer resource_metadata="{metadata}", scope="mcp", error="invalid_token", '
        'error_description="Not a token of ours"'
    )
    assert (
        anonymous.headers["www-authenticate"]
        == f'Bearer resource_metadata="{metadata}", scope="mcp"'
    )
    assert ran.calls == ["whoami"]


async def test_an_unauthenticated_request_is_refused_before_its_body_is_read() -> None:
    """The 401 comes before the body is read (a body over max_body_bytes is not 413)."""
    body = mcp_body("tools/list")
    wire = Wire([b"x" * 1024] * 8000, mcp_headers(body), leave_when_done=True)
    await wire.run(app(Ran()))
    assert wire.status == 401


async def test_metadata_answers_head_and_preflight() -> None:
    """HEAD has the GET's headers and no body; OPTIONS is a CORS preflight (no token)."""
    mcp = app(Ran())
    path = "/.well-known/oauth-protected-resource/mcp"
    head = Wire(headers={}, method="HEAD", path=path, leave_when_done=True)
    await head.run(mcp)
    options = Wire(
        headers={"origin": "https://app.example"}, method="OPTIONS", path=path, leave_when_done=True
    )
    await options.run(mcp)
    post = Wire(headers={}, method="POST", path=path, leave_when_done=True)
    await post.run(mcp)
    assert (head.status, head.body, head.headers["content-type"]) == (200, b"", "application/json")
    assert (options.status, options.headers["access-control-allow-origin"]) == (204, "*")
    assert post.status == 405
