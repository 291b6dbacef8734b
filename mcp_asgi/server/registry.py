"""`Registry`: what a server serves: the tools, resources, prompts and completers its
decorators registered, their own OAuth scopes and task policies, and the catalogs of the
sources that add more (server/catalogs.py).

`McpServer` owns one and hands it what its decorators are given. Each registration checks
its options at once (`TypeError`/`ValueError`), derives the schema and description from
the handler, and refuses a name that is already taken. Every change of a list (a
registration, a removal, a source's `changed()`) and a source's resource update goes to
`announce` as a `ChangeEvent`: the registry does not know who listens.
"""

from __future__ import annotations

import os
import re
import sys
import warnings
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from types import FrameType
from typing import Any, Final, TypeVar, get_args

from mcp_asgi.bus.in_process import ChangeEvent, ChangeKind
from mcp_asgi.server.catalogs import SourceCatalogs
from mcp_asgi.server.context import Context
from mcp_asgi.server.metadata import (
    Annotations,
    Extras,
    Icon,
    ToolAnnotations,
    check_annotations,
    check_icons,
    check_meta,
    check_tool_annotations,
)
from mcp_asgi.server.oauth_scopes import check_scopes, security_scopes
from mcp_asgi.server.primitives import Prompt, Resource, Tool
from mcp_asgi.server.schema import inspect_handler, parse_docstring
from mcp_asgi.server.sources import Source, SourceKind, TaskPolicy

F = TypeVar("F", bound=Callable[..., Any])
Completer = Callable[..., Any]
Kind = SourceKind  # what a primitive is: "tool", "prompt" or "resource", as a source
_LIST_CHANGED: Final[dict[Kind, ChangeKind]] = {
    "tool": "tools_list_changed",
    "prompt": "prompts_list_changed",
    "resource": "resources_list_changed",
}


