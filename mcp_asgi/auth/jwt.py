"""`JwtVerifier`: JWT access tokens (RFC 9068) checked against their issuer's JWKS, with
PyJWT (the `mcp-asgi[auth]` extra).

What a token must pass, in order, each failure an `InvalidToken` with its reason:

1. a JWS whose header `alg` is one of the pinned algorithms (`algorithm`): never `none`,
   never an HMAC algorithm (a verifier that accepted `HS256` could be fooled with the
   issuer's *public* key as the secret), which the settings refuse;
2. a header `typ` that is one of the accepted token types (`token_type`): `at+jwt` by
   default (RFC 9068 §4), compared without case and without an `application/` prefix
   (RFC 7515 §4.1.9); `""` accepts a token without `typ`; an ID token (`id_token+jwt`) and
   the other typed JWTs of `REFUSED_TYPES` are never accepted;
3. an `iss` that is one of the configured issuers (`wrong_issuer`);
4. a signing key in that issuer's JWKS with the header's `kid` (`unknown_key`): the JWKS
   is discovered from the issuer's metadata (or configured), cached, refetched when it is
   older than an hour, and refetched at once for an unknown `kid` (key rotation), at most
   once per `min_refetch` seconds per issuer, so a flood of made-up `kid`s costs one fetch;
5. the signature (`bad_signature`), `exp` (`expired`) and `nbf` (`not_yet_valid`) with
   `leeway` seconds, and `aud` naming this resource (`wrong_audience`, RFC 8707).

A token that passed is remembered by a digest of it (never the token), at most
`MAX_VERIFIED` of them: sent again, it is accepted without the signature being checked
again while it is within `exp` (and `leeway`) and its issuer's key set is the one it was
checked against and not due for a refetch (a token signed by a key since rotated out is
checked again, and refused). A client sends the same token with each request until it
expires, and the signature is most of a request's cost (an ES256 check is ~4 times the
instructions of the rest of an echo call).
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Sequence
from typing import Any, Final

import anyio

from mcp_asgi.auth.discovery import HttpJson, IssuerMetadata
from mcp_asgi.auth.principal import Principal, token_principal
from mcp_asgi.auth.verifier import InvalidToken, VerifierUnavailable

ASYMMETRIC: Final = frozenset(
    {
        "RS256", "RS384", "RS512", "PS256", "PS384", "PS512",
        "ES256", "ES384", "ES512", "ES256K", "EdDSA",
    }
)  # fmt: skip
"""The algorithms a JWT access token may be signed with (public-key signatures only)."""

MAX_AGE: Final = 3600.0
MAX_VERIFIED: Final = 10_000
"""Tokens remembered as verified (all forgotten at once beyond)."""

ACCESS_TOKEN_TYPES: Final = ("at+jwt",)
"""The header `typ` values accepted by default (RFC 9068 §4; `application/at+jwt` too)."""

REFUSED_TYPES: Final = frozenset({"id_token+jwt", "logout+jwt", "secevent+jwt", "dpop+jwt"})
"""JWTs made for something else (an ID token, a logout or security event, a DPoP proof):
never access tokens, whatever the settings say."""


def token_type(value: str) -> str:
    """A `typ` as compared: lower case, without the optional `application/` prefix."""
    value = value.strip().lower()
    return value.removeprefix("application/")


def accepted_types(types: Sequence[str]) -> frozenset[str]:
    """The `typ` values to accept (`""`: a token without one); a ValueError names the
    setting when the list is empty or admits a JWT that is no access token."""
    accepted = frozenset(token_type(t) for t in types)
    refused = sorted(accepted & REFUSED_TYPES)
    if refused or not accepted:
        raise ValueError(
            f"auth_token_types must list access-token types (e.g. 'at+jwt', or 'JWT' for "
            f"issuers that type them so, '' for none); refused: {refused or 'an empty list'}"
        )
    return accepted


def _jwt() -> Any:
    try:
        import jwt
    except ImportError as exc:  # pragma: no cover - the extra is installed in tests
        raise ImportError("JWT verification needs PyJWT: pip install 'mcp-asgi[auth]'") from exc
    return jwt


class _KeySet:
    """One issuer's signing keys by `kid`."""

    __slots__ = ("fetched_at", "keys", "lock", "uri")

    def __init__(self, uri: str | None) -> None:
        self.uri = uri
        self.keys: dict[str | None, tuple[Any, str | None]] = {}  # kid: (key, its alg)
        self.fetched_at: float | None = None
        self.lock = anyio.Lock()


