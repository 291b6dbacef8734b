"""The endpoint as an OAuth 2.1 resource server, end to end: a live uvicorn, JWT access
tokens from a real authorization server (oidc-provider), and the negative battery."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import logging
import time
from typing import Any

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from pydantic import ValidationError

from mcp_asgi import McpSettings
from mcp_asgi.auth import InvalidToken
from mcp_asgi.auth.discovery import HttpJson
from mcp_asgi.auth.jwt import JwtVerifier
from mcp_asgi.testing import McpTestClient

from .apps import Ran
from .authserver import rsa_key
from .conftest import Live

FAILURES = "mcp_asgi.auth.failures"


def challenge(response: Any) -> str:
    value: str = response.headers["www-authenticate"]
    return value


async def test_protected_resource_metadata(live: Live) -> None:
    """RFC 9728 at the path-inserted and the root well-known URIs; the host's routes are
    untouched."""
    async with httpx.AsyncClient() as http:
        inserted = await http.get(live.metadata_url)
        root = await http.get(
            f"http://127.0.0.1:{live.env.jwt_port}/.well-known/oauth-protected-resource"
        )
        other = await http.get(f"http://127.0.0.1:{live.env.jwt_port}/.well-known/other")
        home = await http.get(f"http://127.0.0.1:{live.env.jwt_port}/")
    assert inserted.status_code == root.status_code == 200
    assert (
        inserted.json()
        == root.json()
        == {
            "resource": live.env.jwt_resource,
            "authorization_servers": [live.env.issuer],
            "scopes_supported": ["admin", "billing", "notes", "notes:write", "tools:read"],
            "bearer_methods_supported": ["header"],
            "resource_name": "protected",
        }
    )
    assert inserted.headers["access-control-allow-origin"] == "*"
    assert (other.status_code, other.text) == (404, "host app")
    assert home.text == "home"


async def test_no_token_is_401_with_the_challenge(live: Live, ran: Ran) -> None:
    """No token: 401, `Bearer resource_metadata=..., ` and no `error` (none was sent)."""
    async with live.client() as client:
        response = await client.request("tools/call", {"name": "whoami", "arguments": {}})
    assert response.status == 401
    assert challenge(response) == f'Bearer resource_metadata="{live.metadata_url}"'
    error = response.final["error"]
    assert error["code"] == -32600
    assert error["data"] == {"reason": "missing_token"}
    assert response.final["id"] is None  # the body was never read
    assert ran.calls == []


async def test_a_token_from_the_authorization_server_is_accepted(live: Live, ran: Ran) -> None:
    """A JWT access token issued for this resource: ctx.principal has its subject, scopes,
    claims and client id."""
    async with live.client(live.token()) as client:
        result = await client.call_tool("whoami")
    assert result["structuredContent"] == {
        "subject": "agent",
        "scopes": ["notes", "tools:read"],
        "client_id": "agent",
        "issuer": live.env.issuer,
        "source": "bearer",
        "aud": live.env.jwt_resource,
    }
    assert ran.calls == ["whoami"]


async def test_lists_show_what_the_principal_may_call(live: Live) -> None:
    """tools/list, resources/templates/list, prompts/list: only what the scopes allow;
    cacheScope is private since lists depend on who asks."""
    async with live.client(live.token("tools:read notes")) as client:
        tools = (await client.request("tools/list")).final["result"]
        templates = (await client.request("resources/templates/list")).final["result"]
        resources = (await client.request("resources/list")).final["result"]
        prompts = (await client.request("prompts/list")).final["result"]
    assert [t["name"] for t in tools["tools"]] == ["whoami", "write_note", "public", "ask"]
    assert tools["cacheScope"] == "private"
    assert [t["uriTemplate"] for t in templates["resourceTemplates"]] == ["notes://{note_id}"]
    assert resources["resources"] == []  # secret://vault needs admin
    assert [p["name"] for p in prompts["prompts"]] == ["summarize"]
    async with live.client(live.token("tools:read admin")) as client:
        tools = (await client.request("tools/list")).final["result"]
    assert [t["name"] for t in tools["tools"]] == ["whoami", "purge", "secured", "public", "ask"]


async def test_missing_scope_is_403_insufficient_scope(live: Live, ran: Ran) -> None:
    """A tool needing a scope the token lacks: 403 with every scope it needs."""
    async with live.client(live.token("tools:read")) as client:
        response = await client.request("tools/call", {"name": "purge", "arguments": {}})
        read = await client.request("resources/read", {"uri": "notes://1"})
        prompt = await client.request(
            "prompts/get", {"name": "summarize", "arguments": {"topic": "x"}}
        )
    assert response.status == 403
    assert challenge(response) == (
        'Bearer error="insufficient_scope", scope="admin", '
        f'resource_metadata="{live.metadata_url}", '
        'error_description="This operation needs the scopes: admin"'
    )
    assert response.final["error"]["code"] == -32600
    assert response.final["error"]["data"] == {"reason": "insufficient_scope", "scopes": ["admin"]}
    assert response.final["id"] is not None
    assert read.status == prompt.status == 403
    assert 'scope="notes"' in challenge(read)
    assert ran.calls == []


async def test_scope_hierarchy(live: Live, ran: Ran) -> None:
    """`notes` covers `notes:write` (a colon extends a scope); `tools:read` does not cover
    `tools`, nor does `notes:write` cover `notes`."""
    async with live.client(live.token("notes")) as client:
        result = await client.call_tool("write_note", {"text": "hi"})
        whoami = await client.request("tools/call", {"name": "whoami", "arguments": {}})
        public = await client.call_tool("public")
    assert result["content"][0]["text"] == "wrote hi"
    assert whoami.status == 403  # the default scope tools:read
    assert public["content"][0]["text"] == "public"
    assert ran.calls == ["write_note", "public"]


async def test_subscriptions_only_to_readable_uris(live: Live) -> None:
    """subscriptions/listen with a resource URI the principal may not read: 403."""
    params = {"notifications": {"resourceSubscriptions": ["secret://vault"]}}
    async with live.client(live.token("tools:read notes")) as client:
        response = await client.request("subscriptions/listen", params)
    assert response.status == 403
    assert 'scope="admin"' in challenge(response)


def _hs256_with_public_key(live: Live, claims: dict[str, Any]) -> str:
    """The classic confusion attack: HMAC-SHA256 keyed with the issuer's public key."""
    public = live.env.server.key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )

    def b64(data: bytes) -> str:
        return base64.urlsafe_b64encode(data).rstrip(b"=").decode()

    head = b64(json.dumps({"alg": "HS256", "typ": "at+jwt", "kid": live.env.server.kid}).encode())
    body = b64(json.dumps(claims).encode())
    signature = hmac.new(public, f"{head}.{body}".encode(), hashlib.sha256).digest()
    return f"{head}.{body}.{b64(signature)}"


