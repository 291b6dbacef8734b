"""The pieces, in process: the scope hierarchy, the settings' refusals, a custom
TokenVerifier, and the body left unread for an unauthenticated request."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from mcp_asgi import InvalidToken, McpMiddleware, McpSettings, Principal, TokenVerifier
from mcp_asgi.auth.principal import missing_scopes, scope_covers

from ..helpers import Wire, call, host_app, mcp_body, mcp_headers
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
