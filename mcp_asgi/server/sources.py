"""Sources: tools, prompts and resources that come from elsewhere than the decorators,
and what the server does alike with every source: choose its items, name them, and relay
changes of its list.

    Source         what every source shares: `include`/`exclude`, `names`/`prefix`,
                   `scopes`, `on_collision`, `changed()`, `running()`, `list_items`
    ToolSource     tools: `list_tools` and `call_tool`, with `timeout` and `task`
    PromptSource   prompts: `get_prompt`
    ResourceSource resources and resource templates: `read_resource`, `own_uri`
    SourceItem     one item (a tool, a prompt, a resource) as its source offers it: its
                   name (a resource: its URI), its definition, its labels; the server
                   exposes it as a `catalogs.ExposedItem`
    Selection      include/exclude selectors over an item's name and labels

Sources so far: the host app's routes (`mcp_asgi.routes.AppRoutes`) and a downstream MCP
server's tools, prompts and resources (`mcp_asgi.downstream`).

The server's side (which tools are exposed, read when, under which names) is
`server/catalogs.py`::

    McpServer.add_source(source) ─► source.list_tools(ctx)  at the first tools/list or
                                    unknown tools/call, again after source.changed()
                                 ─► selected (include/exclude), named (names, prefix)
    tools/call of such a name    ─► source.call_tool(tool, arguments, ctx), in the
                                    handler's task: the request's cancellation reaches it
                                    (with task=: maybe as a task, the way a decorated
                                    tool's task= decides; a task's cancel reaches it too)
    source.changed()             ─► the list is read again at the next tools/list, and
                                    listening clients get notifications/tools/list_changed
    McpServer.running()          ─► every source's running() entered (its connection or
                                    child process lives with the app), then the tools of
                                    a source that can say without a request
                                    (list_at_start) read at once: a name taken is then
                                    refused at start (on_collision="refuse")
"""

from __future__ import annotations

import abc
import re
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import Any, ClassVar, Final, Literal, get_args

from mcp_asgi.protocol.jsonrpc import JsonObject
from mcp_asgi.server.context import Context
from mcp_asgi.server.oauth_scopes import check_scopes

__all__ = [
    "Collision",
    "PromptSource",
    "ResourceSource",
    "Selection",
    "Source",
    "SourceItem",
    "SourceKind",
    "TaskPolicy",
    "ToolSource",
    "tool_name",
]

Collision = Literal["skip", "refuse"]
SourceKind = Literal["tool", "prompt", "resource"]
TaskPolicy = Literal["never", "optional", "required"]
"""When a tool runs as a task (the Tasks extension, docs/tasks.md): `never` (a plain
call), `optional` (a task when the request declares the extension and the work outlasts
the `task_result_window`), `required` (always a task: -32021 for a request that does not
declare the extension)."""

_LABELLED: Final = re.compile(r"([a-z]+):(.*)", re.DOTALL)
_NOT_IN_NAME: Final = re.compile(r"[^A-Za-z0-9_.-]")
_MAX_NAME: Final = 128


@dataclass(frozen=True, slots=True)
class SourceItem:
    """One item as its source offers it: a tool (a `PromptSource`'s prompt, a
    `ResourceSource`'s resource or template).

    - `name`: the source's own name for it (an operation id, a downstream tool's name; a
      resource's URI).
    - `definition`: its list entry apart from the name; a tool's: `inputSchema`
      (required), and any of `description`, `title`, `outputSchema`, `annotations`,
      `icons`, `_meta`.
    - `labels`: what selectors can match besides the name, as `kind:value` strings
      (the routes': `tag:items`, `path:/items/{item_id}`, `method:GET`).
    - `handle`: whatever the source needs to call it; the server never reads it.
    """

    name: str
    definition: Mapping[str, Any]
    labels: frozenset[str] = frozenset()
    handle: Any = field(default=None, compare=False)


class Selection:
    """Which of a source's tools are exposed: `include` (None: all) minus `exclude`.

    A selector is a pattern (`fnmatch`, case-sensitive: `*`, `?`, `[abc]`) matched against
    the tool's name as the source gives it, or `kind:pattern` matched against its labels
    of that kind (`tag:admin`, `path:/items/*`, `method:DELETE`); `name:pattern` names
    the name explicitly. A plain list of names is an explicit list. A resource source's
    selectors are URI patterns only (`file:///docs/*`): no `kind:` is read from them.
    """

    __slots__ = ("_exclude", "_include")

    def __init__(
        self, include: Sequence[str] | None, exclude: Sequence[str], *, labelled: bool = True
    ) -> None:
        self._include = None if include is None else _selectors(include, "include", labelled)
        self._exclude = _selectors(exclude, "exclude", labelled)

    def selects(self, name: str, labels: Iterable[str] = ()) -> bool:
        """Whether a tool of this name and labels is exposed."""
        labels = frozenset(labels)
        if self._include is not None and not any(_matches(s, name, labels) for s in self._include):
            return False
        return not any(_matches(s, name, labels) for s in self._exclude)


