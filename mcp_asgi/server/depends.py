"""What a handler parameter receives when it is not an MCP argument: the HTTP `Request`,
or a FastAPI dependency (`Depends(...)`, `Annotated[X, Depends(...)]`).

Dependencies are resolved by FastAPI's own solver, as FastAPI resolves them for the host
app's routes: sub-dependencies, `yield` dependencies, `app.dependency_overrides` (the app
is `request.app`), one cache per request. That solver is internal API that has changed
between releases: its signature is read once per handler, at registration (`Solver`), and
a FastAPI older than `TESTED_FASTAPI` or with a solver of another shape is refused there.
FastAPI is an optional extra: nothing here imports it unless a handler declares a
dependency.

Dependencies are entered in the handler's task just before the call, and closed in it
right after, also when the call fails or is cancelled: shielded from the request's
cancellation, bounded by `cancel_grace`. A plain `def` handler's worker thread is waited
for (within the same bound) before its dependencies close, so the thread never uses a
closed resource.
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import re
import sys
import threading
import typing
from collections.abc import Callable, Iterator, Sequence
from contextlib import AsyncExitStack
from typing import TYPE_CHECKING, Any, Final, Literal, NamedTuple

import anyio
import anyio.from_thread
import anyio.lowlevel
from starlette.background import BackgroundTasks
from starlette.requests import HTTPConnection, Request
from starlette.responses import Response
from starlette.websockets import WebSocket

from mcp_asgi._loggers import errors_logger as _errors
from mcp_asgi.lifecycle.cancel import CancelReason, RequestCancelled
from mcp_asgi.protocol.jsonrpc import INVALID_PARAMS, McpError
from mcp_asgi.server.context import Context

if TYPE_CHECKING:
    from fastapi.dependencies.models import Dependant

TESTED_FASTAPI: Final = ">=0.100.0"
"""The FastAPI versions handlers' dependencies accept (the `fastapi` extra pins the same):
0.100 is the first FastAPI of the pydantic 2 era; newer releases are accepted while their
solver has one of the shapes `Solver` knows."""

NEWEST_TESTED_FASTAPI: Final = "0.165.0"
"""The newest FastAPI of the tested matrix (the Makefile's FASTAPI_VERSIONS), named by
the error when a newer release changes its solver."""

_LOWEST: Final = (0, 100, 0)
_INSTALL: Final = "pip install 'mcp-asgi[fastapi]'"

Injected = Literal["request", "depends"]


def injected(
    name: str, param: inspect.Parameter, annotation: Any, *, handler: str
) -> Injected | None:
    """What `param` receives if it is not an MCP argument: the HTTP request (`"request"`),
    a FastAPI dependency (`"depends"`), or None (an argument). Raises `TypeError`, naming
    the parameter and what to do, for a kind that cannot be served."""
    base, metadata = _split_annotated(annotation)
    markers = [*metadata, param.default]
    kinds = {kind for kind in map(_fastapi_marker, markers) if kind is not None}
    if "param" in kinds:
        marker = next(m for m in markers if _fastapi_marker(m) == "param")
        raise TypeError(
            f"{handler}: parameter {name!r} is a fastapi.{type(marker).__name__}(...): a "
            "handler's arguments are the JSON-RPC call's arguments, not the HTTP query, "
            "headers, cookies or body. Make it a plain parameter (constraints with "
            "pydantic's Field), or read the HTTP request through a `Request` parameter, "
            "ctx.request or a dependency"
        )
    if "depends" in kinds:
        return "depends"
    if isinstance(base, type) and issubclass(base, Request):
        return "request"
    if isinstance(base, type) and issubclass(
        base, (HTTPConnection, Response, BackgroundTasks, WebSocket)
    ):
        raise TypeError(
            f"{handler}: parameter {name!r} of type {base.__name__} cannot be served: the "
            "MCP reply is written by the server, after the handler returns. Take a "
            "`Request` (starlette.requests.Request) to read the HTTP request"
        )
    return None


def _split_annotated(annotation: Any) -> tuple[Any, tuple[Any, ...]]:
    if typing.get_origin(annotation) is typing.Annotated:
        base, *metadata = typing.get_args(annotation)
        return base, tuple(metadata)
    return annotation, ()


def _fastapi_marker(value: Any) -> Literal["depends", "param"] | None:
    """`Depends`/`Security`, or a request-parameter marker (`Query`, `Header`, `Cookie`,
    `Path`, `Body`, `Form`, `File`). FastAPI is imported already if the value is one."""
    params = sys.modules.get("fastapi.params")
    if params is None:
        return None
    if isinstance(value, params.Depends):
        return "depends"
    if isinstance(value, (params.Param, params.Body)):
        return "param"
    return None


class Dependencies:
    """A handler's FastAPI dependencies: resolved around each call, closed after it."""

    __slots__ = ("_dependant", "_handler", "_names", "_solver")

    def __init__(
        self, handler: str, dependant: Dependant, names: tuple[str, ...], solver: Solver
    ) -> None:
        self._handler = handler
        self._dependant = dependant
        self._names = names
        self._solver = solver

    @classmethod
    def build(
        cls, fn: Callable[..., Any], params: Sequence[inspect.Parameter], *, name: str
    ) -> Dependencies:
        """Analyse the dependency parameters of `fn` (annotations already resolved) with
        FastAPI; raise `TypeError` if FastAPI is missing or untested, or if a dependency
        needs something a handler cannot give it."""
        solver = Solver.installed(name)

        def dependencies() -> None:  # stands for the handler: its dependency parameters only
            pass

        dependencies.__signature__ = inspect.Signature(list(params))  # type: ignore[attr-defined]
        dependencies.__name__ = dependencies.__qualname__ = getattr(fn, "__name__", name)
        try:
            dependant = solver.get_dependant(path="", call=dependencies)
        except (AssertionError, TypeError, ValueError) as exc:
            raise TypeError(f"{name}: FastAPI refuses its dependencies: {exc}") from exc
        for where, problem in _unservable(dependant):
            raise TypeError(f"{name}: dependency {where} cannot be served: {problem}")
        return cls(name, dependant, tuple(p.name for p in params), solver)

    async def call(
        self, fn: Callable[..., Any], kwargs: dict[str, Any], ctx: Context, *, is_async: bool
    ) -> Any:
        """Resolve the dependencies, call `fn` with them, close them (see the module)."""
        request = ctx.request
        asgi_scope = request.scope
        app = asgi_scope.get("app")
        overrides = app if getattr(app, "dependency_overrides", None) is not None else None
        guard = anyio.CancelScope()  # shielded with a deadline once the call is over
        thread: _HandlerThread | None = None
        cleanup_scopes: list[anyio.CancelScope] = []
        failure: BaseException | None = None
        result: Any = None
        with guard:
            async with AsyncExitStack() as request_stack:
                asgi_scope["fastapi_inner_astack"] = asgi_scope["fastapi_astack"] = request_stack
                async with AsyncExitStack() as function_stack:
                    asgi_scope["fastapi_function_astack"] = function_stack
                    try:
                        solved = await self._solver.solve(
                            request, self._dependant, overrides, request_stack
                        )
                        if solved.errors:
                            raise McpError(
                                INVALID_PARAMS,
                                f"{self._handler}: the HTTP request does not satisfy its "
                                f"dependencies: {_describe(solved.errors)}",
                            )
                        kwargs.update({name: solved.values[name] for name in self._names})
                        if is_async:
                            result = await fn(**kwargs)
                        else:
                            thread = _HandlerThread(fn, kwargs)
                            result = await ctx.run_sync(thread.run)
                    except BaseException as exc:
                        failure = exc
                        raise
                    finally:
                        guard.shield = True
                        guard.deadline = anyio.current_time() + ctx.cancel_grace
                        cleanup_scopes = list(_cleanup_cancel_scopes(asgi_scope))
                        for cleanup in cleanup_scopes:  # FastAPI shields each async exit
                            cleanup.deadline = min(cleanup.deadline, guard.deadline)
                        if thread is not None:
                            await thread.wait_returned()
        for key in _STACK_KEYS:
            asgi_scope.pop(key, None)
        if guard.cancelled_caught or any(c.cancelled_caught for c in cleanup_scopes):
            _errors.warning(
                "%s: its dependencies did not close within %g s (cancel_grace)",
                self._handler,
                ctx.cancel_grace,
                extra={"request_id": ctx.request_id, "method": ctx.method},
            )
        await anyio.lowlevel.checkpoint_if_cancelled()
        if failure is not None:  # a dependency swallowed it, or the close timed out
            raise failure
        return result


_STACK_KEYS: Final = ("fastapi_astack", "fastapi_inner_astack", "fastapi_function_astack")
"""Where FastAPI's `yield` dependencies find the exit stacks `Dependencies.call` sets:
`fastapi_astack` before 0.106 (no `async_exit_stack` parameter), the other two from 0.121."""


def _cleanup_cancel_scopes(asgi_scope: Any) -> Iterator[anyio.CancelScope]:
    """The cancel scopes FastAPI keeps in the ASGI scope around async dependency exits."""
    cancel_scopes = asgi_scope.get("fastapi_async_cleanup_scopes")
    if isinstance(cancel_scopes, dict):
        yield from (s for s in cancel_scopes.values() if isinstance(s, anyio.CancelScope))


class _HandlerThread:
    """A plain `def` handler's worker thread, so that its dependencies close only once it
    has returned. If the call is abandoned before the thread starts, it never starts."""

    __slots__ = ("_fn", "_kwargs", "_lock", "_state", "_waiter")

    def __init__(self, fn: Callable[..., Any], kwargs: dict[str, Any]) -> None:
        self._fn = fn
        self._kwargs = kwargs
        self._lock = threading.Lock()
        self._state: Literal["queued", "running", "done", "left"] = "queued"
        self._waiter: anyio.Event | None = None

    def run(self) -> Any:
        """In the worker thread: the handler's call."""
        with self._lock:
            if self._state == "left":  # the dependencies are closing or closed
                raise RequestCancelled(CancelReason.SERVER_SHUTDOWN)
            self._state = "running"
        try:
            return self._fn(**self._kwargs)
        finally:
            with self._lock:
                self._state = "done"
                waiter = self._waiter
            if waiter is not None:
                with contextlib.suppress(Exception):  # the event loop is gone
                    anyio.from_thread.run_sync(waiter.set)

    async def wait_returned(self) -> None:
        """On the loop, after the call returned or was abandoned: wait for the thread if
        it still runs; keep it from starting if it has not."""
        with self._lock:
            if self._state == "queued":
                self._state = "left"
            if self._state != "running":
                return
            self._waiter = waiter = anyio.Event()
        await waiter.wait()


def _unservable(dependant: Dependant, chain: tuple[str, ...] = ()) -> Iterator[tuple[str, str]]:
    """What in a dependency tree a handler cannot provide: (where, why)."""
    for sub in dependant.dependencies:
        name = getattr(sub.call, "__name__", repr(sub.call))
        where = " -> ".join((*chain, f"{sub.name or '?'}={name}"))
        if sub.body_params:
            params = ", ".join(repr(f.name) for f in sub.body_params)
            yield (
                where,
                (
                    f"its parameters {params} read the HTTP body (Body, Form, File, or a "
                    "pydantic model): the body is the JSON-RPC message. Pass such values as "
                    "the tool's arguments"
                ),
            )
        if sub.websocket_param_name or sub.response_param_name:
            yield where, "it takes a WebSocket or Response: MCP handlers have neither"
        if sub.background_tasks_param_name:
            yield (
                where,
                (
                    "it takes BackgroundTasks, which would never run: start the work in the "
                    "handler (e.g. in the app's task group)"
                ),
            )
        yield from _unservable(sub, (*chain, f"{sub.name or '?'}={name}"))


def _describe(errors: Sequence[Any]) -> str:
    problems = []
    for error in errors:
        if isinstance(error, dict):
            where = ".".join(str(part) for part in error.get("loc", ())) or "request"
            problems.append(f"{where}: {error.get('msg', error)}")
        else:
            problems.append(str(error))
    return "; ".join(problems)


class Solved(NamedTuple):
    """What the solver found: the dependencies' values by name, or the request's errors."""

    values: dict[str, Any]
    errors: list[Any]


class Solver:
    """FastAPI's dependency solver (`fastapi.dependencies.utils`) as a handler calls it.

    Read once per handler, at registration. Its shapes since 0.100: it returns the tuple
    `(values, errors, background_tasks, response, cache)` before 0.112.3 and a
    `SolvedDependency` since; it takes the request's exit stack as `async_exit_stack` from
    0.106 (unused from 0.121; before 0.106 and from 0.121, `yield` dependencies use the
    stacks in the ASGI scope that `Dependencies.call` sets), and `embed_body_fields` (no body
    here) from 0.112.4. A solver of another shape (a newer FastAPI that changed it) is
    refused with a `TypeError` naming the version."""

    __slots__ = ("_fixed", "_solve", "_takes_stack", "_tuple", "get_dependant")

    def __init__(self, utils: Any, version: str, *, handler: str) -> None:
        solve = getattr(utils, "solve_dependencies", None)
        get_dependant = getattr(utils, "get_dependant", None)
        if not callable(solve) or not callable(get_dependant):
            raise _changed(handler, version, "no solve_dependencies or get_dependant")
        self.get_dependant: Callable[..., Dependant] = get_dependant
        signature = inspect.signature(solve)
        params = signature.parameters
        missing = [name for name in _PASSED if name not in params]
        unknown = [
            name
            for name, param in params.items()
            if param.default is param.empty
            and param.kind not in (param.VAR_POSITIONAL, param.VAR_KEYWORD)
            and name not in _PASSED
            and name not in _SUPPLIED
        ]
        if missing or unknown:
            problem = ", ".join(
                [
                    *(f"has no {n!r} parameter" for n in missing),
                    *(f"requires {n!r}" for n in unknown),
                ]
            )
            raise _changed(handler, version, f"solve_dependencies {problem}")
        returns = signature.return_annotation
        solved = getattr(utils, "SolvedDependency", None)
        named = isinstance(returns, str) and returns.rsplit(".", 1)[-1] == "SolvedDependency"
        self._tuple = typing.get_origin(returns) is tuple and len(typing.get_args(returns)) == 5
        if not self._tuple and (solved is None or not (returns is solved or named)):
            raise _changed(handler, version, f"solve_dependencies returns {returns!r}")
        self._solve: Callable[..., Any] = solve
        self._takes_stack = "async_exit_stack" in params
        self._fixed = {"embed_body_fields": False} if "embed_body_fields" in params else {}

    @classmethod
    def installed(cls, handler: str) -> Solver:
        """The installed FastAPI's solver; `TypeError` if FastAPI is missing, older than
        `TESTED_FASTAPI` or its solver has another shape."""
        try:
            fastapi = importlib.import_module("fastapi")
            utils = importlib.import_module("fastapi.dependencies.utils")
        except ImportError as exc:
            raise TypeError(
                f"{handler}: FastAPI dependencies need FastAPI {TESTED_FASTAPI}: {_INSTALL}"
            ) from exc
        version = str(getattr(fastapi, "__version__", "unknown"))
        check_fastapi_version(version, handler=handler)
        return cls(utils, version, handler=handler)

    async def solve(
        self, request: Request, dependant: Dependant, overrides: Any, stack: AsyncExitStack
    ) -> Solved:
        """The dependencies of one call, solved."""
        stack_arg = {"async_exit_stack": stack} if self._takes_stack else {}
        result = await self._solve(
            request=request,
            dependant=dependant,
            dependency_overrides_provider=overrides,
            dependency_cache={},
            **stack_arg,
            **self._fixed,
        )
        if self._tuple:
            return Solved(result[0], result[1])
        return Solved(result.values, result.errors)


_PASSED: Final = ("request", "dependant", "dependency_overrides_provider", "dependency_cache")
_SUPPLIED: Final = ("async_exit_stack", "embed_body_fields")


def _changed(handler: str, version: str, problem: str) -> TypeError:
    return TypeError(
        f"{handler}: FastAPI {version} changed its internal dependency solver "
        f"(fastapi.dependencies.utils: {problem}), which mcp_asgi calls to resolve "
        f"dependencies. FastAPI {TESTED_FASTAPI.removeprefix('>=')} to "
        f"{NEWEST_TESTED_FASTAPI} are tested: install one (pip install "
        f"'fastapi=={NEWEST_TESTED_FASTAPI}') until mcp_asgi supports {version}"
    )


def check_fastapi_version(version: str, *, handler: str) -> None:
    """Raise `TypeError` if `version` is older than `TESTED_FASTAPI`."""
    numbers = tuple(int(part) for part in re.findall(r"\d+", version)[:3])
    if numbers < _LOWEST:
        raise TypeError(
            f"{handler}: FastAPI {version} is installed, but mcp_asgi resolves dependencies "
            f"with FastAPI's internal solver and supports fastapi{TESTED_FASTAPI} "
            f"(the pydantic 2 era): {_INSTALL}"
        )
