"""`AuthSettings`: the authorization section of the settings, as the auth layer reads it.

`McpSettings.auth` makes it from the `auth_*` fields (each field here is that name without
the prefix); the wiring and the Protected Resource Metadata take it alone.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal


@dataclass(frozen=True, slots=True)
class AuthSettings:
    """Authorization on one endpoint: bearer tokens (`resource` set), the host app's
    identity (`host_identity`), or off. See docs/configuration.md, "Authorization"."""

    resource: str | None
    issuers: tuple[str, ...]
    required_scopes: tuple[str, ...]
    verification: Literal["jwt", "introspection"]
    audience: str | None
    jwks_url: str | None
    algorithms: tuple[str, ...]
    token_types: tuple[str, ...]
    leeway: float
    jwks_min_refetch: float
    introspection_url: str | None
    client_id: str | None
    client_secret: str | None = field(repr=False)  # never in a repr
    cache_ttl: float
    refusal_cache_ttl: float
    failure_rate: float | None
    failure_burst: int
    host_identity: bool

    @property
    def enforced(self) -> bool:
        """Whether anything checks who calls: bearer tokens or the host app's identity."""
        return self.resource is not None or self.host_identity
