"""The protected MCP server of the authorization tests, and the apps that serve it."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Security
from fastapi.security import SecurityScopes
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request

from mcp_asgi import Context, McpMiddleware, McpServer, McpSettings
from mcp_asgi.auth import Principal

from ..helpers import Otel, host_app


class Ran:
    """What handlers ran (to show that a refused request ran nothing)."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def __call__(self, name: str) -> None:
        self.calls.append(name)


def admin_principal(security_scopes: SecurityScopes, request: Request) -> Principal:
    """A security dependency: the verified principal, which has the scopes asked for (the
    endpoint checked them before the call)."""
    principal = Principal.of(request)
    assert principal is not None
    assert security_scopes.scopes == ["admin"]
    assert principal.has_scopes(*security_scopes.scopes)
    return principal


def protected_server(ran: Ran) -> McpServer:
    """Tools, resources and prompts with scopes; `tools:read` by default."""
    server = McpServer("protected", default_scopes=["tools:read"])

    @server.tool()
    async def whoami(ctx: Context) -> dict[str, Any]:
        """Who is calling (the default scope)."""
        ran("whoami")
        principal = ctx.principal
        assert principal is not None
        return {
            "subject": principal.subject,
            "scopes": sorted(principal.scopes),
            "client_id": principal.client_id,
            "issuer": principal.issuer,
            "source": principal.source,
            "aud": principal.claims.get("aud"),
        }

    @server.tool(scopes=["notes:write"])
    async def write_note(text: str) -> str:
        """Needs notes:write (which `notes` covers)."""
        ran("write_note")
        return f"wrote {text}"

    @server.tool(scopes=["admin"])
    async def purge() -> str:
        """Needs admin."""
        ran("purge")
        return "purged"

    @server.tool()
    async def secured(
        user: Annotated[Principal, Security(admin_principal, scopes=["admin"])],
    ) -> str:
        """A FastAPI Security dependency with scopes: they are the tool's too."""
        ran("secured")
        return f"secured for {user.subject}"

    @server.tool(scopes=["billing"])
    async def bill() -> str:
        """Needs billing, which the authorization server never grants."""
        ran("bill")
        return "billed"

    @server.tool(scopes=[])
    async def public() -> str:
        """Needs no scope of its own."""
        ran("public")
        return "public"

    @server.tool()
    async def ask(ctx: Context) -> str:
        """Asks the user a question (MRTR): its requestState is bound to the principal."""
        ran("ask")
        answer = await ctx.elicit("Your name?", {"type": "object", "properties": {}})
        return f"answered {answer.action}"

    @server.resource("notes://{note_id}", scopes=["notes"])
    async def note(note_id: str) -> str:
        """A note (needs notes)."""
        ran("note")
        return f"note {note_id}"

    @server.resource("secret://vault", scopes=["admin"])
    async def vault() -> str:
        """Needs admin."""
        ran("vault")
        return "secret"

    @server.prompt(scopes=["notes"])
    def summarize(topic: str) -> str:
        """Needs notes."""
        ran("summarize")
        return f"Summarize {topic}"

    return server


def protected_app(
    server: McpServer, otel: Otel | None = None, *, cors: bool = False, **settings: Any
) -> Any:
    """`server` behind McpMiddleware with `settings`, optionally behind the CORS recipe."""
    app: Any = McpMiddleware(
        host_app(),
        server=server,
        settings=McpSettings(**settings),
        tracer_provider=otel.tracer_provider if otel else None,
        meter_provider=otel.meter_provider if otel else None,
    )
    if cors:
        app = CORSMiddleware(
            app,
            allow_origins=["https://app.example"],
            allow_methods=["POST", "GET", "DELETE"],
            allow_headers=["*"],
            expose_headers=["WWW-Authenticate", "Mcp-Session-Id"],
        )
    return app
