"""The `TokenVerifier` protocol, and how a verifier says no."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from mcp_asgi.auth.principal import Principal


class InvalidToken(Exception):
    """The token must be refused (401 `invalid_token`).

    `reason` is a short machine word for the failure metric and logs (`expired`,
    `not_yet_valid`, `wrong_audience`, `wrong_issuer`, `bad_signature`, `algorithm`,
    `unknown_key`, `inactive`, `malformed`, ...); `description` goes to the client as the
    challenge's `error_description`. Neither may contain the token.
    """

    def __init__(self, reason: str, description: str = "The access token is invalid") -> None:
        super().__init__(description)
        self.reason = reason
        self.description = description


class VerifierUnavailable(Exception):
    """The verifier could not reach what it needs (the issuer's metadata, its JWKS, its
    introspection endpoint): the request is answered 503, and may be retried."""


@runtime_checkable
class TokenVerifier(Protocol):
    """Verifies a bearer access token; give one to `McpMiddleware(token_verifier=...)`.

    `verify` returns the `Principal` the token stands for, or raises `InvalidToken`. It
    must accept only tokens issued for this endpoint (their audience is the resource URL,
    RFC 8707): the built-in verifiers check the issuer, the audience, the expiry and the
    signature or the introspection answer. The endpoint checks the scopes afterwards.
    Concurrent requests with the same token await one `verify` call; a token it refuses
    spends its client's `auth_failure_rate` budget.
    """

    async def verify(self, token: str) -> Principal:
        """The principal of a valid token; `InvalidToken` otherwise."""
        ...
