"""`cancel_from_outside`: a task's anyio cancel scope cancelled from another task (the
watcher cancelling its handler) is anyio's own cancellation: delivered to the tasks inside
the scope, held back by a shielded scope in them, swallowed by the scope it came from; and
the task that cancels is still the running task afterwards. Run on both paths (on the
plain-anyio path it is `scope.cancel()`)."""

from __future__ import annotations

import asyncio

import anyio
import anyio.lowlevel
import pytest

from mcp_asgi._loop import cancel_from_outside, drop_redelivery, new_cancel_scope


async def until_cancelled(notes: list[str], note: str) -> None:
    """Waits until cancelled; notes `note` when it is, and lets the cancellation go on."""
    try:
        await anyio.sleep_forever()
    except anyio.get_cancelled_exc_class():
        notes.append(note)
        raise


async def test_the_tasks_inside_the_scope_are_cancelled_and_the_scope_swallows_it() -> None:
    scope = new_cancel_scope()
    entered = anyio.Event()
    notes: list[str] = []

    async def handler() -> None:
        with scope:
            entered.set()
            await until_cancelled(notes, "cancelled")
        notes.append("after the scope")

    async with anyio.create_task_group() as tg:
        tg.start_soon(handler)
        await entered.wait()
        me = asyncio.current_task()
        cancel_from_outside(scope)
        assert asyncio.current_task() is me  # the canceller is the running task again
        assert scope.cancel_called
    assert notes == ["cancelled", "after the scope"]
    assert scope.cancelled_caught


async def test_a_shielded_step_inside_the_scope_completes_before_the_cancel_lands() -> None:
    scope = new_cancel_scope()
    in_step, release = anyio.Event(), anyio.Event()
    notes: list[str] = []

    async def handler() -> None:
        with scope:
            with anyio.CancelScope(shield=True):
                in_step.set()
                await release.wait()
                await anyio.lowlevel.checkpoint()  # inside the shield: not cancelled
                notes.append("step completed")
            await until_cancelled(notes, "cancelled after the step")
        notes.append("after the scope")

    async with anyio.create_task_group() as tg:
        tg.start_soon(handler)
        await in_step.wait()
        cancel_from_outside(scope)
        for _ in range(5):  # turns of the loop in which a cancel must not reach the step
            await anyio.lowlevel.checkpoint()
        assert notes == []
        release.set()
    assert notes == ["step completed", "cancelled after the step", "after the scope"]


async def test_a_scope_not_entered_yet_is_cancelled_when_it_is() -> None:
    scope = new_cancel_scope()
    cancel_from_outside(scope)
    with scope:
        await anyio.sleep_forever()
    assert scope.cancelled_caught


@pytest.mark.fast_paths
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_a_left_scope_has_no_redelivery_pending_once_dropped() -> None:
    """anyio's retry of the delivery (pending after a cancel while a task was inside) is
    dropped once the scope is left: cancelled, never run."""
    scope = new_cancel_scope()
    entered = anyio.Event()
    pending: list[asyncio.Handle | None] = []

    async def handler() -> None:
        with scope:
            entered.set()
            await anyio.sleep_forever()
        pending.append(getattr(scope, "_cancel_handle", None))  # the retry, not run yet
        drop_redelivery(scope)

    async with anyio.create_task_group() as tg:
        tg.start_soon(handler)
        await entered.wait()
        cancel_from_outside(scope)
    [retry] = pending
    assert retry is not None
    assert retry.cancelled()
    assert getattr(scope, "_cancel_handle", "gone") is None