class Registry:
    """The tools, resources, prompts and completers registered on a server, and the
    catalogs of its sources of each kind (`default_scopes`: the OAuth scopes of one
    registered without `scopes=`)."""

    def __init__(
        self, announce: Callable[[ChangeEvent], None], default_scopes: frozenset[str]
    ) -> None:
        self.tools: dict[str, Tool] = {}
        self.resources: dict[str, Resource] = {}  # by URI or URI template
        self.prompts: dict[str, Prompt] = {}
        self.completers: dict[tuple[str, str], Completer] = {}  # by (ref type, name or URI)
        self.own_scopes: dict[tuple[str, str], frozenset[str]] = {}  # (kind, key): not the default
        self.default_scopes = default_scopes
        self.task_policies: dict[str, TaskPolicy] = {}  # tools that may run as tasks
        self.tool_sources = SourceCatalogs("tool", lambda: self._list_changed("tool"))
        self.prompt_sources = SourceCatalogs("prompt", lambda: self._list_changed("prompt"))
        self.resource_sources = SourceCatalogs(
            "resource",
            lambda: self._list_changed("resource"),
            lambda uri: announce(ChangeEvent("resource_updated", uri)),
        )
        self._announce = announce

    # -- registering (the work of McpServer's decorators, which document the options) --

    def tool(
        self,
        name: str | None = None,
        *,
        title: str | None = None,
        description: str | None = None,
        annotations: ToolAnnotations | None = None,
        icons: Sequence[Icon] | None = None,
        meta: Mapping[str, Any] | None = None,
        input_schema: Mapping[str, Any] | None = None,
        output_schema: Mapping[str, Any] | None = None,
        timeout: float | None = None,
        scopes: Sequence[str] | None = None,
        task: TaskPolicy = "never",
    ) -> Callable[[F], F]:
        """`McpServer.tool(...)`: the options checked now, the tool built and registered
        when the function is given."""
        _check_name(name, "tool")
        if timeout is not None and timeout <= 0:
            raise ValueError("tool timeout must be positive")
        own_scopes = check_scopes(scopes, "tool")
        if task not in get_args(TaskPolicy):
            raise ValueError(f"tool task must be one of {get_args(TaskPolicy)}, not {task!r}")

        def register(fn: F) -> F:
            tool_name = name or fn.__name__
            _check_tool_name(tool_name)
            owner = f"tool {tool_name!r}"
            extras = Extras(
                title=_check_title(title, owner),
                icons=check_icons(icons, owner=owner),
                annotations=check_tool_annotations(annotations, owner=owner),
                meta=check_meta(meta, owner=owner),
            )
            tool = Tool.build(
                fn,
                name=tool_name,
                description=description or parse_docstring(fn)[0],
                timeout=timeout,
                extras=extras,
                input_schema=input_schema,
                output_schema=output_schema,
            )
            self._add("tool", tool_name, tool)
            self._scoped("tool", tool_name, own_scopes, fn)
            if task != "never":
                self.task_policies[tool_name] = task
            else:
                self.task_policies.pop(tool_name, None)
            return fn

        return register

    def resource(
        self,
        uri: str,
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        mime_type: str | None = None,
        annotations: Annotations | None = None,
        icons: Sequence[Icon] | None = None,
        meta: Mapping[str, Any] | None = None,
        scopes: Sequence[str] | None = None,
    ) -> Callable[[F], F]:
        """`McpServer.resource(...)`."""
        if not isinstance(uri, str):
            raise TypeError("resource() needs a URI: use @server.resource('scheme://...')")
        if "://" not in uri:
            raise ValueError(f"resource URI {uri!r} must have a scheme, e.g. 'file:///x'")

        owner = f"resource {uri!r}"
        own_scopes = check_scopes(scopes, owner)
        extras = Extras(
            title=_check_title(title, owner),
            icons=check_icons(icons, owner=owner),
            annotations=check_annotations(annotations, owner=owner),
            meta=check_meta(meta, owner=owner),
        )

        def register(fn: F) -> F:
            resource = Resource.build(
                fn,
                uri=uri,
                name=name or fn.__name__,
                description=description or parse_docstring(fn)[0],
                mime_type=mime_type,
                extras=extras,
            )
            self._add("resource", uri, resource)
            self._scoped("resource", uri, own_scopes, fn)
            return fn

        return register

    def prompt(
        self,
        name: str | None = None,
        *,
        title: str | None = None,
        description: str | None = None,
        icons: Sequence[Icon] | None = None,
        meta: Mapping[str, Any] | None = None,
        scopes: Sequence[str] | None = None,
    ) -> Callable[[F], F]:
        """`McpServer.prompt(...)`."""
        _check_name(name, "prompt")
        own_scopes = check_scopes(scopes, "prompt")

        def register(fn: F) -> F:
            prompt_name = name or fn.__name__
            summary = description or parse_docstring(fn)[0]
            owner = f"prompt {prompt_name!r}"
            extras = Extras(
                title=_check_title(title, owner),
                icons=check_icons(icons, owner=owner),
                meta=check_meta(meta, owner=owner),
            )
            prompt = Prompt.build(fn, name=prompt_name, description=summary, extras=extras)
            self._add("prompt", prompt_name, prompt)
            self._scoped("prompt", prompt_name, own_scopes, fn)
            return fn

        return register

    def completion(self, *, prompt: str | None, resource: str | None) -> Callable[[F], F]:
        """`McpServer.completion(...)`."""
        if (prompt is None) == (resource is None):
            raise ValueError("completion needs exactly one of prompt= or resource=")
        key = ("ref/prompt", prompt) if prompt is not None else ("ref/resource", str(resource))

        def register(fn: F) -> F:
            signature = inspect_handler(fn, name=f"completion {key[1]}")
            if signature.request_param or signature.dependencies:
                raise TypeError(
                    f"completion {key[1]}: a completion handler is called with (argument, "
                    "value, context) only: it cannot take a Request or FastAPI dependencies"
                )
            self.completers[key] = fn
            return fn

        return register

    def add_source(self, source: Source) -> None:
        """`McpServer.add_source(source)`: into the catalogs of its kind."""
        catalogs = {c.kind: c for c in self.catalogs()}
        kind = getattr(source, "kind", None)
        if not isinstance(source, Source) or kind not in catalogs:
            raise TypeError(
                "add_source() takes a ToolSource (e.g. mcp_asgi.routes.AppRoutes), a PromptSource "
                "or a ResourceSource"
            )
        catalogs[kind].add(source)

    def remove(self, kind: Kind, key: str) -> None:
        """Unregister a tool, prompt (by name) or resource (by URI), announced; `KeyError`
        if there is none."""
        table = self._table(kind)
        if key not in table:
            raise KeyError(f"no {kind} {key!r} is registered")
        del table[key]
        self._list_changed(kind)

    # -- what the server asks --------------------------------------------------------

    def catalogs(self) -> tuple[SourceCatalogs, SourceCatalogs, SourceCatalogs]:
        """The catalogs of the server's sources: of tools, prompts, resources."""
        return self.tool_sources, self.prompt_sources, self.resource_sources

    def serves(self, family: str) -> bool:
        """Whether anything of `family` (`tools`, `resources`, `prompts`, `completion`)
        is registered or comes from a source."""
        if family == "tools":
            return bool(self.tools or self.tool_sources)
        if family == "resources":
            return bool(self.resources or self.resource_sources)
        if family == "prompts":
            return bool(self.prompts or self.prompt_sources)
        if family == "completion":
            return bool(self.completers)
        return False

    @property
    def has_tasks(self) -> bool:
        """Whether a tool (a decorated one, or a source's) may run as a task."""
        return (
            any(name in self.tools for name in self.task_policies)
            or self.tool_sources.may_run_tasks()
        )

    def task_policy(self, tool_name: str) -> TaskPolicy:
        """`McpServer.task_policy`."""
        if tool_name in self.tools:
            return self.task_policies.get(tool_name, "never")
        return self.tool_sources.task_of(tool_name) if self.tool_sources else "never"

    async def load_tool(self, tool_name: str, ctx: Context) -> None:
        """Read the tool sources not read yet (with `ctx`) if no tool has `tool_name`."""
        sources = self.tool_sources
        if tool_name not in self.tools and sources and not sources.get(tool_name):
            await sources.load(ctx, self.tools)

    def timeout_of(self, tool_name: str) -> float | None:
        """The tool's own timeout (a source's tool: its source's), or None."""
        tool = self.tools.get(tool_name)
        return tool.timeout if tool else self.tool_sources.timeout_of(tool_name)

    def resource_key(self, uri: object) -> str:
        """The registered URI (or template) serving `uri`, else `uri` itself."""
        uri = str(uri)
        static = self.resources.get(uri)
        if static is not None:
            return uri
        for resource in self.resources.values():
            if resource.is_template and resource.match(uri) is not None:
                return resource.uri
        return uri

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Every source's `running()`, and the sources that list at start read (a name
        already taken refused here: `ValueError`)."""
        async with (
            self.tool_sources.running(self.tools),
            self.prompt_sources.running(self.prompts),
            self.resource_sources.running(self.resources),
        ):
            yield

    # -- internals -------------------------------------------------------------------

    def _table(self, kind: Kind) -> dict[str, Any]:
        tables: dict[Kind, dict[str, Any]] = {
            "tool": self.tools,
            "prompt": self.prompts,
            "resource": self.resources,
        }
        return tables[kind]

    def _add(self, kind: Kind, key: str, item: Any) -> None:
        table = self._table(kind)
        if key in table:
            raise ValueError(f"{key!r} is already registered")
        table[key] = item
        self._list_changed(kind)

    def _list_changed(self, kind: Kind) -> None:
        self._announce(ChangeEvent(_LIST_CHANGED[kind]))

    def _scoped(self, kind: Kind, key: str, own: frozenset[str] | None, fn: Any) -> None:
        """Record the OAuth scopes of a primitive: its own (None: the server's default)
        plus those of its FastAPI `Security` dependencies."""
        extra = security_scopes(fn)
        if own is None and not extra:
            self.own_scopes.pop((kind, key), None)
        else:
            self.own_scopes[(kind, key)] = (own if own is not None else self.default_scopes) | extra


def _check_name(name: str | None, what: str) -> None:
    if name is not None and (not isinstance(name, str) or not name):
        raise TypeError(f"{what} name must be a non-empty string")


class ToolNameWarning(UserWarning):
    """A tool name the MCP spec allows but several popular clients refuse: one with a dot,
    or longer than 64 characters (`@server.tool` warns when it is registered)."""


_TOOL_NAME: Final = re.compile(r"[A-Za-z0-9_.-]{1,128}\Z")


def _check_tool_name(name: str) -> None:
    """Refuse a name outside the spec's rule (1 to 128 of `A-Z a-z 0-9 _ - .`); warn
    (`ToolNameWarning`) about one that clients which allow only `[A-Za-z0-9_-]{1,64}` refuse."""
    if not _TOOL_NAME.match(name):
        raise ValueError(
            f"tool name {name!r} is not a valid MCP tool name: use 1 to 128 ASCII letters, "
            "digits, '_', '-' or '.' (pass name=... to @server.tool to choose another)"
        )
    if "." in name or len(name) > 64:
        warnings.warn(
            f"tool name {name!r} {'has a dot' if '.' in name else 'is longer than 64 characters'}"
            ": several popular MCP clients refuse such names (they allow only letters, "
            "digits, '_' and '-', at most 64); rename it with name=... to reach them all",
            ToolNameWarning,
            stacklevel=_caller_level(),
        )


def _caller_level() -> int:
    """The `stacklevel` that points a warning at the first frame outside this package
    (`McpServer`'s decorators, this registry): the user's decorator line, however the
    decorator was called."""
    level = 1
    frame: FrameType | None = sys._getframe(1)
    while frame is not None and os.path.dirname(frame.f_code.co_filename) == _HERE:
        level, frame = level + 1, frame.f_back
    return level


_HERE: Final = os.path.dirname(__file__)


def _check_title(title: str | None, owner: str) -> str | None:
    if title is not None and not isinstance(title, str):
        raise TypeError(f"{owner}: title must be a str, not {type(title).__name__}")
    return title
