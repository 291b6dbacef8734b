"""`Authenticator`: who a request is, before anything else is done with it; the challenges.

    authenticate   token in the query string              -> 400 invalid_request
                   the host app's identity (if trusted)    -> its Principal
                   no Authorization: Bearer                -> 401 (no error)
                   a malformed token                       -> 401 invalid_token
                   the client's failures over its budget   -> 429 (the budget's error)
                   a refused token                         -> 401 invalid_token
                   the verifier cannot be reached          -> 503
                   the endpoint's required scopes missing  -> 403 insufficient_scope
    authorize      an operation's scopes missing           -> 403 insufficient_scope

Every refusal is an `AuthError`: a `ProtocolError` (-32600, Invalid Request, with
`data.reason`) whose `headers` carry the `WWW-Authenticate` challenge (RFC 6750 §3, MCP
authorization): `resource_metadata` (the Protected Resource Metadata URL), `scope` (what is
needed) and, when a token was sent, `error` and `error_description`. The token itself is
never logged, recorded or echoed.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Final
from urllib.parse import parse_qsl

from starlette.types import Scope

from mcp_asgi._loggers import auth_logger as logger
from mcp_asgi.auth.principal import PRINCIPAL_KEY, Principal, host_principal, missing_scopes
from mcp_asgi.auth.verifications import FailureBudget, Verifications
from mcp_asgi.auth.verifier import InvalidToken, TokenVerifier
from mcp_asgi.protocol.headers import AUTHORIZATION, RequestHeaders
from mcp_asgi.protocol.jsonrpc import INTERNAL_ERROR, INVALID_REQUEST, ProtocolError, RequestId

_TOKEN68: Final = re.compile(r"[A-Za-z0-9\-._~+/]+=*")
_UNSAFE: Final = re.compile(r'[^\x20-\x7e]|["\\]')

AUTH_FAILURE_REASONS: Final = (
    "missing_token",
    "malformed",
    "token_in_query",
    "insufficient_scope",
    "unavailable",
    "expired",
    "not_yet_valid",
    "wrong_audience",
    "wrong_issuer",
    "bad_signature",
    "algorithm",
    "token_type",
    "unknown_key",
    "inactive",
    "missing_claim",
)
"""The reasons of `AuthError` (and of the auth failures metric); a custom `TokenVerifier`
may add its own through `InvalidToken.reason`."""


class AuthError(ProtocolError):
    """A request refused by authorization: 401, 403, 400 or 503, with its challenge."""

    def __init__(
        self,
        status: int,
        reason: str,
        message: str,
        *,
        challenge: str | None,
        scopes: Sequence[str] = (),
        request_id: RequestId | None = None,
    ) -> None:
        data: dict[str, object] = {"reason": reason}
        if scopes:
            data["scopes"] = list(scopes)
        code = INTERNAL_ERROR if status == 503 else INVALID_REQUEST
        super().__init__(status, code, message, data, request_id=request_id)
        self.reason = reason
        """Why: one of `AUTH_FAILURE_REASONS` (or a custom verifier's)."""
        self.headers: list[tuple[bytes, bytes]] = (
            [(b"www-authenticate", challenge.encode("latin-1"))] if challenge else []
        )
        """The response headers: the `WWW-Authenticate` challenge."""


def _quoted(value: str) -> str:
    return '"' + _UNSAFE.sub("", value) + '"'


class Authenticator:
    """Authenticates the requests of one endpoint and checks their scopes.

    - `metadata_url`: the Protected Resource Metadata URL named in every challenge.
    - `verifier`: verifies bearer tokens; None when only the host app's identity counts.
    - `required_scopes`: what every request needs (checked at authentication).
    - `host_identity`: trust the identity the host app put in `scope["user"]` /
      `scope["auth"]` (a request with it needs no token).
    - `failures`: the clients' budgets of refused tokens, or None for no limit (how it
      is charged: `mcp_asgi.auth.verifications`).
    """

    def __init__(
        self,
        *,
        metadata_url: str | None,
        verifier: TokenVerifier | None,
        required_scopes: Iterable[str] = (),
        host_identity: bool = False,
        failures: FailureBudget | None = None,
    ) -> None:
        if verifier is None and not host_identity:
            raise ValueError("an Authenticator needs a token verifier or the host identity")
        self.metadata_url = metadata_url
        self.required_scopes = tuple(required_scopes)
        self._verifications = Verifications(verifier, failures) if verifier else None
        self._host_identity = host_identity

    def challenge(
        self, *, error: str | None = None, description: str | None = None, scopes: Sequence[str]
    ) -> str:
        """A `WWW-Authenticate: Bearer` value."""
        params: list[str] = []
        if error == "insufficient_scope":
            params.append(f"error={_quoted(error)}")
            params.append(f"scope={_quoted(' '.join(scopes))}")
            if self.metadata_url:
                params.append(f"resource_metadata={_quoted(self.metadata_url)}")
        else:
            if self.metadata_url:
                params.append(f"resource_metadata={_quoted(self.metadata_url)}")
            if scopes:
                params.append(f"scope={_quoted(' '.join(scopes))}")
            if error:
                params.append(f"error={_quoted(error)}")
        if error and description:
            params.append(f"error_description={_quoted(description)}")
        return " ".join(["Bearer", ", ".join(params)]) if params else "Bearer"

    async def authenticate(self, asgi_scope: Scope, headers: RequestHeaders) -> Principal:
        """The request's principal, stored in the scope (`PRINCIPAL_KEY`); raises
        `AuthError` when the request must be refused."""
        principal = await self._identify(asgi_scope, headers)
        missing = missing_scopes(principal.scopes, self.required_scopes)
        if missing:
            raise self.insufficient(self.required_scopes)
        asgi_scope[PRINCIPAL_KEY] = principal
        return principal

    async def _identify(self, asgi_scope: Scope, headers: RequestHeaders) -> Principal:
        query = asgi_scope.get("query_string", b"")
        if query and (b"access_token" in query or b"%" in query) and _token_in_query(query):
            description = "Send the access token in the Authorization header, never in the URL"
            raise AuthError(
                400,
                "token_in_query",
                "Bad Request: access token in the query string",
                challenge=self.challenge(
                    error="invalid_request", description=description, scopes=()
                ),
            )
        if self._host_identity:
            host = host_principal(asgi_scope)
            if host is not None:
                return host
        scopes = self.required_scopes
        authorization = headers.text(AUTHORIZATION)
        if authorization is None or not authorization.lower().startswith("bearer"):
            raise AuthError(
                401,
                "missing_token",
                "Unauthorized: an access token is required (Authorization: Bearer)",
                challenge=self.challenge(scopes=scopes),
            )
        scheme, _, token = authorization.partition(" ")
        token = token.strip(" ")
        if scheme.lower() != "bearer" or not _TOKEN68.fullmatch(token):
            raise self._invalid("malformed", "The Authorization header is malformed")
        if self._verifications is None:
            raise self._invalid("malformed", "This endpoint accepts no bearer tokens")
        outcome = await self._verifications.verify(token, asgi_scope)
        if isinstance(outcome, Principal):
            return outcome
        if isinstance(outcome, InvalidToken):
            logger.info("access token refused: %s", outcome.reason)
            raise self._invalid(outcome.reason, outcome.description)
        logger.warning("cannot verify access tokens: %s", outcome)
        raise AuthError(
            503,
            "unavailable",
            "Service Unavailable: the access token cannot be verified now",
            challenge=None,
        )

    def _invalid(self, reason: str, description: str) -> AuthError:
        return AuthError(
            401,
            reason,
            f"Unauthorized: {description}",
            challenge=self.challenge(
                error="invalid_token", description=description, scopes=self.required_scopes
            ),
        )

    def insufficient(self, scopes: Sequence[str], request_id: RequestId | None = None) -> AuthError:
        """The 403 for an operation that needs `scopes` (every one, in the challenge)."""
        description = "This operation needs the scopes: " + " ".join(scopes)
        return AuthError(
            403,
            "insufficient_scope",
            f"Forbidden: insufficient scope ({' '.join(scopes)})",
            challenge=self.challenge(
                error="insufficient_scope", description=description, scopes=scopes
            ),
            scopes=scopes,
            request_id=request_id,
        )

    def authorize(
        self, principal: Principal, required: Iterable[str], request_id: RequestId | None
    ) -> None:
        """Raise the 403 if `principal` lacks any of `required` (plus the endpoint's own
        required scopes, all of which go in the challenge)."""
        required = tuple(sorted(required))
        if required and missing_scopes(principal.scopes, required):
            needed = tuple(dict.fromkeys((*self.required_scopes, *required)))
            raise self.insufficient(needed, request_id)


def _token_in_query(query: bytes) -> bool:
    """Whether a parameter is named `access_token` once its name is percent-decoded (the
    byte search before the call skips the parse for the queries that cannot have one)."""
    return any(
        name == "access_token"
        for name, _ in parse_qsl(query.decode("latin-1"), keep_blank_values=True)
    )
