"""An MCP endpoint protected by OAuth 2.1: tokens from your identity provider, tools that
need scopes, and the caller's identity in handlers (docs/authorization.md).

The endpoint is a resource server: it verifies JWT access tokens issued for it (their
audience is `MCP_AUTH_RESOURCE`) by an issuer it trusts, and publishes its metadata at
/.well-known/oauth-protected-resource/mcp, from which MCP clients find the issuer. Only
settings differ between providers; set them in the environment, then run the factory:

    # Keycloak: an audience mapper adds the endpoint's URL to the client's tokens
    export MCP_AUTH_RESOURCE=https://mcp.example.com/mcp
    export MCP_AUTH_ISSUERS='["https://kc.example.com/realms/tools"]'
    export MCP_AUTH_TOKEN_TYPES='["at+jwt", "JWT"]'      # Keycloak types access tokens JWT

    # Entra ID (v2 tokens): APIs are named by their application id
    export MCP_AUTH_RESOURCE=https://mcp.example.com/mcp
    export MCP_AUTH_ISSUERS='["https://login.microsoftonline.com/<tenant id>/v2.0"]'
    export MCP_AUTH_AUDIENCE=api://<application id>
    export MCP_AUTH_TOKEN_TYPES='["at+jwt", "JWT"]'

    # Auth0: the API's identifier is the endpoint's URL, its token profile RFC 9068
    export MCP_AUTH_RESOURCE=https://mcp.example.com/mcp
    export MCP_AUTH_ISSUERS='["https://<tenant>.auth0.com/"]'   # the trailing slash is the iss

    uvicorn --factory --lifespan on examples.oauth.main:create_app --host 127.0.0.1 --port 8000

The provider must grant the scopes below (`notes`, `notes:write`) as client scopes or
API permissions. Without `MCP_AUTH_*` the app refuses to start, since its tools declare
scopes nobody would check: the error is raised at the app's lifespan startup, which makes
uvicorn exit with `--lifespan on` (under the default `auto`, uvicorn takes a failed
startup for an app without a lifespan and serves every request a 500). The tests run it
against oidc-provider (a certified OpenID provider, tests/authserver) with the official MCP
SDK client's client-credentials flow.
"""

from __future__ import annotations

from fastapi import APIRouter, FastAPI
from pydantic import BaseModel

from mcp_asgi import Context, McpMiddleware, McpServer, McpSettings


class Caller(BaseModel):
    subject: str
    client_id: str | None
    scopes: list[str]


NOTES: list[str] = []

mcp = McpServer("notes", version="1.0.0", default_scopes=["notes"])


@mcp.tool(annotations={"readOnlyHint": True})
async def whoami(ctx: Context) -> Caller:
    """Who is calling: the verified token's subject, client and scopes."""
    principal = ctx.principal
    assert principal is not None  # authorization is on: every call has one
    return Caller(
        subject=principal.subject,
        client_id=principal.client_id,
        scopes=sorted(principal.scopes),
    )


@mcp.tool(annotations={"readOnlyHint": True})
async def list_notes() -> list[str]:
    """The notes (needs `notes`, the server's default scope)."""
    return list(NOTES)


@mcp.tool(scopes=["notes", "notes:write"])
async def add_note(text: str, ctx: Context) -> int:
    """Add a note (needs `notes:write` too); returns how many there are."""
    NOTES.append(f"{text} (by {ctx.principal.subject if ctx.principal else 'nobody'})")
    return len(NOTES)


router = APIRouter()


@router.get("/health")
async def health() -> dict[str, str]:
    """An ordinary route: the middleware protects only the MCP endpoint."""
    return {"status": "ok"}


def create_app(settings: McpSettings | None = None) -> FastAPI:
    """The app, with its MCP settings from the environment (`MCP_*`) unless given."""
    app = FastAPI(title="Notes")
    app.include_router(router)
    app.add_middleware(McpMiddleware, server=mcp, settings=settings or McpSettings())
    return app
