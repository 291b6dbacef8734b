"""`DownstreamTools`: a downstream MCP server's tools served as this server's own.

server = McpServer("gateway")
server.add_source(DownstreamTools(Downstream.stdio("files", "npx", [...]), prefix="files_"))

McpServer.running()   ─► the downstream connected (its child process started) for as
                         long as the app runs, then its tools/list read: a name already
                         taken is refused at start (ValueError), as are none by default
tools/list            ─► its tools, selected (include/exclude), named (prefix, names)
tools/call            ─► Downstream.call_tool in the handler's task: the inbound
                         request's cancellation reaches the id minted downstream
its list_changed, or  ─► changed(): read again at the next tools/list, and our
a reconnection           listening clients get notifications/tools/list_changed
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from mcp_asgi.downstream.client import Downstream
from mcp_asgi.downstream.mounted import Mounted, name_of
from mcp_asgi.protocol.jsonrpc import JsonObject
from mcp_asgi.server.context import Context
from mcp_asgi.server.sources import Collision, SourceItem, TaskPolicy, ToolSource


class DownstreamTools(Mounted, ToolSource):
    """The tools of a `Downstream` server, mounted with `server.add_source(...)`.

    - `prefix`: put before each of its tools' names; default: the downstream's name and
      `_` (`files_read_file`). `names` renames single tools (then no prefix).
    - `include`, `exclude`: which tools (`fnmatch` patterns over the downstream's own
      names, or `annotation:<hint>` for a tool whose annotation hint is true, such as
      `annotation:destructiveHint`).
    - `on_collision`: `"refuse"` (default): a name already taken (by a decorated tool or
      another source) stops the app at start with a `ValueError` naming it; `"skip"`:
      the first one keeps the name, logged.
    - `scopes`, `timeout`, `task`: as for every `ToolSource`; the downstream's own `timeout`
      applies too. With `task="optional"` or `"required"` its tools may run as tasks: a
      `tasks/cancel` then cancels the downstream request, and the downstream's questions
      are asked on the task.
    - `start_timeout`: seconds the app's start waits for the downstream's list; past it
      (or when it fails) its tools are listed at the first request instead, logged.

    The server enters the downstream with its own lifespan (`McpServer.running()`): no
    need to enter it yourself; a downstream already entered is left as it is.
    """

    def __init__(
        self,
        downstream: Downstream,
        *,
        prefix: str | None = None,
        include: Sequence[str] | None = None,
        exclude: Sequence[str] = (),
        names: Mapping[str, str] | None = None,
        scopes: Sequence[str] | None = None,
        timeout: float | None = None,
        on_collision: Collision = "refuse",
        task: TaskPolicy = "never",
        start_timeout: float = 10.0,
    ) -> None:
        super().__init__(
            include=include,
            exclude=exclude,
            names=names,
            prefix=f"{name_of(downstream, 'DownstreamTools')}_" if prefix is None else prefix,
            scopes=scopes,
            timeout=timeout,
            on_collision=on_collision,
            task=task,
        )
        self._mount(downstream, start_timeout, "tools")

    async def list_tools(self, ctx: Context) -> Sequence[SourceItem]:
        return await self._list()

    async def call_tool(
        self, tool: SourceItem, arguments: dict[str, Any], ctx: Context
    ) -> JsonObject:
        return await self.downstream.call_tool(tool.name, arguments, ctx)

    async def _list(self) -> list[SourceItem]:
        return [
            SourceItem(
                str(entry["name"]),
                {key: value for key, value in entry.items() if key != "name"},
                _labels(entry),
            )
            for entry in await self.downstream.list_tools()
        ]


def _labels(entry: Mapping[str, Any]) -> frozenset[str]:
    annotations = entry.get("annotations")
    if not isinstance(annotations, Mapping):
        return frozenset()
    return frozenset(f"annotation:{key}" for key, value in annotations.items() if value is True)
