"""The route a call must reach: the one its tool was made from, whatever the arguments
hold; a call that would reach another (or none) is refused, -32602 naming the argument.

Selection is a boundary (`include=`, `methods=`): a tool for `GET /users/{user_id}` must
not run the unselected `GET /users/{user_id}/secret` for `user_id="alice/secret"`, nor
`GET /users/` for `user_id=""`. Two checks:

    the values      before the request is made. A path value is one segment: not empty,
                    not `.` or `..`, no `/` (unless the route's convertor is `path`:
                    then no `.` or `..` segment). No path or header value holds a control
                    character (CR, LF, NUL...; a header may hold a tab), as an HTTP server
                    refuses them; a header value is Latin-1 text, as servers read it
    the router      when the app's router has the tool's route (FastAPI, Starlette: its
                    `routes`, mounts and FastAPI's included routers opened), the request
                    made is matched as the router will: the first route to match it must
                    be the tool's, with the path values as given (not an earlier
                    `/users/me` for `user_id="me"`, nor a later route when a value does
                    not fit the route's convertor). A route that cannot be looked into
                    (a `Host`, a mounted app without routes) and matches first is another

An app whose router does not have the route (no `router`, or a document given with
`openapi=` for routes it dispatches itself) gets the first check only.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from starlette.convertors import Convertor, PathConvertor
from starlette.routing import Match, Mount, Route, Router
from starlette.types import ASGIApp, Scope

from mcp_asgi.protocol.jsonrpc import INVALID_PARAMS, McpError
from mcp_asgi.routes.openapi import Operation
from mcp_asgi.routes.request import as_text

_PATH_CONTROL: Final = re.compile(r"[\x00-\x1f\x7f]")
_HEADER_CONTROL: Final = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")  # a tab is allowed
_OPAQUE: Final = object()  # a route matched first that cannot be looked into


@dataclass(frozen=True, slots=True)
class Target:
    """The tool's route in the app's router (`found`), or only its operation."""

    operation: Operation
    routes: tuple[Any, ...] = ()
    found: bool = False
    convertors: Mapping[str, Convertor[Any]] = field(default_factory=dict)

    @classmethod
    def of(cls, app: ASGIApp, operation: Operation) -> Target:
        """`operation`'s route in `app`'s router, if it has it."""
        routes = _routes_of(app)
        if routes is None:
            return cls(operation)
        for template, methods, convertors in _endpoints(routes, "", {}):
            if template == operation.path and (methods is None or operation.method in methods):
                return cls(operation, routes, True, convertors)
        return cls(operation)

    def check_values(self, tool: str, arguments: Mapping[str, Any]) -> None:
        """Raise -32602 for a value that could take the request elsewhere."""
        for argument in self.operation.arguments:
            if argument.name not in arguments or argument.location == "body":
                continue
            value = arguments[argument.name]
            many = argument.location == "query" and isinstance(value, list)
            for text in [as_text(v) for v in value] if many else [as_text(value)]:
                if argument.location == "header":
                    _check_header(tool, argument.name, text)
                if argument.location == "path":
                    whole = isinstance(self.convertors.get(argument.key), PathConvertor)
                    _check_path(tool, argument.name, text, whole)

    def check_reached(self, tool: str, scope: Scope, arguments: Mapping[str, Any]) -> None:
        """Raise -32602 unless the router runs this route for `scope`, with the path
        values as given."""
        if not self.found or self._reaches(scope, arguments):
            return
        names = [a.name for a in self.operation.arguments if a.location == "path"]
        raise McpError(
            INVALID_PARAMS,
            f"Invalid params: tool {tool!r}: with these values of {', '.join(names)} the "
            f"request would not reach the tool's route ({self.operation.method} "
            f"{self.operation.path}) but another route of the app, or none",
        )

    def _reaches(self, scope: Scope, arguments: Mapping[str, Any]) -> bool:
        reached = _first(self.routes, dict(scope), "")
        if reached is None or reached is _OPAQUE:
            return False
        template, methods, params = reached
        if template != self.operation.path:
            return False
        if methods is not None and self.operation.method not in methods:
            return False
        return all(
            _same(params, self.convertors, argument.key, as_text(arguments[argument.name]))
            for argument in self.operation.arguments
            if argument.location == "path" and argument.name in arguments
        )


def _check_header(tool: str, name: str, text: str) -> None:
    if _HEADER_CONTROL.search(text):
        raise _refused(
            tool, name, "(a header) cannot hold CR, LF, NUL or another control character"
        )
    try:
        text.encode("latin-1")
    except UnicodeEncodeError:
        raise _refused(tool, name, "(a header) must be Latin-1 text") from None


def _check_path(tool: str, name: str, text: str, whole: bool) -> None:
    """A path value: one segment, or with `whole` (a `path` convertor's) a path."""
    if _PATH_CONTROL.search(text):
        raise _refused(
            tool, name, "(in the path) cannot hold NUL, CR, LF or another control character"
        )
    if whole:
        if any(part in (".", "..") for part in text.split("/")):
            raise _refused(tool, name, "(a path) cannot hold a '.' or '..' segment")
    elif not text:
        raise _refused(tool, name, "(a path segment) cannot be empty")
    elif "/" in text:
        raise _refused(tool, name, "(a path segment) cannot hold '/'")
    elif text in (".", ".."):
        raise _refused(tool, name, f"(a path segment) cannot be {text!r}")


def _refused(tool: str, name: str, why: str) -> McpError:
    return McpError(INVALID_PARAMS, f"Invalid params: tool {tool!r}: argument {name!r} {why}")


def _same(
    params: Mapping[str, Any], convertors: Mapping[str, Convertor[Any]], key: str, text: str
) -> bool:
    """Whether the router took the path value `text` for `key` as it is."""
    if key not in params:
        return True  # not a placeholder of the route's path: not in the path at all
    convertor = convertors.get(key)
    try:
        return bool(params[key] == (convertor.convert(text) if convertor else text))
    except (ValueError, TypeError, ArithmeticError):
        return False


def _routes_of(app: Any) -> tuple[Any, ...] | None:
    """The routes of `app`'s router (a Starlette or FastAPI app, or a router)."""
    router = app if isinstance(app, Router) else getattr(app, "router", None)
    if not isinstance(router, Router):
        return None
    return tuple(router.routes)


def _members(routes: Iterable[Any]) -> Iterator[Any]:
    """`routes` in matching order, FastAPI's included routers (0.165+, which match as a
    group) opened into their routes (fastapi.routing.iter_route_contexts)."""
    opened = getattr(sys.modules.get("fastapi.routing"), "iter_route_contexts", None)
    if opened is None:
        yield from routes
        return
    yield from opened(routes)


def _is(route: Any, kind: type) -> bool:
    return isinstance(getattr(route, "original_route", route), kind)


def _endpoint(route: Any) -> bool:
    return _is(route, Route) and isinstance(getattr(route, "path_format", None), str)


def _methods(route: Any) -> frozenset[str] | None:
    """A route's methods; None: any."""
    methods = getattr(route, "methods", None)
    return frozenset(methods) if methods else None


def _prefix(mount: Any) -> str:
    """A mount's path template (its `{path}` remainder left out)."""
    return str(mount.path_format).removesuffix("/{path}")


def _endpoints(
    routes: Iterable[Any], prefix: str, convertors: Mapping[str, Convertor[Any]]
) -> Iterator[tuple[str, frozenset[str] | None, dict[str, Convertor[Any]]]]:
    """Every endpoint route, in matching order: its full path template, its methods, its
    convertors by parameter name (its mounts' included)."""
    for route in _members(routes):
        own = {**convertors, **(getattr(route, "param_convertors", None) or {})}
        if _is(route, Mount):
            own.pop("path", None)
            yield from _endpoints(
                getattr(route, "routes", None) or (), prefix + _prefix(route), own
            )
        elif _endpoint(route):
            yield prefix + route.path_format, _methods(route), own


def _first(routes: Iterable[Any], scope: dict[str, Any], prefix: str) -> Any:
    """What the router runs for `scope`, matched as Starlette's router does: (template,
    methods, path params) of the endpoint route; `_OPAQUE`: a route that cannot be looked
    into; None: no route matches in full (the app answers 404 or 405 itself)."""
    for route in _members(routes):
        match, child = route.matches(dict(scope))
        if match is not Match.FULL:
            continue
        if _is(route, Mount):
            inner = getattr(route, "routes", None)
            if not inner:
                return _OPAQUE
            return _first(inner, {**scope, **child}, prefix + _prefix(route))
        if _endpoint(route):
            params = dict(child.get("path_params", {}))
            return prefix + route.path_format, _methods(route), params
        return _OPAQUE
    return None