def _battery(live: Live) -> dict[str, tuple[dict[str, str], int, str]]:
    """name -> (headers, status, reason)."""
    now = int(time.time())
    aud = live.env.jwt_resource
    forge = live.env.server.forge
    base = {"aud": aud, "scope": "tools:read notes", "client_id": "forger"}
    rogue_key, _ = rsa_key("rogue")
    unsigned = jwt.encode({**base, "iss": live.env.issuer, "exp": now + 600}, "", "none")

    def bearer(token: str) -> dict[str, str]:
        return {"authorization": f"Bearer {token}"}

    return {
        "no token": ({}, 401, "missing_token"),
        "another scheme": ({"authorization": "Basic YWdlbnQ6c2VjcmV0"}, 401, "missing_token"),
        "malformed header": ({"authorization": "Bearer two tokens"}, 401, "malformed"),
        "empty bearer": ({"authorization": "Bearer "}, 401, "malformed"),
        "not a jwt": (bearer("abc.def"), 401, "malformed"),
        "wrong audience": (
            bearer(forge({**base, "aud": "https://other.example/mcp"})),
            401,
            "wrong_audience",
        ),
        "wrong issuer": (
            bearer(forge({**base, "iss": "https://evil.example"})),
            401,
            "wrong_issuer",
        ),
        "expired": (bearer(forge({**base, "iat": now - 7200, "exp": now - 3600})), 401, "expired"),
        "not yet valid": (bearer(forge({**base, "nbf": now + 3600})), 401, "not_yet_valid"),
        "alg none": (bearer(unsigned), 401, "algorithm"),
        "hs256 with the public key": (
            bearer(
                _hs256_with_public_key(live, {**base, "iss": live.env.issuer, "exp": now + 600})
            ),
            401,
            "algorithm",
        ),
        "unknown kid": (
            bearer(forge(base, key=rogue_key, headers={"kid": "rogue"})),
            401,
            "unknown_key",
        ),
        "the issuer's kid, another key": (bearer(forge(base, key=rogue_key)), 401, "bad_signature"),
        "no exp": (bearer(forge({**base, "exp": None})), 401, "missing_claim"),
        "typed JWT": (bearer(forge(base, headers={"typ": "JWT"})), 401, "token_type"),
        "an ID token": (bearer(forge(base, headers={"typ": "id_token+jwt"})), 401, "token_type"),
        "no typ": (bearer(forge(base, headers={"typ": None})), 401, "token_type"),
    }


BATTERY = [
    "no token",
    "another scheme",
    "malformed header",
    "empty bearer",
    "not a jwt",
    "wrong audience",
    "wrong issuer",
    "expired",
    "not yet valid",
    "alg none",
    "hs256 with the public key",
    "unknown kid",
    "the issuer's kid, another key",
    "no exp",
    "typed JWT",
    "an ID token",
    "no typ",
]


