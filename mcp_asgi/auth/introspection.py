"""`IntrospectionVerifier`: opaque access tokens through the issuer's RFC 7662
introspection endpoint (httpx), with a short cache of positive answers.

A token passes when the answer is `active`, names a configured issuer (if it names one),
has this resource among its audiences (RFC 8707) and is within `exp`/`nbf` (with `leeway`).
Answers are cached by a digest of the token (never the token itself): a positive one for
`cache_ttl` seconds, never beyond the token's `exp`; a refusal for `refusal_ttl` seconds, so
a token sent again and again is introspected once. Each cache holds at most `MAX_CACHED`
entries (then starts again empty).
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Sequence
from typing import Any, Final, TypeVar

from mcp_asgi.auth.discovery import HttpJson, IssuerMetadata
from mcp_asgi.auth.principal import Principal, token_principal
from mcp_asgi.auth.verifier import InvalidToken, VerifierUnavailable

MAX_CACHED: Final = 10_000

_T = TypeVar("_T")


class IntrospectionVerifier:
    """Verifies opaque tokens with an RFC 7662 introspection endpoint."""

    def __init__(
        self,
        *,
        issuers: Sequence[str],
        audiences: Sequence[str],
        client_id: str | None,
        client_secret: str | None,
        endpoint: str | None = None,
        cache_ttl: float = 30.0,
        refusal_ttl: float = 5.0,
        leeway: float = 30.0,
        http: HttpJson | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if not issuers or not audiences:
            raise ValueError("IntrospectionVerifier needs at least one issuer and one audience")
        self._issuers = tuple(issuers)
        self._audiences = frozenset(audiences)
        self._auth = (client_id, client_secret or "") if client_id else None
        self._endpoint = endpoint
        self._cache_ttl = cache_ttl
        self._refusal_ttl = refusal_ttl
        self._leeway = leeway
        self._clock = clock
        self._http = http or HttpJson()
        self._metadata = IssuerMetadata(self._http)
        self._cache: dict[str, tuple[float, Principal]] = {}
        self._refused: dict[str, tuple[float, InvalidToken]] = {}

    async def verify(self, token: str) -> Principal:
        """The principal of an active token for this resource; `InvalidToken` otherwise."""
        digest = hashlib.sha256(token.encode()).hexdigest()
        now = self._clock()
        principal = _fresh(self._cache, digest, now)
        if principal is not None:
            return principal
        refused = _fresh(self._refused, digest, now)
        if refused is not None:
            raise InvalidToken(refused.reason, refused.description)
        answer = await self._http.post_form(
            await self._url(),
            {"token": token, "token_type_hint": "access_token"},
            auth=self._auth,
        )
        try:
            principal = self._check(answer, now)
        except InvalidToken as exc:
            _keep(self._refused, digest, now + self._refusal_ttl, exc, now)
            raise
        expires = now + self._cache_ttl
        exp = answer.get("exp")
        if isinstance(exp, (int, float)):
            expires = min(expires, float(exp))
        _keep(self._cache, digest, expires, principal, now)
        return principal

    def _check(self, answer: dict[str, Any], now: float) -> Principal:
        error = answer.get("error")
        if error in ("unsupported_token_type", "invalid_token", "invalid_request"):
            # e.g. a JWT access token, which some servers refuse to introspect
            raise InvalidToken("inactive", "The access token is not one this server accepts")
        if error is not None:
            raise VerifierUnavailable(f"introspection refused: {error}")
        if answer.get("active") is not True:
            raise InvalidToken("inactive", "The access token is not active")
        issuer = answer.get("iss")
        if issuer is not None and issuer not in self._issuers:
            raise InvalidToken("wrong_issuer", "The access token is from another issuer")
        audience = answer.get("aud")
        audiences = {audience} if isinstance(audience, str) else set(audience or ())
        if not audiences & self._audiences:
            raise InvalidToken("wrong_audience", "The access token is for another resource")
        exp, nbf = answer.get("exp"), answer.get("nbf")
        if isinstance(exp, (int, float)) and exp + self._leeway < now:
            raise InvalidToken("expired", "The access token has expired")
        if isinstance(nbf, (int, float)) and nbf - self._leeway > now:
            raise InvalidToken("not_yet_valid", "The access token is not valid yet")
        principal = token_principal(answer)
        if principal is None:
            raise InvalidToken("missing_claim", "The access token names no subject")
        return principal

    async def _url(self) -> str:
        if self._endpoint is None:
            metadata = await self._metadata.get(self._issuers[0])
            url = metadata.get("introspection_endpoint")
            if not isinstance(url, str):
                raise VerifierUnavailable(f"{self._issuers[0]} has no introspection_endpoint")
            self._endpoint = url
        return self._endpoint


def _fresh(cache: dict[str, tuple[float, _T]], digest: str, now: float) -> _T | None:
    """What `cache` holds for `digest` until its time (then forgotten), or None."""
    cached = cache.get(digest)
    if cached is None:
        return None
    if cached[0] > now:
        return cached[1]
    del cache[digest]
    return None


def _keep(
    cache: dict[str, tuple[float, _T]], digest: str, until: float, value: _T, now: float
) -> None:
    """Keep `value` for `digest` until `until` (if later than now), at most MAX_CACHED."""
    if until > now:
        if len(cache) >= MAX_CACHED:
            cache.clear()
        cache[digest] = (until, value)
