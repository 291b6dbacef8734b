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

        `timeout` (seconds) caps this tool below `max_request_duration`.
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
        """Register a resource at a fixed URI or a URI template such as `notes://{id}`."""
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
        the prompt's (string) arguments."""
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

        The handler receives `argument: str, value: str, context: dict[str, str]` and
        returns a list of suggestions.
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
