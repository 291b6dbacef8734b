"""The check of anyio's asyncio backend that `cheap_scope`'s steps copy (`_loop.anyio_fit`):
the installed anyio fits, pyproject.toml's floor is the release the steps are written for,
each thing the steps rely on is missed when it moves, and an anyio that does not fit
serves requests under anyio's own scope, cancels included, with a warning."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
import types
import weakref
from pathlib import Path

import anyio
import anyio._backends._asyncio as backend
import pytest

from mcp_asgi._loop import anyio_fit, cheap_scope
from mcp_asgi._loop.cheap_scope import CheapScope

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.fast_paths,
    pytest.mark.skipif(sys.version_info < (3, 11), reason="the cheap steps are for 3.11+"),
]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def test_the_installed_anyio_fits() -> None:
    assert anyio_fit.MISSING == []
    assert anyio_fit.FITS


async def test_a_fitting_anyio_gets_the_cheap_scope() -> None:
    assert isinstance(cheap_scope(), CheapScope)


async def test_the_fields_checked_are_the_fields_the_cheap_scope_sets() -> None:
    scope = cheap_scope()
    made = {n for n in anyio_fit.slots_of(CheapScope) - {"__weakref__"} if hasattr(scope, n)}
    assert made == anyio_fit.SCOPE_FIELDS | {"_state"}


def test_the_dependency_floor_is_the_release_the_steps_are_written_for() -> None:
    # (the dependency's line in [project] dependencies; one anyio line in the file)
    (floor,) = re.findall(r'^\s*"anyio>=([\d.]+),', (ROOT / "pyproject.toml").read_text(), re.M)
    assert floor == anyio_fit.WRITTEN_FOR


def _backend_like_the_installed() -> types.ModuleType:
    """A stand-in for anyio's backend module, with what the installed one has."""
    fake = types.ModuleType("fake_backend")
    fake.CancelScope = backend.CancelScope  # type: ignore[attr-defined]
    fake.TaskState = backend.TaskState  # type: ignore[attr-defined]
    fake._task_states = backend._task_states  # type: ignore[attr-defined]
    fake.is_anyio_cancellation = backend.is_anyio_cancellation  # type: ignore[attr-defined]
    return fake


def test_the_stand_in_fits() -> None:
    assert anyio_fit.misfits(_backend_like_the_installed()) == []


@pytest.mark.parametrize("field", sorted(anyio_fit.SCOPE_FIELDS))
def test_a_scope_field_gone_is_missed(field: str) -> None:
    fake = _backend_like_the_installed()
    slots = tuple(name for name in anyio_fit.SCOPE_FIELDS if name != field)
    fake.CancelScope = type("CancelScope", (), {"__slots__": slots, **_methods()})  # type: ignore[attr-defined]
    assert anyio_fit.misfits(fake) == [field]


def _methods() -> dict[str, object]:
    return {name: getattr(backend.CancelScope, name) for name in anyio_fit.SCOPE_METHODS}


@pytest.mark.parametrize("method", anyio_fit.SCOPE_METHODS)
def test_a_scope_method_gone_is_missed(method: str) -> None:
    fake = _backend_like_the_installed()
    methods = {name: f for name, f in _methods().items() if name != method}
    scope = type("CancelScope", (), {"__slots__": tuple(anyio_fit.SCOPE_FIELDS), **methods})
    fake.CancelScope = scope  # type: ignore[attr-defined]
    assert anyio_fit.misfits(fake) == [method]


def test_the_task_states_moved_are_missed() -> None:
    fake = _backend_like_the_installed()
    fake._task_states = {}  # type: ignore[attr-defined]
    assert anyio_fit.misfits(fake) == ["_task_states"]
    fake = _backend_like_the_installed()
    fake.TaskState = type("TaskState", (), {"__slots__": ("parent_id",)})  # type: ignore[attr-defined]
    assert anyio_fit.misfits(fake) == ["TaskState"]


def test_the_cancellation_test_gone_is_missed() -> None:
    fake = _backend_like_the_installed()
    del fake.is_anyio_cancellation
    assert anyio_fit.misfits(fake) == ["is_anyio_cancellation"]


def test_no_scope_class_at_all_is_missed() -> None:
    fake = _backend_like_the_installed()
    del fake.CancelScope
    assert anyio_fit.misfits(fake) == ["CancelScope"]


def test_slots_are_read_through_the_bases() -> None:
    base = type("Base", (), {"__slots__": ("a", "b")})
    child = type("Child", (base,), {"__slots__": "c"})
    assert anyio_fit.slots_of(child) == {"a", "b", "c"}
    assert isinstance(backend._task_states, weakref.WeakKeyDictionary)


# An anyio whose backend has moved, as the import sees it: its task states a plain dict
# (anyio's own functions read the module's global, so anyio itself still works).
_UNFIT = textwrap.dedent(
    """
    import anyio, anyio._backends._asyncio as backend
    backend._task_states = {}

    from mcp_asgi import CancelReason
    from mcp_asgi._loop import anyio_fit
    from mcp_asgi._loop.cheap_scope import CheapScope
    from tests.helpers import Probe, drop_mid_call, mcp_app, serving, wait_for
    from tests.servers import outcomes_server

    assert not anyio_fit.FITS and anyio_fit.MISSING == ["_task_states"], anyio_fit.MISSING

    async def main() -> None:
        probe = Probe()
        with serving(mcp_app(outcomes_server(probe), response_mode="json")) as client:
            await drop_mid_call(client, "slow", probe, {})
            await wait_for(probe.exited)
            assert probe.reason is CancelReason.CLIENT_DISCONNECT, probe.reason
            assert (await client.request("tools/list")).status == 200
        print("served")

    anyio.run(main)
    """
)


def test_an_anyio_that_does_not_fit_serves_and_cancels_under_its_own_scope() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _UNFIT], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "served"
    assert "is not the one mcp_asgi's request scopes are written for" in done.stderr
    assert "_task_states missing" in done.stderr


async def test_the_scope_made_where_anyio_does_not_fit_is_anyios_own() -> None:
    from mcp_asgi._loop.cheap_scope import _anyios

    scope = _anyios()
    assert type(scope) is type(anyio.CancelScope())
    assert not isinstance(scope, CheapScope)