@pytest.mark.parametrize(
    ("types", "typ", "accepted"),
    [
        (("at+jwt",), "at+jwt", True),
        (("at+jwt",), "application/AT+JWT", True),
        (("at+jwt",), "JWT", False),
        (("at+jwt", "JWT"), "jwt", True),
        (("application/at+jwt",), None, False),
        (("at+jwt", ""), None, True),
    ],
)
async def test_accepted_token_types(
    live: Live, types: tuple[str, ...], typ: str | None, accepted: bool
) -> None:
    """`typ` is compared without case or `application/` prefix, against the accepted types
    (`auth_token_types`); a token without one passes only when `""` is listed."""
    verifier = JwtVerifier(
        issuers=[live.env.issuer], audiences=[live.env.jwt_resource], token_types=types
    )
    token = live.env.server.forge({"aud": live.env.jwt_resource}, headers={"typ": typ})
    if accepted:
        assert (await verifier.verify(token)).subject == "forger"
    else:
        with pytest.raises(InvalidToken) as refused:
            await verifier.verify(token)
        assert refused.value.reason == "token_type"


@pytest.mark.parametrize("types", [("id_token+jwt",), ("at+jwt", "application/ID_TOKEN+JWT"), ()])
def test_id_tokens_cannot_be_accepted(types: tuple[str, ...]) -> None:
    """No setting makes an ID token (or nothing at all) an accepted access-token type."""
    with pytest.raises(ValidationError, match="auth_token_types"):
        McpSettings(auth_token_types=types)
    with pytest.raises(ValueError, match="auth_token_types"):
        JwtVerifier(issuers=["https://id.example"], audiences=["x"], token_types=types)


