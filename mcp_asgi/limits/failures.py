"""`AuthFailures`: how many refused access tokens a client may send (`auth_failure_rate`)."""

from __future__ import annotations

import time
from collections.abc import Callable

from starlette.types import Scope

from mcp_asgi.limits.bucket import Buckets
from mcp_asgi.limits.clients import TooManyRequests, client_key


class AuthFailures:
    """A token bucket per client (its network, as `client_key` keys an anonymous client: a
    request whose token is being verified has no principal yet) spent before each token is
    verified and given back when it was not refused: past the burst, a client that keeps
    sending bad tokens gets 429 before its tokens reach the authorization server. The
    `FailureBudget` of `Authenticator`."""

    def __init__(
        self,
        *,
        rate: float,
        burst: int,
        ipv4_prefix: int = 32,
        ipv6_prefix: int = 64,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._buckets = Buckets(rate=rate, burst=burst, clock=clock)
        self._ipv4_prefix = ipv4_prefix
        self._ipv6_prefix = ipv6_prefix

    def spend(self, asgi_scope: Scope) -> str:
        """One refusal more for the request's client; 429 when its budget is spent.
        Returns the client's key (worked out once: `refund` takes it)."""
        client = client_key(
            asgi_scope, ipv4_prefix=self._ipv4_prefix, ipv6_prefix=self._ipv6_prefix
        )
        wait = self._buckets.take(client)
        if wait:
            raise TooManyRequests("too many refused access tokens", wait, "auth_failure_rate")
        return client

    def refund(self, client: str) -> None:
        """The token of `client` (`spend`'s key) was not refused: give its unit back."""
        self._buckets.refund(client)