class JwtVerifier:
    """Verifies JWT access tokens of `issuers` for `audiences` (the resource URL)."""

    def __init__(
        self,
        *,
        issuers: Sequence[str],
        audiences: Sequence[str],
        algorithms: Sequence[str] = ("RS256", "ES256", "PS256", "EdDSA"),
        leeway: float = 30.0,
        jwks_url: str | None = None,
        min_refetch: float = 30.0,
        token_types: Sequence[str] = ACCESS_TOKEN_TYPES,
        http: HttpJson | None = None,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        """`clock` times the key sets' fetches; `wall_clock` (the epoch, as PyJWT reads
        it) is what a remembered token's `exp` is compared with."""
        unsafe = [alg for alg in algorithms if alg not in ASYMMETRIC]
        if unsafe or not algorithms:
            raise ValueError(
                f"JWT algorithms must be public-key signatures ({', '.join(sorted(ASYMMETRIC))}); "
                f"refused: {unsafe or 'an empty list'}"
            )
        if not issuers or not audiences:
            raise ValueError("JwtVerifier needs at least one issuer and one audience")
        if jwks_url is not None and len(issuers) != 1:
            raise ValueError("a configured JWKS URL needs exactly one issuer")
        self._jwt = _jwt()
        self._issuers = tuple(issuers)
        self._audiences = tuple(audiences)
        self._algorithms = tuple(algorithms)
        self._types = accepted_types(token_types)
        self._leeway = leeway
        self._min_refetch = min_refetch
        self._clock = clock
        self._wall_clock = wall_clock
        # digest -> (exp, the principal, the key set and the fetch it was verified with)
        self._verified: dict[str, tuple[float, Principal, _KeySet, float]] = {}
        self._http = http or HttpJson()
        self._metadata = IssuerMetadata(self._http)
        self._sets = {issuer: _KeySet(jwks_url) for issuer in self._issuers}

    async def verify(self, token: str) -> Principal:
        """The principal of a valid token; `InvalidToken` otherwise."""
        digest = hashlib.sha256(token.encode()).hexdigest()
        known = self._verified.get(digest)
        if known is not None:
            exp, principal, key_set, fetched_at = known
            if (
                self._wall_clock() < exp + self._leeway  # PyJWT: expired at exp + leeway
                and key_set.fetched_at == fetched_at
                and self._clock() - fetched_at < MAX_AGE
            ):
                return principal
            del self._verified[digest]
        principal, exp, key_set = await self._verify(token)
        verified_with = key_set.fetched_at  # no await since the key was read
        if verified_with is not None:
            if len(self._verified) >= MAX_VERIFIED:
                self._verified.clear()
            self._verified[digest] = (exp, principal, key_set, verified_with)
        return principal

    async def _verify(self, token: str) -> tuple[Principal, float, _KeySet]:
        """Check the token; its principal, its `exp` and the key set that verified it."""
        jwt = self._jwt
        try:
            header = jwt.get_unverified_header(token)
            unverified = jwt.decode(token, options={"verify_signature": False})
        except jwt.PyJWTError:
            raise InvalidToken("malformed", "The access token is not a valid JWT") from None
        algorithm = header.get("alg")
        if algorithm not in self._algorithms:
            raise InvalidToken("algorithm", "The access token's algorithm is not accepted")
        typ = header.get("typ", "")
        if not isinstance(typ, str) or token_type(typ) not in self._types:
            raise InvalidToken("token_type", "The token is not an access token of a known type")
        issuer = unverified.get("iss")
        if not isinstance(issuer, str) or issuer not in self._sets:
            raise InvalidToken("wrong_issuer", "The access token is from another issuer")
        kid = header.get("kid")
        key = await self._key(issuer, kid if isinstance(kid, str) else None, algorithm)
        if key is None:
            raise InvalidToken("unknown_key", "The access token's signing key is unknown")
        try:
            claims: dict[str, Any] = jwt.decode(
                token,
                key=key,
                algorithms=[algorithm],
                audience=list(self._audiences),
                issuer=issuer,
                leeway=self._leeway,
                options={"require": ["exp", "iss", "aud"]},
            )
        except jwt.ExpiredSignatureError:
            raise InvalidToken("expired", "The access token has expired") from None
        except jwt.ImmatureSignatureError:
            raise InvalidToken("not_yet_valid", "The access token is not valid yet") from None
        except jwt.InvalidAudienceError:
            raise InvalidToken(
                "wrong_audience", "The access token is for another resource"
            ) from None
        except jwt.InvalidIssuerError:
            raise InvalidToken("wrong_issuer", "The access token is from another issuer") from None
        except jwt.InvalidSignatureError:
            raise InvalidToken("bad_signature", "The access token's signature is invalid") from None
        except jwt.MissingRequiredClaimError as exc:
            raise InvalidToken("missing_claim", f"The access token lacks {exc.claim!r}") from None
        except jwt.PyJWTError:
            raise InvalidToken("malformed", "The access token is invalid") from None
        principal = token_principal(claims)
        if principal is None:
            raise InvalidToken("missing_claim", "The access token names no subject")
        return principal, float(claims["exp"]), self._sets[issuer]

    async def _key(self, issuer: str, kid: str | None, algorithm: str) -> Any:
        key_set = self._sets[issuer]
        now = self._clock()
        stale = key_set.fetched_at is None or now - key_set.fetched_at >= MAX_AGE
        if stale or kid not in key_set.keys:
            async with key_set.lock:
                fetched = key_set.fetched_at
                now = self._clock()
                due = fetched is None or now - fetched >= self._min_refetch
                if due and (stale or kid not in key_set.keys):
                    await self._fetch(issuer, key_set)
        jwk = key_set.keys.get(kid)
        if jwk is None and kid is None and len(key_set.keys) == 1:
            jwk = next(iter(key_set.keys.values()))
        if jwk is None:
            return None
        key, pinned = jwk
        if pinned is not None and pinned != algorithm:
            return None  # the key is pinned to another algorithm
        return key

    async def _fetch(self, issuer: str, key_set: _KeySet) -> None:
        jwt = self._jwt
        key_set.fetched_at = self._clock()  # a failure also waits min_refetch
        if key_set.uri is None:
            metadata = await self._metadata.get(issuer)
            uri = metadata.get("jwks_uri")
            if not isinstance(uri, str):
                raise VerifierUnavailable(f"the metadata of {issuer} has no jwks_uri")
            key_set.uri = uri
        document = await self._http.get_json(key_set.uri)
        keys: dict[str | None, tuple[Any, str | None]] = {}
        for data in document.get("keys", []):
            if not isinstance(data, dict) or data.get("use", "sig") != "sig":
                continue
            if data.get("kty") == "oct":  # a symmetric key has no place in a JWKS
                continue
            try:
                key = jwt.PyJWK(data).key
            except jwt.PyJWTError:
                continue
            pinned = data.get("alg")
            keys[data.get("kid")] = (key, pinned if isinstance(pinned, str) else None)
        key_set.keys = keys
