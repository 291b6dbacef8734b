"""Per-client limits: who a client is, how fast it may ask, and how much it may hold open.

Owns the client key (the verified principal when the request is authenticated, else the
client's address), the token buckets of `rate_limit`, and the counts of what each client
holds (requests in flight, listen streams, 2025-era sessions, running tasks), and the budget
of refused access tokens (`AuthFailures`). A refusal is a
`TooManyRequests` (429 with `Retry-After`), answered by the middleware like every other
rejection.

Must not import: anything above `mcp_asgi.auth` and `mcp_asgi.protocol` (it sits beside
`mcp_asgi.http`, below the lifecycle, the server and the endpoints).
"""

from mcp_asgi.limits.clients import ClientLimits, Hold, TooManyRequests, client_key
from mcp_asgi.limits.failures import AuthFailures

__all__ = ["AuthFailures", "ClientLimits", "Hold", "TooManyRequests", "client_key"]
