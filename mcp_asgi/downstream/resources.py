"""`DownstreamResources`: a downstream MCP server's resources and resource templates
served as this server's own.

server.add_source(DownstreamResources(files))                      # its URIs as they are
server.add_source(DownstreamResources(files, prefix="files+"))     # files+file:///a

resources/list,       ─► its resources and templates, selected (include/exclude over its
resources/templates/     own URIs), their URIs as they are or prefixed (names, prefix)
list
resources/read        ─► Downstream.read_resource of its own URI, in the handler's task:
                         the inbound request's cancellation reaches the id minted
                         downstream. The URI is routed to the source listing it, else
                         to one whose template matches it, else to one whose prefix
                         it starts with
its list_changed, or  ─► changed(): read again at the next list, and our listening
a reconnection           clients get notifications/resources/list_changed
with subscribe=True   ─► the downstream subscribed to what it lists (kept while it runs);
                         its resources/updated ─► updated(): our clients subscribed to
                         the URI (as we expose it) get notifications/resources/updated
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from mcp_asgi.downstream.client import Downstream
from mcp_asgi.downstream.mounted import Mounted, name_of
from mcp_asgi.protocol.jsonrpc import JsonObject
from mcp_asgi.server.context import Context
from mcp_asgi.server.sources import Collision, ResourceSource, SourceItem


class DownstreamResources(Mounted, ResourceSource):
    """The resources and resource templates of a `Downstream` server, mounted with
    `server.add_source(...)`.

    - `prefix`: put before each of its URIs (and templates); default `""`: its URIs as
      they are, so that the URIs its tools return (resource links) can be read through
      this server. A prefix ending a scheme, such as `"files+"` (`files+file:///a`),
      keeps two downstreams' URIs apart; `names` maps single URIs.
    - `include`, `exclude`: `fnmatch` patterns over its own URIs (templates: their
      `uriTemplate`).
    - `on_collision`: `"refuse"` (default): a URI already taken (by a decorated resource
      or another source's) stops the app at start; `"skip"`: the first keeps it, logged.
    - `subscribe`: keep the downstream subscribed to every resource it lists (and this
      source selects) while it runs, so that its `notifications/resources/updated` reach
      the clients subscribed to that URI here (`resources/subscribe` in a 2025-era
      session, `resourceSubscriptions` of a `subscriptions/listen` stream); default
      False: updates are not relayed.
    - `scopes`, `start_timeout`: as for `DownstreamTools`.
    """

    def __init__(
        self,
        downstream: Downstream,
        *,
        prefix: str = "",
        include: Sequence[str] | None = None,
        exclude: Sequence[str] = (),
        names: Mapping[str, str] | None = None,
        scopes: Sequence[str] | None = None,
        on_collision: Collision = "refuse",
        subscribe: bool = False,
        start_timeout: float = 10.0,
    ) -> None:
        name_of(downstream, "DownstreamResources")
        if "{" in prefix or "}" in prefix:
            raise ValueError("DownstreamResources: prefix cannot hold '{' or '}'")
        super().__init__(
            include=include,
            exclude=exclude,
            names=names,
            prefix=prefix,
            scopes=scopes,
            on_collision=on_collision,
        )
        self._mount(downstream, start_timeout, "resources")
        self._subscribe = subscribe
        if subscribe:
            downstream.on_resource_updated(self._relay_update)

    async def read_resource(self, uri: str, ctx: Context) -> JsonObject:
        """The downstream's result, each content's `uri` as this server exposes it."""
        result = await self.downstream.read_resource(uri, ctx)
        for content in result.get("contents") or ():
            if isinstance(content, dict) and isinstance(content.get("uri"), str):
                content["uri"] = self.exposed_name(SourceItem(content["uri"], {}))
        return result

    def _relay_update(self, uri: str) -> None:
        if self.selection.selects(uri):  # (another source on the downstream may own it)
            self.updated(uri)

    async def _list(self) -> list[SourceItem]:
        resources = await self.downstream.list_resources()
        templates = await self.downstream.list_resource_templates()
        if self._subscribe:
            uris = (str(entry["uri"]) for entry in resources)
            await self.downstream.subscribe_resources(
                [u for u in uris if self.selection.selects(u)]
            )
        return [
            *(SourceItem(str(entry["uri"]), entry) for entry in resources),
            *(SourceItem(str(entry["uriTemplate"]), entry) for entry in templates),
        ]