@pytest.mark.parametrize("case", BATTERY)
async def test_negative_battery(
    live: Live, ran: Ran, case: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Each refused token: its status, `error="invalid_token"` when a token was sent, the
    reason in the body and the failures metric, nothing run, the token in no log."""
    headers, status, reason = _battery(live)[case]
    before = live.otel.total(FAILURES, {"mcp_asgi.auth.failure.reason": reason})
    caplog.set_level(logging.DEBUG, "mcp_asgi")
    async with live.client() as client:
        body = client.build("tools/call", {"name": "whoami", "arguments": {}})
        response = await client.post(body, {**client.headers_for(body), **headers})
    assert (response.status, response.final["error"]["data"]["reason"]) == (status, reason)
    value = challenge(response)
    assert value.startswith(f'Bearer resource_metadata="{live.metadata_url}"')
    sent = "authorization" in headers and headers["authorization"].lower().startswith("bearer")
    assert ('error="invalid_token"' in value) == sent
    assert ran.calls == []
    assert live.otel.total(FAILURES, {"mcp_asgi.auth.failure.reason": reason}) == before + 1
    token = headers.get("authorization", "").partition(" ")[2]
    if len(token) > 8:
        assert token not in caplog.text
        assert token not in json.dumps(response.final)
        assert token not in value


@pytest.mark.parametrize("name", ["access_token", "access%5Ftoken", "%61ccess_token"])
async def test_token_in_the_query_string_is_400(live: Live, ran: Ran, name: str) -> None:
    """RFC 6750 §2.3 is not for MCP: a token in the URL is a 400 invalid_request, even a
    valid one, even with a header, even with its name percent-encoded."""
    token = live.token()
    async with httpx.AsyncClient() as http:
        body = McpTestClient(live.url).build("tools/call", {"name": "whoami", "arguments": {}})
        response = await http.post(
            f"{live.url}?x=1&{name}={token}",
            json=body,
            headers={
                **McpTestClient(live.url).headers_for(body),
                "authorization": f"Bearer {token}",
            },
        )
    assert response.status_code == 400
    assert response.headers["www-authenticate"] == (
        f'Bearer resource_metadata="{live.metadata_url}", error="invalid_request", '
        'error_description="Send the access token in the Authorization header, never in the URL"'
    )
    assert response.json()["error"]["data"] == {"reason": "token_in_query"}
    assert ran.calls == []


async def test_unknown_kid_refetches_the_jwks_once(
    live: Live, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A flood of unknown kids costs at most one JWKS fetch per auth_jwks_min_refetch."""
    fetched: list[str] = []
    original = HttpJson.get_json

    async def counting(http: HttpJson, url: str) -> dict[str, Any]:
        fetched.append(url)
        return await original(http, url)

    rogue_key, _ = rsa_key("rogue")
    monkeypatch.setattr(HttpJson, "get_json", counting)
    async with live.client() as client:
        for n in range(5):
            token = live.env.server.forge(
                {"aud": live.env.jwt_resource}, key=rogue_key, headers={"kid": f"rogue-{n}"}
            )
            body = client.build("tools/call", {"name": "whoami", "arguments": {}})
            response = await client.post(
                body, {**client.headers_for(body), "authorization": f"Bearer {token}"}
            )
            assert response.status == 401
    assert len(fetched) <= 1


async def test_validation_order(live: Live) -> None:
    """Method (405), then Origin (403), then authentication (401), before the body, its
    Content-Type and its JSON; the operation's scopes (403) before MCP validation."""
    async with live.client() as client:
        wrong_method = await client.post(b"", {}, http_method="PUT")
        foreign = await client.post(
            b"{}", {"origin": "https://evil.example", "content-type": "application/json"}
        )
        garbage = await client.post(b"not json", {"content-type": "text/plain"})
    assert wrong_method.status == 405
    assert foreign.status == 403
    assert foreign.final["error"]["message"] == "Forbidden: Origin not allowed"
    assert garbage.status == 401  # not 415 for the Content-Type, nor 400 for the JSON
    async with live.client(live.token()) as client:
        body = client.build("tools/call", {"name": "purge", "arguments": {}})
        headers = {**client.headers_for(body), "mcp-protocol-version": "1999-01-01"}
        response = await client.post(body, headers)
    assert response.status == 403  # the operation's scopes come before MCP validation


async def test_spans_carry_the_outcome_and_client_id_not_the_subject(live: Live) -> None:
    """The auth outcome and client id are on spans; the subject is not (record_principal
    is off); the token is nowhere in them."""
    token = live.token()
    live.otel.spans.clear()
    async with live.client(token) as client:
        await client.call_tool("whoami")
        await client.request("tools/call", {"name": "purge", "arguments": {}})
    served = live.otel.span("tools/call whoami")
    refused = live.otel.span("tools/call purge")
    assert served.attributes is not None
    assert refused.attributes is not None
    assert served.attributes["mcp_asgi.auth.outcome"] == "bearer"
    assert served.attributes["mcp_asgi.auth.client_id"] == "agent"
    assert "enduser.id" not in served.attributes
    assert refused.attributes["mcp_asgi.auth.outcome"] == "insufficient_scope"
    for span in live.otel.spans.get_finished_spans():
        assert token not in json.dumps(dict(span.attributes or {}))


async def test_fastapi_security_scopes_in_a_tool(live: Live, ran: Ran) -> None:
    """`Security(dependency, scopes=["admin"])` in a tool: the scope is the tool's (403
    without it, before the dependency runs, naming every scope the tool needs, sorted);
    with it, the dependency gets the principal and its SecurityScopes."""
    async with live.client(live.token("tools:read")) as client:
        refused = await client.request("tools/call", {"name": "secured", "arguments": {}})
    assert refused.status == 403
    assert 'scope="admin tools:read"' in refused.headers["www-authenticate"]
    async with live.client(live.token("tools:read admin")) as client:
        result = await client.call_tool("secured")
    assert result["content"][0]["text"] == "secured for agent"
    assert ran.calls == ["secured"]


async def test_a_verified_token_is_remembered_until_it_expires(live: Live) -> None:
    """Sent again, a verified token is not checked again (the same principal) while its
    `exp` plus the leeway is ahead on the wall clock; then it is checked again."""
    wall = [time.time()]
    verifier = JwtVerifier(
        issuers=[live.env.issuer],
        audiences=[live.env.jwt_resource],
        leeway=30.0,
        wall_clock=lambda: wall[0],
    )
    exp = int(time.time()) + 3600
    token = live.env.server.forge({"aud": live.env.jwt_resource, "exp": exp})
    first = await verifier.verify(token)
    assert await verifier.verify(token) is first
    wall[0] = exp + 30.0
    again = await verifier.verify(token)  # checked by PyJWT (on the real clock: still valid)
    assert again is not first
    assert again == first


async def test_a_remembered_token_is_checked_again_with_the_refetched_keys(
    live: Live, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Once its issuer's keys are due for a refetch, a remembered token is checked against
    the new key set: signed by a key rotated out, it is refused."""
    now = [0.0]
    verifier = JwtVerifier(
        issuers=[live.env.issuer], audiences=[live.env.jwt_resource], clock=lambda: now[0]
    )
    token = live.env.server.forge({"aud": live.env.jwt_resource})
    first = await verifier.verify(token)
    assert await verifier.verify(token) is first

    async def rotated(http: HttpJson, url: str) -> dict[str, Any]:
        return {"keys": []}

    monkeypatch.setattr(HttpJson, "get_json", rotated)
    assert await verifier.verify(token) is first  # the keys are not due for a refetch yet
    now[0] = 3600.0
    with pytest.raises(InvalidToken) as refused:
        await verifier.verify(token)
    assert refused.value.reason == "unknown_key"
