"""Whether the installed anyio's asyncio backend is the one `cheap_scope`'s steps are
written against (anyio 4.16): its cancel scope's fields, the methods those steps hand over
to, and the task states they read and write.

Checked once, at import. An anyio whose backend has moved (a release after the one the
steps were written for) gets anyio's own scope for every handler instead of steps written
for fields that are gone, with a warning (cancels cost more); one that has removed its
`CancelScope`, `TaskState` or `_task_states` altogether fails at import, naming it.
`tests/loop/test_anyio_fit.py` fails on either, so the test run finds out before a user
does; pyproject.toml's floor is `WRITTEN_FOR` (a test keeps them the same).
"""

from __future__ import annotations

import importlib.metadata
import logging
import weakref
from types import ModuleType

import anyio._backends._asyncio as backend

WRITTEN_FOR = "4.16"
"""The anyio release whose asyncio backend `cheap_scope`'s steps copy (pyproject.toml's floor)."""

SCOPE_FIELDS = frozenset(
    {
        "_active",
        "_cancel_called",
        "_cancel_handle",
        "_cancel_reason",
        "_cancelled_caught",
        "_cancelling_at_enter",
        "_child_scopes",
        "_deadline",
        "_host_task",
        "_parent_scope",
        "_pending_uncancellations",
        "_shield",
        "_tasks",
        "_timeout_handle",
    }
)
"""The fields of anyio's asyncio `CancelScope` that the steps read and write (its slots)."""

SCOPE_METHODS = ("_deliver_cancellation", "_restart_cancellation_in_parent")
"""anyio's own steps that the cheap ones hand over to."""

_STATE_FIELDS = frozenset({"parent_id", "cancel_scope"})


def slots_of(cls: type) -> frozenset[str]:
    """Every slot `cls` and its bases declare."""
    names: set[str] = set()
    for klass in cls.__mro__:
        slots = klass.__dict__.get("__slots__", ())
        names.update((slots,) if isinstance(slots, str) else slots)
    return frozenset(names)


def misfits(backend: ModuleType) -> list[str]:
    """What of the above `backend` (anyio's `_backends._asyncio`) lacks: empty if it fits."""
    missing: list[str] = []
    scope = getattr(backend, "CancelScope", None)
    if not isinstance(scope, type):
        return ["CancelScope"]
    missing += sorted(SCOPE_FIELDS - slots_of(scope))
    missing += [name for name in SCOPE_METHODS if not callable(getattr(scope, name, None))]
    state = getattr(backend, "TaskState", None)
    if not isinstance(state, type) or not slots_of(state) >= _STATE_FIELDS:
        missing.append("TaskState")
    states = getattr(backend, "_task_states", None)
    if not isinstance(states, weakref.WeakKeyDictionary) or not hasattr(states, "_remove"):
        missing.append("_task_states")
    if not callable(getattr(backend, "is_anyio_cancellation", None)):
        missing.append("is_anyio_cancellation")
    return missing


def _anyio_version() -> str:
    try:
        return importlib.metadata.version("anyio")
    except importlib.metadata.PackageNotFoundError:  # pragma: no cover - (a source tree)
        return "unknown"


MISSING = misfits(backend)
FITS = not MISSING
"""Whether `cheap_scope` makes its own scopes (else anyio's)."""

if not FITS:  # pragma: no cover - the installed anyio fits (tests/loop/test_anyio_fit.py)
    logging.getLogger("mcp_asgi").warning(
        "anyio %s's asyncio cancel scope is not the one mcp_asgi's request scopes are "
        "written for (anyio %s: %s missing): request handlers run under anyio's own "
        "cancel scope, which costs more per cancel; mcp_asgi is tested with anyio %s",
        _anyio_version(),
        WRITTEN_FOR,
        ", ".join(MISSING),
        WRITTEN_FOR,
    )
