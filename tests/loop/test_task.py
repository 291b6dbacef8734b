"""`Task` (the handler's own asyncio task, on asyncio): it runs in a copy of the context
(contextvars) it was made in, as a task of a task group does."""

from __future__ import annotations

import contextvars

import pytest

from mcp_asgi._loop import Task

_var: contextvars.ContextVar[str] = contextvars.ContextVar("_var", default="unset")


@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # Task is asyncio's only
async def test_the_task_runs_in_a_copy_of_the_makers_context() -> None:
    """The task sees what was set before it was made, not what is set after; what it sets
    stays in its own copy."""
    seen: list[str] = []

    async def child() -> None:
        seen.append(_var.get())
        _var.set("child")
        seen.append(_var.get())

    token = _var.set("maker")
    try:
        task = Task(child)
        _var.set("after")
        await task.join()
        assert task.error() is None
        assert seen == ["maker", "child"]
        assert _var.get() == "after"
    finally:
        _var.reset(token)
