"""`ScopeObserver`: what a request scope tells about its lifecycle (telemetry listens)."""

from __future__ import annotations

import contextlib
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mcp_asgi.lifecycle.scope import RequestScope


@dataclass(frozen=True, slots=True)
class SideEffect:
    """An irreversible step a handler declared with `ctx.side_effect(...)`."""

    name: str
    idempotency_key: str | None
    at: float


class ScopeObserver:
    """Receives a request scope's lifecycle events (telemetry implements it). No-op base.

    `side_effect` may be called from a worker thread; the others run on the event loop.
    `ended` is called exactly once; `orphan_exited` follows it when the outcome was
    `orphaned` and the work finally returned.
    """

    def activate(self) -> AbstractContextManager[None]:
        """A context the handler runs in (e.g. its span made current)."""
        return contextlib.nullcontext()

    def signalled(self, scope: RequestScope) -> None:
        """A cancel signal reached the scope."""

    def side_effect(self, scope: RequestScope, effect: SideEffect) -> None:
        """The handler marked an irreversible step."""

    def ended(self, scope: RequestScope) -> None:
        """The request is over: handler exited (or was declared an orphan)."""

    def orphan_exited(self, scope: RequestScope) -> None:
        """An orphaned handler finally exited."""
