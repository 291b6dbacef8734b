"""A real OAuth 2.1 authorization server for the tests: `oidc-provider` (OpenID certified,
from npm, installed in tests/authserver by `make test`) on 127.0.0.1.

It signs with an RSA key made here, so the tests can also forge tokens with the issuer's
own key (expired, not yet valid, for another audience...) and with keys it never had.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import jwt
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken

AUTHSERVER = Path(__file__).resolve().parent.parent / "authserver"

CLIENT_ID = "agent"
CLIENT_SECRET = "agent-secret"
SERVER_CLIENT_ID = "mcp-server"  # the resource server's own client, for introspection
SERVER_CLIENT_SECRET = "mcp-server-secret"
SCOPES = "tools:read notes notes:write admin"


def free_port() -> int:
    """A port free now on 127.0.0.1 (the MCP server's URL is its resource URL, which the
    authorization server must know before either starts)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def rsa_key(kid: str) -> tuple[Any, dict[str, Any]]:
    """A new RSA private key and its private JWK."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    jwk: dict[str, Any] = json.loads(RSAAlgorithm.to_jwk(key))
    jwk.update(kid=kid, use="sig", alg="RS256")
    return key, jwk


@dataclass
class AuthServer:
    """The running authorization server: its issuer, and ways to get and forge tokens."""

    issuer: str
    key: Any
    kid: str
    public_jwk: dict[str, Any]
    resources: Mapping[str, str] = field(default_factory=dict)

    def token(
        self,
        resource: str,
        scope: str | None = None,
        *,
        client_id: str = CLIENT_ID,
        client_secret: str = CLIENT_SECRET,
    ) -> str:
        """An access token for `resource` by the client credentials grant."""
        form = {"grant_type": "client_credentials", "resource": resource}
        if scope is not None:
            form["scope"] = scope
        response = httpx.post(
            self.issuer + "/token", data=form, auth=(client_id, client_secret), timeout=10
        )
        assert response.status_code == 200, response.text
        token: str = response.json()["access_token"]
        return token

    def forge(
        self,
        claims: Mapping[str, Any],
        *,
        key: Any = None,
        algorithm: str = "RS256",
        headers: Mapping[str, Any] | None = None,
    ) -> str:
        """A JWT signed with the issuer's key (or `key`), with sensible defaults for the
        claims not given (issuer, an hour of validity)."""
        now = int(time.time())
        body = {"iss": self.issuer, "sub": "forger", "iat": now, "exp": now + 3600, **claims}
        head = {"kid": self.kid, "typ": "at+jwt", **(headers or {})}
        return jwt.encode(body, self.key if key is None else key, algorithm, headers=head)


class MemoryStorage:
    """The SDK's token storage, in memory."""

    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client_info: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client_info

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client_info = client_info


@contextmanager
def run_authserver(resources: Mapping[str, str]) -> Iterator[AuthServer]:
    """oidc-provider issuing tokens for `resources` (resource URL -> "jwt" or "opaque")."""
    node = shutil.which("node")
    if node is None or not (AUTHSERVER / "node_modules" / "oidc-provider").is_dir():
        raise RuntimeError("the authorization server needs node and tests/authserver (make test)")
    port = free_port()
    key, private = rsa_key("as-key-1")
    public = {k: v for k, v in private.items() if k in ("kty", "n", "e", "kid", "use", "alg")}
    clients = [
        {
            "client_id": CLIENT_ID,
            "client_secret": CLIENT_SECRET,
            "grant_types": ["client_credentials"],
            "redirect_uris": [],
            "response_types": [],
            "scope": SCOPES,
        },
        {
            "client_id": "other-agent",
            "client_secret": "other-secret",
            "grant_types": ["client_credentials"],
            "redirect_uris": [],
            "response_types": [],
            "scope": SCOPES,
        },
        {
            "client_id": SERVER_CLIENT_ID,
            "client_secret": SERVER_CLIENT_SECRET,
            "grant_types": ["client_credentials"],
            "redirect_uris": [],
            "response_types": [],
        },
    ]
    config = {
        "port": port,
        "jwks": {"keys": [private]},
        "clients": clients,
        "resources": {url: {"scope": SCOPES, "format": fmt} for url, fmt in resources.items()},
    }
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "config.json"
        path.write_text(json.dumps(config))
        process = subprocess.Popen(
            [node, str(AUTHSERVER / "server.mjs"), str(path)],
            cwd=AUTHSERVER,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        try:
            assert process.stdout is not None
            deadline = time.monotonic() + 15
            line = ""
            while time.monotonic() < deadline:
                line = process.stdout.readline()
                if line.startswith("ready ") or not line:
                    break
            if not line.startswith("ready "):
                raise RuntimeError(f"oidc-provider did not start: {line!r}")
            issuer = line.split()[1]
            yield AuthServer(issuer, key, "as-key-1", public, dict(resources))
        finally:
            process.terminate()
            try:
                process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            if process.stdout is not None:
                process.stdout.close()
