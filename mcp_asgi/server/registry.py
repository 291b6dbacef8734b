"""The registration part of `McpServer`: the decorators that register tools, resources,
prompts and completions, and the registries they fill.

A base class so that `server.py` stays the server's identity and dispatch. Each decorator
checks its options at once (`TypeError`/`ValueError`), derives the schema and description
from the handler, and refuses a name that is already taken.
"""

from __future__ import annotations

import re
import sys
import warnings
from collections.abc import Callable, Mapping, Sequence
from types import FrameType
from typing import Any, Final, TypeVar, get_args, overload

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
from mcp_asgi.server.primitives import Prompt, Resource, Tool
from mcp_asgi.server.schema import inspect_handler, parse_docstring
from mcp_asgi.server.scopes import check_scopes, security_scopes
from mcp_asgi.server.sourced import Sourced
from mcp_asgi.server.sources import Source, TaskPolicy

F = TypeVar("F", bound=Callable[..., Any])
Completer = Callable[..., Any]


class Registry:
    """The tools, resources, prompts and completers registered on a server."""

    # announces a change (`ChangeNotifications`, mixed into `McpServer`)
    _registry_changed: Callable[[dict[str, Any]], None]
    _resource_updated: Callable[[str], None]  # a sourced resource's update, announced

    def __init__(self) -> None:
        self._tools: dict[str, Tool] = {}
        self._resources: dict[str, Resource] = {}
        self._prompts: dict[str, Prompt] = {}
        self._completers: dict[tuple[str, str], Completer] = {}
        self._scopes: dict[tuple[str, str], frozenset[str]] = {}  # (kind, name): own scopes
        self._task_policies: dict[str, TaskPolicy] = {}  # tools that may run as tasks
        self._sourced = Sourced("tool", lambda: self._registry_changed(self._tools))
        self._sourced_prompts = Sourced("prompt", lambda: self._registry_changed(self._prompts))
        self._sourced_resources = Sourced(
            "resource",
            lambda: self._registry_changed(self._resources),
            lambda uri: self._resource_updated(uri),
        )

    @overload
    def tool(self, name: F, /) -> F: ...

    @overload
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
    ) -> Callable[[F], F]: ...

    def tool(
        self,
        name: str | Callable[..., Any] | None = None,
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
    ) -> Any:
        """Register a tool (`@server.tool` or `@server.tool(...)`).

        The handler's parameters are the tool's arguments (their type hints its
        `inputSchema`); its return annotation decides whether the result is structured
        (`outputSchema`, `structuredContent`) or plain text content.

        - `name`: the tool's name; default: the function's name. 1 to 128 ASCII letters,
          digits, `_`, `-` or `.` (the spec's rule, else `ValueError`); a dot or more than
          64 characters warns (`ToolNameWarning`): several popular clients refuse those.
        - `title`: a human-readable name for user interfaces.
        - `description`: what the tool does, for the model; default: the docstring's text
          before its `Args:` section.
        - `annotations`: the MCP `ToolAnnotations` hints, e.g.
          `{"readOnlyHint": True, "destructiveHint": False}` (`title`, `readOnlyHint`,
          `destructiveHint`, `idempotentHint`, `openWorldHint`; other keys are refused).
        - `icons`: icons a client may show, e.g. `[{"src": "https://.../t.png",
          "mimeType": "image/png", "sizes": ["48x48"]}]`.
        - `meta`: the tool's `_meta` in `tools/list` (keys like `"com.example/owner"`).
        - `input_schema`: the `inputSchema` to list instead of the one the parameters'
          hints give, kept verbatim (a JSON Schema 2020-12 object schema unless its
          `$schema` names another dialect). Arguments are validated against it before
          the handler's own type hints convert them; its `properties` must be handler
          parameters.
        - `output_schema`: the `outputSchema` to list instead of the one the return
          annotation gives, kept verbatim. What the tool returns (unless a `ToolResult`
          with `is_error`) is its `structuredContent`, and must match it; content blocks
          alone, which have none, are an `isError` result.
        - `timeout`: seconds after which a call is cancelled (reason `timeout`); it can only
          shorten the endpoint's `max_request_duration`, not extend it.
        - `scopes`: the OAuth scopes a caller needs (with authorization on), e.g.
          `["files:write"]`; default: the server's `default_scopes`. `[]` needs none. The
          scopes of the handler's FastAPI `Security(..., scopes=[...])` dependencies are
          added. A caller without them gets 403 `insufficient_scope`, and does not see
          the tool in `tools/list`.
        - `task`: whether a call may run as a task (the Tasks extension, docs/tasks.md):
          `"never"` (default: always a plain call), `"optional"` (a task when the request
          declares the extension and the work has not finished within the endpoint's
          `task_result_window`; the plain result otherwise), `"required"` (always a task;
          a request that does not declare the extension gets -32021). A task outlives its
          request's connection and ends only when done, cancelled (`tasks/cancel`), past
          `max_task_duration` or its TTL, or at server shutdown.

        Raises `TypeError` or `ValueError` at once for a bad option, a handler signature
        that cannot be served, or a name already registered. Returns the function unchanged.
        """
        if callable(name):
            return self.tool()(name)
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
            self._add(self._tools, tool_name, tool)
            self._scoped(("tool", tool_name), own_scopes, fn)
            if task != "never":
                self._task_policies[tool_name] = task
            else:
                self._task_policies.pop(tool_name, None)
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
        """Register a resource at a fixed URI or a URI template such as `notes://{id}`.

        - `uri`: the resource's URI (it needs a scheme: `file:///x`, `notes://today`). With
          `{variables}` it is a template, listed by `resources/templates/list`, and the
          variables must be exactly the handler's parameters (each matches one segment).
        - `name`: the name listed to clients; default: the function's name.
        - `title`: a human-readable name for user interfaces.
        - `description`: default: the docstring's text before its `Args:` section.
        - `mime_type`: the `mimeType` of what the handler returns; default: none for text
          and bytes, `application/json` for anything else.
        - `annotations`: hints for the client, e.g. `{"audience": ["user"],
          "priority": 0.8, "lastModified": "2026-07-28T12:00:00Z"}`.
        - `icons`: icons a client may show (`[{"src": ..., "mimeType": ...}]`).
        - `meta`: the resource's `_meta` in `resources/list`.
        - `scopes`: the OAuth scopes a caller needs to read it (or subscribe to it), with
          authorization on; default: the server's `default_scopes`.

        A URI can be registered only once. Returns the function unchanged.
        """
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
            self._add(self._resources, uri, resource)
            self._scoped(("resource", uri), own_scopes, fn)
            return fn

        return register

    @overload
    def prompt(self, name: F, /) -> F: ...

    @overload
    def prompt(
        self,
        name: str | None = None,
        *,
        title: str | None = None,
        description: str | None = None,
        icons: Sequence[Icon] | None = None,
        meta: Mapping[str, Any] | None = None,
        scopes: Sequence[str] | None = None,
    ) -> Callable[[F], F]: ...

    def prompt(
        self,
        name: str | Callable[..., Any] | None = None,
        *,
        title: str | None = None,
        description: str | None = None,
        icons: Sequence[Icon] | None = None,
        meta: Mapping[str, Any] | None = None,
        scopes: Sequence[str] | None = None,
    ) -> Any:
        """Register a prompt (`@server.prompt` or `@server.prompt(...)`); its parameters are
        the prompt's (string) arguments.

        - `name`: the prompt's name; default: the function's name.
        - `title`: a human-readable name for user interfaces.
        - `description`: default: the docstring's text before its `Args:` section, whose
          lines describe the arguments.
        - `icons`: icons a client may show (`[{"src": ..., "mimeType": ...}]`).
        - `meta`: the prompt's `_meta` in `prompts/list`.
        - `scopes`: the OAuth scopes a caller needs (with authorization on); default: the
          server's `default_scopes`.

        Returns the function unchanged.
        """
        if callable(name):
            return self.prompt()(name)
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
            self._add(self._prompts, prompt_name, prompt)
            self._scoped(("prompt", prompt_name), own_scopes, fn)
            return fn

        return register

    def completion(
        self, *, prompt: str | None = None, resource: str | None = None
    ) -> Callable[[F], F]:
        """Register argument completion for a prompt or a resource template.

        Give exactly one of `prompt` (a prompt's name) or `resource` (a resource template's
        URI, as registered). The handler receives `argument: str, value: str,
        context: dict[str, str]` (the argument's name, what the user typed so far, the
        other arguments already filled in) and returns a list of suggestions; the first
        100 are sent. Registering completion advertises the `completions` capability.
        """
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
            self._completers[key] = fn
            return fn

        return register

    def add_source(self, source: Source) -> None:
        """Serve the tools of a `ToolSource` beside the decorated ones (the host app's
        routes, `AppRoutes`; a downstream's, `DownstreamTools`), or the prompts of a
        `PromptSource`, or the resources and templates of a `ResourceSource`.

        Its items are listed from the source when first needed (a list, or a call, get or
        read of a name no decorated one has) and again after `source.changed()`, which
        also tells listening clients (`notifications/tools/list_changed`, or the prompts'
        or resources'). A decorated tool, prompt or resource keeps its name (URI) over a
        source's. Adding a source announces the change too. `TypeError` for something
        that is not a `ToolSource`, `PromptSource` or `ResourceSource`, `ValueError` for
        a source already added.
        """
        catalogs = {c.kind: c for c in self._catalogs()}
        kind = getattr(source, "kind", None)
        if not isinstance(source, Source) or kind not in catalogs:
            raise TypeError(
                "add_source() takes a ToolSource (e.g. mcp_asgi.routes.AppRoutes), a PromptSource "
                "or a ResourceSource"
            )
        catalogs[kind].add(source)

    def _catalogs(self) -> tuple[Sourced, Sourced, Sourced]:
        """The server's sources: of tools, prompts, resources."""
        return self._sourced, self._sourced_prompts, self._sourced_resources

    def _scoped(self, key: tuple[str, str], own: frozenset[str] | None, fn: Any) -> None:
        """Record the scopes of a primitive: its own (None: the server's default) plus
        those of its FastAPI `Security` dependencies."""
        extra = security_scopes(fn)
        if own is None and not extra:
            self._scopes.pop(key, None)
        else:
            self._scopes[key] = (own if own is not None else self._default_scopes) | extra

    _default_scopes: frozenset[str]

    def _add(self, registry: dict[str, Any], key: str, item: Any) -> None:
        if key in registry:
            raise ValueError(f"{key!r} is already registered")
        registry[key] = item
        self._registry_changed(registry)


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
    """The `stacklevel` that points a warning at the first frame outside this module: the
    user's decorator line, however the decorator was called."""
    level = 1
    frame: FrameType | None = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename == __file__:
        level, frame = level + 1, frame.f_back
    return level


def _check_title(title: str | None, owner: str) -> str | None:
    if title is not None and not isinstance(title, str):
        raise TypeError(f"{owner}: title must be a str, not {type(title).__name__}")
    return title
