"""JSON over HTTP for the verifiers (one httpx client, kept), and authorization-server
metadata discovery (RFC 8414, OpenID Connect Discovery)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any, Final
from urllib.parse import urlsplit, urlunsplit

from mcp_asgi.auth.verifier import VerifierUnavailable

TIMEOUT: Final = 5.0
INSTALL: Final = "pip install 'mcp-asgi[auth]'"


def require_httpx() -> Any:
    """The httpx module, or an ImportError that says which extra to install."""
    try:
        import httpx
    except ImportError as exc:  # pragma: no cover - the extra is installed in tests
        raise ImportError(f"token verification needs httpx: {INSTALL}") from exc
    return httpx


class HttpJson:
    """JSON over HTTP through httpx. Inside `async with` (the app's lifespan) one client is
    kept for every call: a client per call builds a new TLS context each time (~37 ms of
    CPU) and opens a new connection. Outside (no lifespan, where nothing could close a kept
    client), each call has its own."""

    def __init__(self) -> None:
        self._keep = False
        self._client: Any = None  # made at the first call (none if nothing is verified)

    async def __aenter__(self) -> HttpJson:
        self._keep = True
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        client, self._client, self._keep = self._client, None, False
        if client is not None:
            await client.aclose()

    @asynccontextmanager
    async def _http(self) -> AsyncIterator[Any]:
        if self._keep:
            if self._client is None:
                self._client = _new_client()
            yield self._client
        else:
            async with _new_client() as client:
                yield client

    async def get_json(self, url: str) -> dict[str, Any]:
        """GET a JSON object; `VerifierUnavailable` on any failure."""
        try:
            async with self._http() as http:
                response = await http.get(url, headers={"accept": "application/json"})
            response.raise_for_status()
            data = response.json()
        except Exception as exc:
            raise VerifierUnavailable(f"GET {url} failed: {type(exc).__name__}") from None
        if not isinstance(data, dict):
            raise VerifierUnavailable(f"GET {url}: not a JSON object")
        return data

    async def post_form(
        self, url: str, form: Mapping[str, str], *, auth: tuple[str, str] | None
    ) -> dict[str, Any]:
        """POST a form, answered by a JSON object; a 400 answer's OAuth error is returned
        as `{"error": ...}`; `VerifierUnavailable` on any other failure."""
        try:
            async with self._http() as http:
                response = await http.post(
                    url, data=dict(form), auth=auth, headers={"accept": "application/json"}
                )
            data = response.json() if response.status_code in (200, 400) else None
        except Exception as exc:
            raise VerifierUnavailable(f"POST {url} failed: {type(exc).__name__}") from None
        if not isinstance(data, dict) or (response.status_code == 400 and "error" not in data):
            raise VerifierUnavailable(f"POST {url}: HTTP {response.status_code}")
        if response.status_code == 400:
            return {"error": str(data["error"])}
        return data


def _new_client() -> Any:
    return require_httpx().AsyncClient(timeout=TIMEOUT, follow_redirects=False)


def metadata_urls(issuer: str) -> list[str]:
    """Where an issuer's metadata may be: OpenID Connect Discovery (appended), then RFC
    8414 (path-inserted)."""
    parts = urlsplit(issuer)
    path = parts.path.rstrip("/")
    oidc = urlunsplit(
        (parts.scheme, parts.netloc, f"{path}/.well-known/openid-configuration", "", "")
    )
    oauth = urlunsplit(
        (parts.scheme, parts.netloc, f"/.well-known/oauth-authorization-server{path}", "", "")
    )
    return [oidc, oauth]


class IssuerMetadata:
    """The metadata of authorization servers, fetched once each (and again after a
    failure)."""

    def __init__(self, http: HttpJson) -> None:
        self._http = http
        self._documents: dict[str, dict[str, Any]] = {}

    async def get(self, issuer: str) -> dict[str, Any]:
        """The issuer's metadata; its `issuer` must be the one configured (RFC 8414 §3.3)."""
        document = self._documents.get(issuer)
        if document is not None:
            return document
        problem = "no metadata"
        for url in metadata_urls(issuer):
            try:
                document = await self._http.get_json(url)
            except VerifierUnavailable as exc:
                problem = str(exc)
                continue
            if str(document.get("issuer", "")).rstrip("/") != issuer.rstrip("/"):
                problem = f"{url} names another issuer"
                continue
            self._documents[issuer] = document
            return document
        raise VerifierUnavailable(f"metadata of {issuer}: {problem}")
