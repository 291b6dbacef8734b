"""What every source mounted from a downstream shares (`DownstreamTools`,
`DownstreamPrompts`, `DownstreamResources`): the downstream entered with the server (its
connection lives with the app's lifespan, shared by every source on it), the list read
at start within `start_timeout` (so a name taken is refused before the first request),
and the downstream's list changes of the source's kind relayed as `changed()`."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager

import anyio

from mcp_asgi._loggers import downstream_logger as logger
from mcp_asgi.downstream.client import Downstream
from mcp_asgi.server.context import Context
from mcp_asgi.server.sources import SourceItem


class Mounted:
    """Mixed in before the source class (`ToolSource`, `PromptSource`,
    `ResourceSource`): `_mount` in `__init__`, `_list` reads the downstream."""

    downstream: Downstream
    _start_timeout: float
    _what: str
    changed: Callable[[], None]

    def _mount(self, downstream: Downstream, start_timeout: float, family: str) -> None:
        owner = type(self).__name__
        name_of(downstream, owner)
        if start_timeout <= 0:
            raise ValueError(f"{owner}: start_timeout must be positive")
        self.downstream = downstream
        self._start_timeout = start_timeout
        self._what = family
        downstream.on_list_changed(family, self.changed)

    async def _list(self) -> Sequence[SourceItem]:
        raise NotImplementedError

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """The downstream's connection, for as long as the server runs."""
        if self.downstream.running:
            yield
            return
        async with self.downstream:
            yield

    async def list_at_start(self) -> Sequence[SourceItem] | None:
        with anyio.move_on_after(self._start_timeout):
            return await self._list()
        logger.warning(
            "downstream %r did not list its %s within %s s of the start: they will be "
            "listed at the first request",
            self.downstream.name,
            self._what,
            self._start_timeout,
        )
        return None

    async def list_items(self, ctx: Context) -> Sequence[SourceItem]:
        return await self._list()


def name_of(downstream: Downstream, owner: str) -> str:
    """The downstream's name, checked to be a `Downstream`'s (TypeError naming `owner`)."""
    if not isinstance(downstream, Downstream):
        raise TypeError(f"{owner} takes a Downstream")
    return downstream.name


def named_items(entries: Sequence[dict[str, object]]) -> list[SourceItem]:
    """Tools or prompts as a downstream lists them: by name, the rest as definition."""
    return [
        SourceItem(str(entry["name"]), {k: v for k, v in entry.items() if k != "name"})
        for entry in entries
    ]