class Source(abc.ABC):
    """What every source shares, whatever it offers (`ToolSource`, `PromptSource`,
    `ResourceSource`): which items are exposed (`include`/`exclude`), under which names
    (`names`/`prefix`), the `scopes` using them needs, what a name already taken does
    (`on_collision`), `changed()`, and `running()`. `kind` says what it offers."""

    kind: ClassVar[SourceKind]
    _labelled: ClassVar[bool] = True  # `kind:pattern` selectors (not for URIs: `file:*`)

    def __init__(
        self,
        *,
        include: Sequence[str] | None = None,
        exclude: Sequence[str] = (),
        names: Mapping[str, str] | None = None,
        prefix: str = "",
        scopes: Sequence[str] | None = None,
        on_collision: Collision = "skip",
    ) -> None:
        owner = type(self).__name__
        if on_collision not in ("skip", "refuse"):
            raise ValueError(f"{owner}: on_collision must be 'skip' or 'refuse'")
        if not isinstance(prefix, str):
            raise TypeError(f"{owner}: prefix must be a str")
        renames = dict(names or {})
        if not all(isinstance(k, str) and isinstance(v, str) and v for k, v in renames.items()):
            raise TypeError(f"{owner}: names maps an item's own name to a non-empty str")
        self.selection = Selection(include, exclude, labelled=self._labelled)
        """Which items are exposed."""
        self.scopes = check_scopes(scopes, owner)
        """The scopes using its items needs (None: the server's default)."""
        self.on_collision: Collision = on_collision
        """What a name already taken does: `"skip"` (logged) or `"refuse"` (ValueError)."""
        self._names = renames
        self._prefix = prefix
        self._listeners: list[Callable[[], None]] = []

    @abc.abstractmethod
    async def list_items(self, ctx: Context) -> Sequence[SourceItem]:
        """The items the source offers now (a `ToolSource`: `list_tools`)."""

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """What the source needs while the server runs (a connection, a child process):
        entered by `McpServer.running()`, so it lives with the app's lifespan. Nothing by
        default."""
        yield

    async def list_at_start(self) -> Sequence[SourceItem] | None:
        """The items the source offers when the server starts, if it can tell without a
        request (then names are checked at start); None (the default): read at the first
        request that needs them, with that request's context."""
        return None

    def exposed_name(self, item: SourceItem) -> str:
        """The name (a resource: the URI) the server lists `item` under."""
        return self._names.get(item.name, self._prefix + item.name)

    def changed(self) -> None:
        """The source's list changed: it is read again at the next list request, and
        clients listening for its kind's list changes are told now. Safe from any thread."""
        for listener in list(self._listeners):
            listener()

    def _watch(self, listener: Callable[[], None]) -> None:
        """Call `listener` on every `changed()` (the server that serves the source)."""
        self._listeners.append(listener)


class ToolSource(Source):
    """Where tools come from besides `@server.tool`: subclass it, and add an instance to a
    server with `server.add_source(source)`.
    - `include`, `exclude`: which of its tools are exposed (`Selection`); default: all.
    - `names`: the exposed name of a tool, by the source's name for it; `prefix`: put
      before every other name. A name is made a valid MCP tool name: characters other
      than letters, digits, `_`, `-` and `.` become `_`, and it is cut at 128.
    - `scopes`: the OAuth scopes calling (and listing) its tools needs, with
      authorization on; default: the server's `default_scopes`.
    - `timeout`: seconds after which a call of its tools is cancelled (reason `timeout`).
    - `task`: whether a call of its tools may run as a task (the Tasks extension,
      docs/tasks.md), as `@server.tool(task=...)`: `"never"` (the default), `"optional"`,
      `"required"`. A task's work is cancelled only by `tasks/cancel`, its deadline or
      the server's shutdown, never by its creator's disconnect.
    - `on_collision`: what a name already taken (by a decorated tool, or another source's)
      does. `"skip"` (the default): it is not exposed again, the first one keeps it, and
      the later one is logged (`mcp_asgi.errors`, WARNING). `"refuse"`: the source's first
      read raises `ValueError` naming the tools (at the app's start for a source that
      lists at start, such as `DownstreamTools`; else the first `tools/list` fails with
      that message); a later read (after `changed()`) skips the name, logged at ERROR.

    A source may hold a connection or a process: `running()` is entered by the server's
    `running()` (the app's lifespan, or `serve_stdio`) for every source added before it.
    """

    kind = "tool"

    def __init__(
        self,
        *,
        include: Sequence[str] | None = None,
        exclude: Sequence[str] = (),
        names: Mapping[str, str] | None = None,
        prefix: str = "",
        scopes: Sequence[str] | None = None,
        timeout: float | None = None,
        on_collision: Collision = "skip",
        task: TaskPolicy = "never",
    ) -> None:
        owner = type(self).__name__
        if timeout is not None and timeout <= 0:
            raise ValueError(f"{owner}: timeout must be positive")
        if task not in get_args(TaskPolicy):
            raise ValueError(f"{owner}: task must be one of {get_args(TaskPolicy)}, not {task!r}")
        super().__init__(
            include=include,
            exclude=exclude,
            names=names,
            prefix=prefix,
            scopes=scopes,
            on_collision=on_collision,
        )
        self.timeout = timeout
        """Seconds after which a call of its tools is cancelled, or None."""
        self.task: TaskPolicy = task
        """Whether a call of its tools may run as a task: `"never"`, `"optional"`,
        `"required"`."""

    @abc.abstractmethod
    async def list_tools(self, ctx: Context) -> Sequence[SourceItem]:
        """The tools the source offers now. Called with the context of the request that
        needs them (a `tools/list`, or a `tools/call` of a name not known yet); again
        after `changed()`. An exception is logged and the list stays as it was."""

    @abc.abstractmethod
    async def call_tool(
        self, tool: SourceItem, arguments: dict[str, Any], ctx: Context
    ) -> JsonObject:
        """Call one of its tools, in the handler's task (the request's cancellation and
        deadline reach it), and answer the `tools/call` result (`isError` for a failure
        the model can act on). Another exception becomes an `isError` result, logged."""

    async def list_items(self, ctx: Context) -> Sequence[SourceItem]:
        return await self.list_tools(ctx)

    def exposed_name(self, item: SourceItem) -> str:
        """The name the server lists `item` under (a valid MCP tool name)."""
        return tool_name(super().exposed_name(item))


