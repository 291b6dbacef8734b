"""Authorization: the endpoint as an OAuth 2.1 resource server (MCP authorization, RFC 9728,
RFC 8707, RFC 6750), and the principal every request is bound to.

    config         AuthSettings: the settings' authorization section
    principal      Principal; where a request's principal lives in the ASGI scope; the
                   key that binds handles (sessions, requestState) to it; the scope
                   hierarchy rule
    verifier       the TokenVerifier protocol and InvalidToken
    jwt            JwtVerifier: JWT access tokens against the issuers' JWKS (PyJWT)
    introspection  IntrospectionVerifier: opaque tokens through RFC 7662 (httpx)
    discovery      authorization-server metadata and JSON over HTTP (httpx)
    guard          Authenticator: the bearer token or the host app's identity, the 401,
                   400 and 403 challenges
    verifications  one verification per token at once, within the client's budget of
                   refused tokens (the FailureBudget protocol, auth_failure_rate)
    metadata       Protected Resource Metadata (RFC 9728) and ProtectedResourceMetadata,
                   the well-known documents for an outer app

Imports only `mcp_asgi.protocol` (its errors and header reading) and `mcp_asgi._loggers`;
never http, lifecycle, telemetry, input, bus, server, settings, legacy, the endpoints or
the middleware: everything above it passes in plain values (`AuthSettings`, which
`McpSettings.auth` makes; the scopes a server declares). PyJWT and httpx (the
`mcp-asgi[auth]` extra) are imported only when a verifier that needs them is built.
"""

from mcp_asgi.auth.metadata import ProtectedResourceMetadata
from mcp_asgi.auth.principal import Principal
from mcp_asgi.auth.verifier import InvalidToken, TokenVerifier

__all__ = ["InvalidToken", "Principal", "ProtectedResourceMetadata", "TokenVerifier"]
