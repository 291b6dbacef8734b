"""Protected Resource Metadata (RFC 9728): the document, where it is served, and
`ProtectedResourceMetadata`, which serves it from an outer app.

Clients find the authorization server through this document: first from the
`resource_metadata` of a 401 challenge, then at the path-inserted well-known URI
(`/.well-known/oauth-protected-resource/<mcp path>`), then at the root one
(`/.well-known/oauth-protected-resource`). `McpMiddleware` serves both (with auth on) when
the MCP app is the outermost app; when it is mounted under a prefix (`Mount("/api", app)`,
`root_path`), requests for `/.well-known/...` never reach it, and the outer app serves them
with `ProtectedResourceMetadata`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Final, Protocol
from urllib.parse import urlsplit, urlunsplit

from starlette.types import ASGIApp, Receive, Scope, Send

from mcp_asgi.auth.config import AuthSettings

WELL_KNOWN: Final = "/.well-known/oauth-protected-resource"


def metadata_url(resource: str) -> str:
    """The path-inserted Protected Resource Metadata URL of a resource URL."""
    parts = urlsplit(resource)
    path = parts.path.rstrip("/")
    return urlunsplit((parts.scheme, parts.netloc, WELL_KNOWN + path, "", ""))


def metadata_paths(resource: str) -> frozenset[str]:
    """The paths the document is served at: path-inserted, and the root one."""
    return frozenset({urlsplit(metadata_url(resource)).path, WELL_KNOWN})


class MetadataDocument:
    """The Protected Resource Metadata of one endpoint, served at `paths`.

    `scopes` is called per request: the scopes the endpoint requires plus those its
    tools, resources and prompts declare (`scopes_supported`), which may change at runtime.
    """

    def __init__(
        self,
        resource: str,
        issuers: Iterable[str],
        scopes: Callable[[], Iterable[str]],
        *,
        name: str | None = None,
    ) -> None:
        self.resource = resource
        self.issuers = tuple(issuers)
        if not self.issuers:
            raise ValueError("Protected Resource Metadata needs at least one issuer")
        self.paths = metadata_paths(resource)
        self.url = metadata_url(resource)
        self._scopes = scopes
        self._name = name

    def document(self) -> dict[str, object]:
        """The metadata document (RFC 9728 §2)."""
        document: dict[str, object] = {
            "resource": self.resource,
            "authorization_servers": list(self.issuers),
            "scopes_supported": sorted(set(self._scopes())),
            "bearer_methods_supported": ["header"],
        }
        if self._name:
            document["resource_name"] = self._name
        return document

    async def serve(self, asgi_scope: Scope, send: Send) -> None:
        """Answer a request for one of `paths`: GET/HEAD the document (readable from any
        origin: it is public), OPTIONS a CORS preflight, anything else 405."""
        method = asgi_scope["method"]
        cors = [(b"access-control-allow-origin", b"*")]
        if method == "OPTIONS":
            headers = [
                *cors,
                (b"access-control-allow-methods", b"GET, HEAD, OPTIONS"),
                (b"access-control-allow-headers", b"*"),
                (b"access-control-max-age", b"600"),
            ]
            await _send(send, 204, b"", headers)
            return
        if method not in ("GET", "HEAD"):
            await _send(send, 405, b"", [(b"allow", b"GET, HEAD, OPTIONS")])
            return
        body = json.dumps(self.document()).encode()
        headers = [
            (b"content-type", b"application/json"),
            (b"cache-control", b"public, max-age=300"),
            *cors,
        ]
        await _send(send, 200, b"" if method == "HEAD" else body, headers, length=len(body))


async def _send(
    send: Send,
    status: int,
    body: bytes,
    headers: list[tuple[bytes, bytes]],
    *,
    length: int | None = None,
) -> None:
    size = str(len(body) if length is None else length).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [*headers, (b"content-length", size)],
        }
    )
    await send({"type": "http.response.body", "body": body})


class _ScopedServer(Protocol):
    @property
    def name(self) -> str: ...
    def declared_scopes(self) -> frozenset[str]: ...


class _Sectioned(Protocol):
    """`McpSettings`, seen from here: it has an authorization section."""

    @property
    def auth(self) -> AuthSettings: ...


def document_of(auth: AuthSettings, server: _ScopedServer) -> MetadataDocument:
    """The metadata document of the endpoint `auth` configures for `server`."""
    resource = auth.resource
    if not resource:
        raise ValueError("Protected Resource Metadata needs McpSettings.auth_resource")
    required = auth.required_scopes
    return MetadataDocument(
        resource,
        auth.issuers,
        lambda: {*required, *server.declared_scopes()},
        name=server.name,
    )


class ProtectedResourceMetadata:
    """ASGI middleware for the *outer* app when the MCP app is mounted under a prefix:
    serves the endpoint's Protected Resource Metadata at its well-known URIs (path-inserted
    from `settings.auth_resource`, and the root one); everything else goes to `app`.

        mcp_app = FastAPI()
        mcp_app.add_middleware(McpMiddleware, server=mcp, settings=settings)
        app = Starlette(routes=[Mount("/api", mcp_app)])
        app.add_middleware(ProtectedResourceMetadata, server=mcp, settings=settings)

    Give it the same `McpSettings` and `McpServer` as the `McpMiddleware`.
    """

    def __init__(self, app: ASGIApp, *, server: _ScopedServer, settings: _Sectioned) -> None:
        self.app = app
        self.metadata = document_of(settings.auth, server)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve the metadata at its paths; pass everything else to the app."""
        if scope["type"] == "http" and scope["path"] in self.metadata.paths:
            await self.metadata.serve(scope, send)
        else:
            await self.app(scope, receive, send)