class PromptSource(Source):
    """Where prompts come from besides `@server.prompt` (`server.add_source(source)`):
    `list_items` gives each prompt as a `SourceItem` (its name; its `prompts/list` entry
    apart from the name as `definition`), `get_prompt` answers a `prompts/get` of one, in
    the handler's task. `include`/`exclude`, `names`/`prefix`, `scopes`, `on_collision`
    as for a `ToolSource`; a name taken by a decorated prompt or another source's is not
    exposed again."""

    kind = "prompt"

    @abc.abstractmethod
    async def get_prompt(
        self, prompt: SourceItem, arguments: dict[str, Any], ctx: Context
    ) -> JsonObject:
        """The `prompts/get` result of one of its prompts."""


class ResourceSource(Source):
    """Where resources and resource templates come from besides `@server.resource`
    (`server.add_source(source)`): `list_items` gives each as a `SourceItem` named by its
    URI (a template: its `uriTemplate`, and `definition` has the key `uriTemplate`), the
    rest of its list entry as `definition`. The exposed URI is `names[uri]`, else
    `prefix + uri` (a prefix such as `"files+"` makes `files+file:///a` of `file:///a`:
    a scheme of its own); `own_uri` maps an exposed URI back. A URI taken by a decorated
    resource or another source's is not exposed again (`on_collision`).
    `read_resource` answers a `resources/read` in the handler's task."""

    kind = "resource"
    _labelled = False
    _updates: tuple[Callable[[str], None], ...] = ()  # (set by _watch_updates)

    @abc.abstractmethod
    async def read_resource(self, uri: str, ctx: Context) -> JsonObject:
        """The `resources/read` result for `uri` (the source's own URI)."""

    def own_uri(self, uri: str) -> str | None:
        """The source's own URI for an exposed one: the inverse of `names`, else the URI
        without `prefix`; None when `uri` cannot be one of its own."""
        for own, exposed in self._names.items():
            if exposed == uri:
                return own
        return uri[len(self._prefix) :] if uri.startswith(self._prefix) else None

    @property
    def prefix(self) -> str:
        """What is put before its URIs."""
        return self._prefix

    def updated(self, uri: str) -> None:
        """The resource at `uri` (the source's own URI) changed: clients subscribed to it
        as the server exposes it are told (`notifications/resources/updated`)."""
        exposed = self.exposed_name(SourceItem(uri, {}))
        for listener in self._updates:
            listener(exposed)

    def _watch_updates(self, listener: Callable[[str], None]) -> None:
        """Call `listener` with the exposed URI on every `updated()`."""
        self._updates = (*self._updates, listener)


def tool_name(name: str) -> str:
    """`name` as a valid MCP tool name (letters, digits, `_`, `-`, `.`; 1 to 128)."""
    return (_NOT_IN_NAME.sub("_", name) or "_")[:_MAX_NAME]


def _selectors(
    selectors: Sequence[str], option: str, labelled_too: bool
) -> tuple[tuple[str | None, str], ...]:
    if isinstance(selectors, str) or not all(isinstance(s, str) and s for s in selectors):
        raise TypeError(f"{option} must be a list of non-empty selector strings")
    parsed: list[tuple[str | None, str]] = []
    for selector in selectors:
        labelled = _LABELLED.fullmatch(selector) if labelled_too else None
        if labelled is None or labelled.group(1) == "name":
            parsed.append((None, labelled.group(2) if labelled else selector))
        else:
            parsed.append((labelled.group(1), labelled.group(2)))
    return tuple(parsed)


def _matches(selector: tuple[str | None, str], name: str, labels: frozenset[str]) -> bool:
    kind, pattern = selector
    if kind is None:
        return fnmatchcase(name, pattern)
    prefix = kind + ":"
    return any(
        fnmatchcase(label[len(prefix) :], pattern) for label in labels if label.startswith(prefix)
    )
