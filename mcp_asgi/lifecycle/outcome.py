"""What observers learn of a request: frozen records, never the live `RequestScope`.

`RequestScope` is the one owner of a request's fate. At each moment observers care about
(the cancel signal, a side effect, the end, an orphan's late exit) it hands them a
`RequestRecord`: a frozen snapshot of what is known then. Telemetry and the cancellation
log read only these records.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import ClassVar, Literal, NamedTuple

from mcp_asgi.lifecycle.cancel import CancelReason
from mcp_asgi.protocol.jsonrpc import JsonObject, McpError
from mcp_asgi.protocol.request import McpRequest

Outcome = Literal["exited", "orphaned", "too_late"]
"""How a cancelled request ended: its work `exited` within the grace period, was given up as
`orphaned`, or had already finished (`too_late`) when the signal came."""


@dataclass(frozen=True, slots=True)
class SideEffect:
    """An irreversible step a handler declared with `ctx.side_effect(...)`."""

    name: str
    idempotency_key: str | None
    at: float


class RequestRecord(NamedTuple):
    """A request as its scope knew it at one moment (`at`), on the event loop's clock.

    `error` is the JSON-RPC error the client was sent (the handler's, a server-side
    cancel's, or the -32603 that replaced a reply that could not be encoded), and
    `exception` the handler's unexpected exception behind an -32603. Immutable; a named
    tuple because one is made at the end of every request (half the cost of a frozen
    dataclass).
    """

    request: McpRequest
    started: float
    at: float
    reason: CancelReason | None
    signalled_at: float | None
    exited_at: float | None
    outcome: Outcome | None
    side_effects: tuple[SideEffect, ...]
    error: McpError | None
    exception: BaseException | None
    result: JsonObject | None

    @property
    def duration(self) -> float:
        """Seconds from the request's start to this record."""
        return max(0.0, self.at - self.started)

    @property
    def elapsed(self) -> float | None:
        """Seconds from the request's start to its cancel signal, if it had one."""
        if self.signalled_at is None:
            return None
        return max(0.0, self.signalled_at - self.started)

    @property
    def cancel_latency(self) -> float | None:
        """Seconds from the cancel signal until the work exited; None if either is unknown."""
        if self.exited_at is None or self.signalled_at is None:
            return None
        return max(0.0, self.exited_at - self.signalled_at)

    @property
    def after_side_effect(self) -> bool:
        """Whether the cancel signal came after an irreversible step was marked."""
        return signalled_after(self.side_effects, self.signalled_at)


def signalled_after(side_effects: Sequence[SideEffect], signalled_at: float | None) -> bool:
    """Whether a cancel signal at `signalled_at` (None: none came) came after the first of
    `side_effects` was marked."""
    return bool(side_effects) and signalled_at is not None and side_effects[0].at <= signalled_at


NO_ACTIVATION: AbstractContextManager[None] = contextlib.nullcontext()
"""Reusable: a `nullcontext` holds no state."""


class ScopeObserver:
    """Receives a request's lifecycle events as frozen records (telemetry implements it).

    The base class does nothing. `side_effect` may be called from a worker thread; the
    others run on the event loop. `ended` is called exactly once; `orphan_exited` follows
    it when the outcome was `orphaned` and the work finally returned.

    A request's scope calls only what a subclass overrides where nothing else needs the
    call: `activates`, `observes_signal` and `observes_end` say so, worked out from the
    class's own methods when the class is made (not once a request; a subclass does not
    set them, and a hook patched onto the class later is not seen).
    """

    activates: ClassVar[bool] = False
    observes_signal: ClassVar[bool] = False
    observes_end: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        cls.activates = cls.activate is not ScopeObserver.activate
        cls.observes_signal = cls.signalled is not ScopeObserver.signalled
        cls.observes_end = cls.ended is not ScopeObserver.ended

    def activate(self) -> AbstractContextManager[None]:
        """A context the handler runs in (e.g. its span made current)."""
        return NO_ACTIVATION

    def signalled(self, record: RequestRecord) -> None:
        """A cancel signal reached the request."""

    def side_effect(self, record: RequestRecord, effect: SideEffect) -> None:
        """The handler marked an irreversible step."""

    def ended(self, record: RequestRecord) -> None:
        """The request is over: handler exited (or was declared an orphan)."""

    def orphan_exited(self, record: RequestRecord) -> None:
        """An orphaned handler finally exited."""
