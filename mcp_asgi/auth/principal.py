"""`Principal`: who is calling. Where a request's principal lives, the key that binds
handles to it, and the scope hierarchy rule."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from starlette.types import Scope

PRINCIPAL_KEY: Final = "mcp_asgi.principal"
"""The ASGI scope key under which the endpoint stores the request's verified `Principal`."""


@dataclass(frozen=True, slots=True)
class Principal:
    """The authenticated caller of a request (`ctx.principal`).

    - `subject`: who it is: the token's `sub` (or its client id for a token issued to a
      client on its own behalf), or the host app's user identity.
    - `scopes`: the scopes granted (the token's `scope`/`scp`, or the host app's
      `AuthCredentials.scopes`).
    - `claims`: every claim of the verified token (or of the introspection response); for
      the host app's identity, its `scope["auth"]` when that is a mapping, else empty.
    - `client_id`: the OAuth client the token was issued to (`client_id`, `azp`), or None.
    - `issuer`: the authorization server that issued the token, or None (host identity).
    - `source`: `"bearer"` (a verified access token) or `"host"` (the host app's identity).
    """

    subject: str
    scopes: frozenset[str] = frozenset()
    claims: Mapping[str, Any] = field(default_factory=dict)
    client_id: str | None = None
    issuer: str | None = None
    source: Literal["bearer", "host"] = "bearer"

    @staticmethod
    def of(connection: Any) -> Principal | None:
        """The verified principal of a request, from a Starlette `Request` (or any
        `HTTPConnection`, or an ASGI scope): for FastAPI dependencies of handlers, e.g.
        `Principal.of(request)` in a `Security(..., scopes=[...])` dependency. None when
        the endpoint authenticated nobody."""
        return principal_in(getattr(connection, "scope", connection))

    def has_scopes(self, *required: str) -> bool:
        """Whether the granted scopes cover every one of `required` (`scope_covers`)."""
        return not missing_scopes(self.scopes, required)

    @property
    def key(self) -> str:
        """The identity handles are bound to (sessions, `requestState`): issuer and
        subject of a token, or the host app's user identity."""
        if self.source == "host":
            return f"user:{self.subject}"
        return f"sub:{self.issuer or ''}|{self.subject}"


def scope_covers(granted: str, required: str) -> bool:
    """The scope hierarchy: a granted scope covers a required one when they are equal, or
    when the required one extends it after a colon (`files` covers `files:read` and
    `files:read:all`; `files:read` does not cover `files:write`, nor `files`)."""
    return required == granted or required.startswith(granted + ":")


def missing_scopes(granted: Iterable[str], required: Iterable[str]) -> list[str]:
    """The required scopes no granted scope covers, in order."""
    granted = tuple(granted)
    return [r for r in required if not any(scope_covers(g, r) for g in granted)]


def principal_in(asgi_scope: Scope) -> Principal | None:
    """The request's verified principal, if the endpoint authenticated one."""
    principal = asgi_scope.get(PRINCIPAL_KEY)
    return principal if isinstance(principal, Principal) else None


def principal_key(asgi_scope: Scope) -> str | None:
    """The identity a request's handles are bound to, or None for an anonymous request.

    The verified `Principal`'s key when the endpoint authenticated the request; otherwise
    the host app's identity: `scope["user"]` when it is authenticated (Starlette's
    `AuthenticationMiddleware`), its `identity`, else its `display_name`; or
    `scope["auth"]` when it is a mapping with a `sub` claim (token-verifying middleware
    that stores the claims there), as `iss|sub`.
    """
    principal = principal_in(asgi_scope)
    if principal is not None:
        return principal.key
    host = host_principal(asgi_scope)
    return host.key if host is not None else None


def host_principal(asgi_scope: Scope) -> Principal | None:
    """The host app's identity as a `Principal`, or None when it set none."""
    auth = asgi_scope.get("auth")
    user = asgi_scope.get("user")
    if user is not None and getattr(user, "is_authenticated", False):
        for attribute in ("identity", "display_name"):
            try:
                value = getattr(user, attribute)
            except (NotImplementedError, AttributeError):
                continue
            if value:
                claims = dict(auth) if isinstance(auth, Mapping) else {}
                return Principal(
                    subject=str(value),
                    scopes=_host_scopes(auth),
                    claims=claims,
                    client_id=_client_id(claims),
                    source="host",
                )
    if isinstance(auth, Mapping) and auth.get("sub"):
        claims = dict(auth)
        return Principal(
            subject=str(claims["sub"]),
            scopes=token_scopes(claims),
            claims=claims,
            client_id=_client_id(claims),
            issuer=str(claims["iss"]) if claims.get("iss") else None,
        )
    return None


def token_scopes(claims: Mapping[str, Any]) -> frozenset[str]:
    """The scopes of a token's claims: `scope` (space-separated, RFC 9068 and RFC 7662) or
    `scp` (a list or a string, as some issuers write it)."""
    for name in ("scope", "scp"):
        value = claims.get(name)
        if isinstance(value, str):
            return frozenset(value.split())
        if isinstance(value, (list, tuple)):
            return frozenset(str(v) for v in value)
    return frozenset()


def token_principal(claims: Mapping[str, Any]) -> Principal | None:
    """The principal of verified token claims; None when they name nobody."""
    client_id = _client_id(claims)
    subject = claims.get("sub") or client_id
    if not subject:
        return None
    issuer = claims.get("iss")
    return Principal(
        subject=str(subject),
        scopes=token_scopes(claims),
        claims=dict(claims),
        client_id=client_id,
        issuer=str(issuer) if issuer else None,
    )


def _client_id(claims: Mapping[str, Any]) -> str | None:
    for name in ("client_id", "azp", "cid", "appid"):
        value = claims.get(name)
        if isinstance(value, str) and value:
            return value
    return None


def _host_scopes(auth: Any) -> frozenset[str]:
    if isinstance(auth, Mapping):
        return token_scopes(auth)
    scopes = getattr(auth, "scopes", None)  # starlette.authentication.AuthCredentials
    if isinstance(scopes, (list, tuple, set, frozenset)):
        return frozenset(str(s) for s in scopes)
    return frozenset()
