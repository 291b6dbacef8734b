"""A task is bound to the principal that created it: another principal's tasks/get,
tasks/update and tasks/cancel see an unknown task (-32602), as for a made-up id."""

from __future__ import annotations

from starlette.applications import Starlette

from mcp_asgi import McpMiddleware, McpSettings
from mcp_asgi.testing import serve

from .apps import TaskClient, task_server, with_users


async def test_another_principal_sees_no_task() -> None:
    """alice's task is hers: bob gets -32602 for each tasks/* (the same as an unknown id)
    and the task runs on; alice reads and cancels it."""
    mcp = McpMiddleware(
        Starlette(), server=task_server(), settings=McpSettings(auth_host_identity=True)
    )
    with serve(with_users(mcp), timeout_graceful_shutdown=1) as live:
        alice, bob = TaskClient(live.url, "alice"), TaskClient(live.url, "bob")
        task_id = await alice.start("sleepy", seconds=30, label="hers")
        calls: list[tuple[str, dict[str, object]]] = [
            ("tasks/get", {}),
            ("tasks/update", {"inputResponses": {}}),
            ("tasks/cancel", {}),
        ]
        for method, params in calls:
            refused = await bob.rpc(method, task_id, **params)
            assert refused["error"]["code"] == -32602, (method, refused)
            assert task_id not in refused["error"]["message"]
        assert (await alice.get(task_id))["status"] == "working"
        await alice.rpc("tasks/cancel", task_id)
        assert (await alice.until(task_id, "cancelled"))["status"] == "cancelled"
