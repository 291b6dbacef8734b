"""The registration part of `McpServer`: the decorators that register tools, resources,
prompts and completions, and the registries they fill.

A base class so that `server.py` stays the server's identity and dispatch. Each decorator
checks its options at once (`TypeError`/`ValueError`), derives the schema and description
from the handler, and refuses a name that is already taken.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar, overload

from mcp_asgi.protocol.jsonrpc import JsonObject
from mcp_asgi.server.primitives import Prompt, Resource, Tool
from mcp_asgi.server.schema import inspect_handler, parse_docstring

F = TypeVar("F", bound=Callable[..., Any])
Completer = Callable[..., Any]


class Registry:
    """The tools, resources, prompts and completers registered on a server."""

    # announces a change (`ChangeNotifications`, mixed into `McpServer`)
    _registry_changed: Callable[[dict[str, Any]], None]

    def __init__(self) -> None:
        self._tools: dict[str, Tool] = {}
        self._resources: dict[str, Resource] = {}
        self._prompts: dict[str, Prompt] = {}
        self._completers: dict[tuple[str, str], Completer] = {}

    @overload
    def tool(self, name: F, /) -> F: ...

    @overload
    def tool(
        self,
        name: str | None = None,
        *,
        title: str | None = None,
        description: str | None = None,
        annotations: JsonObject | None = None,
        timeout: float | None = None,
    ) -> Callable[[F], F]: ...

    def tool(
        self,
        name: str | Callable[..., Any] | None = None,
        *,
        title: str | None = None,
        description: str | None = None,
        annotations: JsonObject | None = None,
        timeout: float | None = None,
    ) -> Any:
        """Register a tool (`@server.tool` or `@server.tool(...)`).

        The handler's parameters are the tool's arguments (their type hints its
        `inputSchema`); its return annotation decides whether the result is structured
        (`outputSchema`, `structuredContent`) or plain text content.

        - `name`: the tool's name; default: the function's name.
        - `title`: a human-readable name for user interfaces.
        - `description`: what the tool does, for the model; default: the docstring's text
          before its `Args:` section.
        - `annotations`: the MCP `ToolAnnotations` hints, sent as given, e.g.
          `{"readOnlyHint": True, "destructiveHint": False}`.
        - `timeout`: seconds after which a call is cancelled (reason `timeout`); it can only
          shorten the endpoint's `max_request_duration`, not extend it.

        Raises `TypeError` or `ValueError` at once for a bad option, a handler signature
        that cannot be served, or a name already registered. Returns the function unchanged.
        """
        if callable(name):
            return self.tool()(name)
        _check_name(name, "tool")
        if timeout is not None and timeout <= 0:
            raise ValueError("tool timeout must be positive")

        def register(fn: F) -> F:
            tool_name = name or fn.__name__
            tool = Tool.build(
                fn,
                name=tool_name,
                title=title,
                description=description or parse_docstring(fn)[0],
                annotations=annotations,
                timeout=timeout,
            )
            self._add(self._tools, tool_name, tool)
            return fn

        return register

    def resource(
        self,
        uri: str,
        *,
        name: str | None = None,
        description: str | None = None,
        mime_type: str | None = None,
    ) -> Callable[[F], F]:
        """Register a resource at a fixed URI or a URI template such as `notes://{id}`.

        - `uri`: the resource's URI (it needs a scheme: `file:///x`, `notes://today`). With
          `{variables}` it is a template, listed by `resources/templates/list`, and the
          variables must be exactly the handler's parameters (each matches one segment).
        - `name`: the name listed to clients; default: the function's name.
        - `description`: default: the docstring's text before its `Args:` section.
        - `mime_type`: the `mimeType` of what the handler returns; default: none for text
          and bytes, `application/json` for anything else.

        A URI can be registered only once. Returns the function unchanged.
        """
        if not isinstance(uri, str):
            raise TypeError("resource() needs a URI: use @server.resource('scheme://...')")
        if "://" not in uri:
            raise ValueError(f"resource URI {uri!r} must have a scheme, e.g. 'file:///x'")

        def register(fn: F) -> F:
            resource = Resource.build(
                fn,
                uri=uri,
                name=name or fn.__name__,
                description=description or parse_docstring(fn)[0],
                mime_type=mime_type,
            )
            self._add(self._resources, uri, resource)
            return fn

        return register

    @overload
    def prompt(self, name: F, /) -> F: ...

    @overload
    def prompt(
        self, name: str | None = None, *, title: str | None = None, description: str | None = None
    ) -> Callable[[F], F]: ...

    def prompt(
        self,
        name: str | Callable[..., Any] | None = None,
        *,
        title: str | None = None,
        description: str | None = None,
    ) -> Any:
        """Register a prompt (`@server.prompt` or `@server.prompt(...)`); its parameters are
        the prompt's (string) arguments.

        - `name`: the prompt's name; default: the function's name.
        - `title`: a human-readable name for user interfaces.
        - `description`: default: the docstring's text before its `Args:` section, whose
          lines describe the arguments.

        Returns the function unchanged.
        """
        if callable(name):
            return self.prompt()(name)
        _check_name(name, "prompt")

        def register(fn: F) -> F:
            prompt_name = name or fn.__name__
            summary = description or parse_docstring(fn)[0]
            prompt = Prompt.build(fn, name=prompt_name, title=title, description=summary)
            self._add(self._prompts, prompt_name, prompt)
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
            inspect_handler(fn, name=f"completion {key[1]}")
            self._completers[key] = fn
            return fn

        return register

    def _add(self, registry: dict[str, Any], key: str, item: Any) -> None:
        if key in registry:
            raise ValueError(f"{key!r} is already registered")
        registry[key] = item
        self._registry_changed(registry)


def _check_name(name: str | None, what: str) -> None:
    if name is not None and (not isinstance(name, str) or not name):
        raise TypeError(f"{what} name must be a non-empty string")
