"""Tasks kept in one process's memory while the server runs several workers: a WARNING at
start-up, and the "unknown task" error says what to configure."""

from __future__ import annotations

import logging
import os
import sys

import pytest
from starlette.applications import Starlette

from mcp_asgi import McpMiddleware, McpServer
from mcp_asgi.tasks.workers import several_workers
from mcp_asgi.testing import serve

from .apps import TaskClient, task_server

WARNING = "may run as tasks, but tasks are kept in this process's memory"
HINT = (
    "unknown task (or expired); if this server runs on several workers or replicas, it "
    "needs a shared store for its tasks (MCP_BUS_URL=redis://...)"
)


@pytest.mark.parametrize(
    ("argv", "environ", "seen"),
    [
        (["uvicorn", "app:app"], {}, None),
        (["uvicorn", "app:app", "--workers", "4"], {}, "--workers 4 on the command line"),
        (["uvicorn", "app:app", "--workers", "1"], {}, None),
        (["gunicorn", "-w", "2", "app:app"], {}, "--workers 2 on the command line"),
        (["hypercorn", "-w3", "app:app"], {}, "--workers 3 on the command line"),
        (["granian", "--workers=2", "app:app"], {}, "--workers 2 on the command line"),
        (["uvicorn", "app:app"], {"WEB_CONCURRENCY": "4"}, "WEB_CONCURRENCY=4"),
        (["uvicorn", "app:app"], {"WEB_CONCURRENCY": "1"}, None),
        (["gunicorn"], {"GUNICORN_CMD_ARGS": "--bind :80 --workers 3"}, "--workers 3 in "),
        (["gunicorn"], {"GUNICORN_CMD_ARGS": "'unbalanced"}, None),
    ],
)
def test_several_workers_are_seen(
    argv: list[str], environ: dict[str, str], seen: str | None
) -> None:
    """What several_workers() reads: WEB_CONCURRENCY, and a workers option on the command
    line or in GUNICORN_CMD_ARGS."""
    found = several_workers(argv, environ)
    assert found == seen if seen is None else (found or "").startswith(seen)


@pytest.mark.parametrize("tasks", [True, False])
async def test_one_of_several_workers_without_a_shared_store(
    clean_env: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, tasks: bool
) -> None:
    """A worker (WEB_CONCURRENCY=2) of a server with task-capable tools and no MCP_BUS_URL
    logs the WARNING at start-up, once; a tasks/cancel of a task it does not know answers
    -32602 with the hint. A server without such tools says nothing. (A worker of
    `uvicorn --workers 2` is seen by its argv, which it keeps: the cases above.)"""
    clean_env.setenv("WEB_CONCURRENCY", "2")
    server = task_server() if tasks else McpServer("no-tasks")
    with serve(McpMiddleware(Starlette(), server=server)) as live:
        refused = await TaskClient(live.url).rpc("tasks/cancel", "made-up-task-id")
    warnings = [r for r in caplog.records if WARNING in r.getMessage()]
    if not tasks:
        assert warnings == []
        return
    [warning] = warnings
    assert warning.levelno == logging.WARNING
    assert warning.getMessage().startswith("tools of server 'tasks-test' may run as tasks")
    assert "(WEB_CONCURRENCY=2)" in warning.getMessage()
    assert "Configure a shared store: MCP_BUS_URL=redis://..." in warning.getMessage()
    assert refused["error"]["code"] == -32602
    assert refused["error"]["message"] == f"Invalid params: {HINT}"


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """No MCP_* (a shared store) and no worker count from the test's own environment."""
    for key in list(os.environ):
        if key.startswith("MCP_") or key in ("WEB_CONCURRENCY", "GUNICORN_CMD_ARGS"):
            monkeypatch.delenv(key)
    monkeypatch.setattr(sys, "argv", ["uvicorn", "app:app"])
    return monkeypatch
