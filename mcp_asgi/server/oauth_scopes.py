"""The OAuth scopes of tools, resources and prompts: checking `scopes=`, and collecting
the scopes of a handler's FastAPI `Security(..., scopes=[...])` dependencies."""

from __future__ import annotations

import inspect
import sys
import typing
from collections.abc import Callable, Sequence
from typing import Any


def check_scopes(scopes: Sequence[str] | None, owner: str) -> frozenset[str] | None:
    """`scopes=` as a frozenset (None stays None: the server's default applies)."""
    if scopes is None:
        return None
    if isinstance(scopes, str) or not all(
        isinstance(s, str) and s and " " not in s for s in scopes
    ):
        raise TypeError(f"{owner}: scopes must be a list of scope strings without spaces")
    return frozenset(scopes)


def security_scopes(fn: Callable[..., Any]) -> frozenset[str]:
    """Every scope the handler's `Security(..., scopes=[...])` dependencies name, at any
    depth (FastAPI gathers them the same way for `SecurityScopes`). Empty when FastAPI is
    not imported (no dependency can be one then)."""
    params = sys.modules.get("fastapi.params")
    if params is None:
        return frozenset()
    found: set[str] = set()
    seen: set[int] = set()

    def walk(call: Callable[..., Any]) -> None:
        if id(call) in seen:
            return
        seen.add(id(call))
        try:
            signature = inspect.signature(call)
            hints = typing.get_type_hints(call, include_extras=True)
        except (TypeError, ValueError, NameError):
            return
        for name, param in signature.parameters.items():
            annotation = hints.get(name, param.annotation)
            metadata: tuple[Any, ...] = ()
            if typing.get_origin(annotation) is typing.Annotated:
                metadata = typing.get_args(annotation)[1:]
            for marker in (*metadata, param.default):
                if isinstance(marker, params.Depends):
                    if isinstance(marker, params.Security):
                        found.update(marker.scopes or ())
                    dependency = marker.dependency
                    if dependency is None and typing.get_origin(annotation) is typing.Annotated:
                        dependency = typing.get_args(annotation)[0]
                    if callable(dependency):
                        walk(dependency)

    walk(fn)
    return frozenset(found)
