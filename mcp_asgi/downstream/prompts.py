"""`DownstreamPrompts`: a downstream MCP server's prompts served as this server's own.

server.add_source(DownstreamPrompts(files))   # files_<its prompt name>

prompts/list          ─► its prompts, selected (include/exclude), named (prefix, names)
prompts/get           ─► Downstream.get_prompt in the handler's task: the inbound
                         request's cancellation reaches the id minted downstream
its list_changed, or  ─► changed(): read again at the next prompts/list, and our
a reconnection           listening clients get notifications/prompts/list_changed
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from mcp_asgi.downstream.client import Downstream
from mcp_asgi.downstream.mounted import Mounted, name_of, named_items
from mcp_asgi.protocol.jsonrpc import JsonObject
from mcp_asgi.server.context import Context
from mcp_asgi.server.sources import Collision, PromptSource, SourceItem


class DownstreamPrompts(Mounted, PromptSource):
    """The prompts of a `Downstream` server, mounted with `server.add_source(...)`; its
    options as `DownstreamTools`' (`prefix`, default the downstream's name and `_`;
    `names`; `include`/`exclude` over its own names; `scopes`; `on_collision`, default
    `"refuse"`: a name already taken stops the app at start; `start_timeout`)."""

    def __init__(
        self,
        downstream: Downstream,
        *,
        prefix: str | None = None,
        include: Sequence[str] | None = None,
        exclude: Sequence[str] = (),
        names: Mapping[str, str] | None = None,
        scopes: Sequence[str] | None = None,
        on_collision: Collision = "refuse",
        start_timeout: float = 10.0,
    ) -> None:
        name = name_of(downstream, "DownstreamPrompts")
        super().__init__(
            include=include,
            exclude=exclude,
            names=names,
            prefix=f"{name}_" if prefix is None else prefix,
            scopes=scopes,
            on_collision=on_collision,
        )
        self._mount(downstream, start_timeout, "prompts")

    async def get_prompt(
        self, prompt: SourceItem, arguments: dict[str, Any], ctx: Context
    ) -> JsonObject:
        return await self.downstream.get_prompt(prompt.name, arguments, ctx)

    async def _list(self) -> list[SourceItem]:
        return named_items(await self.downstream.list_prompts())
