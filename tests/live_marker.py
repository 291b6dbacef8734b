"""Which tests are `live`: those that start something outside the test's own event loop (an
ASGI server, a subprocess, a Redis, a Node.js client), found from the code itself.

A test is live when its function, a fixture it uses, or any function or class of `tests/`
they refer to (followed by name, transitively) refers to one of `_STARTERS`. The walk reads
code objects (`co_names`, nested functions included), so a new test that calls
`serving(...)`, `Worker(...)` or a helper that does is marked without anyone remembering to.
`make check` runs the rest (`-m "not live"`): the unit tests, in about a minute.
"""

from __future__ import annotations

import asyncio
import inspect
import subprocess
import types
from collections.abc import Callable, Iterator
from typing import Any

import anyio

from mcp_asgi.testing import client as testing_client

# What starting something outside the loop comes down to: every live helper of tests/ ends
# in one of these (uvicorn through mcp_asgi.testing.serve, processes through subprocess or
# anyio/asyncio, which also start node, redis-server and the authorization server).
_STARTERS: frozenset[int] = frozenset(
    id(obj)
    for obj in (
        testing_client.serve,
        subprocess,
        subprocess.Popen,
        subprocess.run,
        anyio.open_process,
        anyio.run_process,
        asyncio.create_subprocess_exec,
        asyncio.create_subprocess_shell,
    )
)


# The same met as an attribute (`anyio.open_process(...)`), and the official SDK's stdio
# client, which starts its server: names that mean nothing else here.
_STARTER_NAMES: frozenset[str] = frozenset(
    {
        "open_process",
        "run_process",
        "create_subprocess_exec",
        "create_subprocess_shell",
        "Popen",
        "StdioServerParameters",
    }
)


def starts_something(fn: Callable[..., Any]) -> bool:
    """Whether `fn` (a test or a fixture function) starts a server or a process."""
    return _reaches_starter(inspect.unwrap(fn))


_seen: dict[int, bool] = {}


def _reaches_starter(obj: Any) -> bool:
    key = id(obj)
    if key not in _seen:
        _seen[key] = False  # while it is being walked: a cycle adds nothing
        _seen[key] = _walk(obj)
    return _seen[key]


def _walk(obj: Any) -> bool:
    if id(obj) in _STARTERS:
        return True
    obj = inspect.unwrap(obj) if callable(obj) else obj  # @contextmanager, @wraps
    if isinstance(obj, type):
        if not _in_tests(obj):
            return False
        return any(_reaches_starter(member) for member in _own_functions(obj))
    if not isinstance(obj, types.FunctionType) or not _in_tests(obj):
        return False
    scope = obj.__globals__
    for name in _names(obj.__code__):
        if name in _STARTER_NAMES:
            return True
        target = scope.get(name)
        if target is not None and _reaches_starter(target):
            return True
    return False


def named_fixtures(fn: Callable[..., Any]) -> Iterator[str]:
    """The fixtures a fixture function asks for by name (`request.getfixturevalue("x")`)."""
    code = inspect.unwrap(fn).__code__
    if "getfixturevalue" in code.co_names:
        yield from (const for const in code.co_consts if isinstance(const, str))


def _names(code: types.CodeType) -> Iterator[str]:
    """The global and attribute names a code object and the functions inside it refer to."""
    yield from code.co_names
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _names(const)


def _own_functions(cls: type) -> Iterator[Any]:
    for value in vars(cls).values():
        if isinstance(value, (staticmethod, classmethod)):
            value = value.__func__
        if isinstance(value, property):
            value = value.fget
        if isinstance(value, types.FunctionType):
            yield value


def _in_tests(obj: Any) -> bool:
    return str(getattr(obj, "__module__", "")).startswith("tests")
