"""FastAPI dependencies in handlers: resolved as FastAPI resolves them for the host app
(sub-dependencies, `yield` dependencies closed after the call, also after an error and a
cancel, `app.dependency_overrides`, one cache per request), never in `inputSchema`, and
refused at registration when they cannot be served."""

from __future__ import annotations

import inspect
import logging
import re
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Annotated, Any

import anyio
import fastapi
import fastapi.dependencies.utils
import pytest
from fastapi import BackgroundTasks, Body, Depends, FastAPI, Header, Query, Response
from pydantic import BaseModel

from mcp_asgi import CancelReason, Context, McpServer
from mcp_asgi.server.depends import NEWEST_TESTED_FASTAPI, TESTED_FASTAPI

from ..auth.apps import Ran
from ..auth.test_host_identity import host_authenticated
from ..helpers import Probe, call, mcp_app, wait_for, wire_for
from .handler_apps import DependencyLog, fastapi_host


async def call_tool(app: Any, name: str, arguments: dict[str, Any] | None = None, **kw: Any) -> Any:
    wire = await call(app, "tools/call", {"name": name, "arguments": arguments or {}}, **kw)
    assert wire.status == 200, wire.body
    return wire


# -- resolution --------------------------------------------------------------------------


async def test_dependencies_are_resolved_and_never_in_the_schema(
    depends_app: FastAPI, dependency_log: DependencyLog
) -> None:
    """The tool gets its dependencies; the client sees only its real arguments."""
    tools = (await call(depends_app, "tools/list")).result["tools"]
    lookup = next(t for t in tools if t["name"] == "lookup")
    assert lookup["inputSchema"]["properties"].keys() == {"key"}
    assert lookup["inputSchema"]["required"] == ["key"]
    assert next(t for t in tools if t["name"] == "whoami")["inputSchema"]["properties"] == {}

    wire = await call_tool(depends_app, "lookup", {"key": "k"})
    assert wire.result["content"][0]["text"] == "k@memory:// (memory://)"
    assert dependency_log.events == ["settings", "open", "close"]


async def test_one_cache_per_request(depends_app: FastAPI, dependency_log: DependencyLog) -> None:
    """`settings` is used by the tool and by `connection`: called once per request."""
    await call_tool(depends_app, "lookup", {"key": "a"})
    await call_tool(depends_app, "lookup", {"key": "b"})
    assert dependency_log.count("settings") == 2
    assert dependency_log.count("open") == dependency_log.count("close") == 2


async def test_resources_prompts_and_sync_handlers_get_dependencies(
    depends_app: FastAPI, dependency_log: DependencyLog
) -> None:
    """The same dependencies reach a resource template, a prompt and a `def` tool; each
    call closes its own."""
    read = await call(depends_app, "resources/read", {"uri": "kv://x"})
    assert read.result["contents"][0]["text"] == "x@memory://"
    templates = (await call(depends_app, "resources/templates/list")).result
    assert templates["resourceTemplates"][0]["uriTemplate"] == "kv://{key}"
    prompt = await call(depends_app, "prompts/get", {"name": "ask", "arguments": {"topic": "t"}})
    assert prompt.result["messages"][0]["content"]["text"] == "Tell me about t (memory://)"
    prompts = (await call(depends_app, "prompts/list")).result["prompts"]
    assert [a["name"] for a in prompts[0]["arguments"]] == ["topic"]
    wire = await call_tool(depends_app, "sync_lookup", {"key": "s"})
    assert wire.result["content"][0]["text"] == "s@memory:// in a thread"
    assert dependency_log.count("open") == dependency_log.count("close") == 3


async def test_a_dependency_reads_a_header_of_the_http_request(depends_app: FastAPI) -> None:
    """`Header()` in a dependency reads the HTTP request; a missing one is -32602."""
    wire = await call_tool(depends_app, "whoami", headers={"x-caller": "alice"})
    assert wire.result["content"][0]["text"] == "alice"
    missing = await call(depends_app, "tools/call", {"name": "whoami", "arguments": {}})
    assert missing.status == 200
    assert missing.error["code"] == -32602
    assert "x-caller" in missing.error["message"]


async def test_a_plain_starlette_host_resolves_dependencies_without_overrides() -> None:
    """With no FastAPI app around, dependencies still resolve (no overrides to honour)."""
    server = McpServer("plain")

    @server.tool()
    async def greet(who: Annotated[str, Depends(lambda: "world")]) -> str:
        return f"hello {who}"

    wire = await call_tool(mcp_app(server), "greet")
    assert wire.result["content"][0]["text"] == "hello world"


async def test_a_security_dependency_gets_its_scopes_which_are_the_tool_s() -> None:
    """`Security(admin_principal, scopes=["admin"])` (tests/auth/apps.py, `secured`):
    without the scope the call is 403 before the dependency runs; with it, the dependency
    gets the principal and `SecurityScopes(["admin"])`. The host's identity stands in for
    a token (tests/auth/test_bearer.py does the same with a real authorization server)."""
    ran = Ran()
    app = host_authenticated(ran)
    refused = await call(
        app,
        "tools/call",
        {"name": "secured", "arguments": {}},
        headers={"x-user": "alice tools:read"},
    )
    assert refused.status == 403
    assert ran.calls == []
    served = await call_tool(app, "secured", headers={"x-user": "alice tools:read admin"})
    assert served.result["content"][0]["text"] == "secured for alice"
    assert ran.calls == ["secured"]


# -- overrides -------------------------------------------------------------------------------

_opened: list[str] = []


async def real_store() -> AsyncIterator[str]:
    _opened.append("real")
    yield "real store"


def fake_store() -> str:
    return "fake store"


def store_server() -> McpServer:
    server = McpServer("store")

    @server.tool()
    async def which(store: Annotated[str, Depends(real_store)]) -> str:
        return store

    return server


async def test_app_dependency_overrides_replace_a_dependency() -> None:
    """`app.dependency_overrides` of the host FastAPI app applies to handlers too."""
    _opened.clear()
    app = fastapi_host(store_server())
    app.dependency_overrides[real_store] = fake_store
    assert (await call_tool(app, "which")).result["content"][0]["text"] == "fake store"
    assert _opened == []
    app.dependency_overrides.clear()
    assert (await call_tool(app, "which")).result["content"][0]["text"] == "real store"
    assert _opened == ["real"]


# -- closing `yield` dependencies -----------------------------------------------------------


async def test_a_yield_dependency_closes_after_a_tool_error(
    depends_app: FastAPI, dependency_log: DependencyLog
) -> None:
    """The tool fails: the dependency sees the exception, closes, and the failure is the
    usual `isError` result."""
    wire = await call_tool(depends_app, "broken")
    assert wire.result["isError"] is True
    assert "ValueError: no such key" in wire.result["content"][0]["text"]
    assert dependency_log.events == ["settings", "open", "closed by ValueError", "close"]


async def test_a_yield_dependency_closes_when_the_call_is_cancelled(
    depends_app: FastAPI, dependency_log: DependencyLog, probe: Probe
) -> None:
    """The client leaves mid-call: the handler is cancelled and the dependency closes in
    its task, before the request ends."""
    wire = wire_for("tools/call", {"name": "slow", "arguments": {}}, leave_on=probe.started)
    with anyio.fail_after(10):
        await wire.run(depends_app)
    assert probe.reason is CancelReason.CLIENT_DISCONNECT
    assert dependency_log.events[-1] == "close"
    assert dependency_log.events[-2].startswith("closed by ")  # the loop's cancellation
    assert wire.written_after_disconnect == []


async def test_a_sync_handler_thread_returns_before_its_dependencies_close(
    depends_app: FastAPI, dependency_log: DependencyLog, probe: Probe
) -> None:
    """A `def` handler is cancelled while its thread runs: the connection stays open until
    the thread returns (within the cancel grace), then closes."""
    wire = wire_for("tools/call", {"name": "blocking", "arguments": {}}, leave_on=probe.started)
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(wire.run, depends_app)
            await wait_for(probe.started)
            await anyio.sleep(0.2)  # the client has left; the thread still runs
            assert "close" not in dependency_log.events
            probe.release.set()
    assert dependency_log.events[-3:] == [
        "thread returned, connection open: True",
        dependency_log.events[-2],
        "close",
    ]
    assert dependency_log.events[-2].startswith("closed by ")


async def stuck() -> AsyncIterator[str]:
    """A dependency whose exit never ends."""
    try:
        yield "x"
    finally:
        await anyio.sleep_forever()


async def test_a_dependency_exit_that_hangs_is_bounded_by_the_cancel_grace(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A dependency whose exit never ends is cancelled `cancel_grace` seconds after the
    call; the result still goes out, and a WARNING says so."""
    server = McpServer("stuck")

    @server.tool()
    async def quick(value: Annotated[str, Depends(stuck)]) -> str:
        return value

    app = fastapi_host(server, cancel_grace=0.1, process_kill_grace=0.1)
    with caplog.at_level(logging.WARNING, logger="mcp_asgi.errors"), anyio.fail_after(5):
        wire = await call_tool(app, "quick")
    assert wire.result["content"][0]["text"] == "x"
    assert any("did not close within 0.1 s" in r.getMessage() for r in caplog.records)


# -- refused at registration -------------------------------------------------------------------


class Item(BaseModel):
    name: str


def needs_body(item: Item) -> str:
    return item.name


def needs_tasks(tasks: BackgroundTasks) -> str:
    return "x"


def needs_response(response: Response) -> str:
    return "x"


async def _h_query(q: Annotated[str, Query()]) -> str:
    return q


async def _h_header(x_token: str = Header()) -> str:
    return x_token


async def _h_body(payload: Annotated[dict[str, Any], Body()]) -> str:
    return ""


async def _h_args(*names: str) -> str:
    return ""


async def _h_kwargs(**names: str) -> str:
    return ""


async def _h_positional(name: str, /) -> str:
    return name


async def _h_response(response: Response) -> str:
    return ""


async def _h_tasks(tasks: BackgroundTasks) -> str:
    return ""


async def _h_dep_body(name: Annotated[str, Depends(needs_body)]) -> str:
    return name


async def _h_dep_tasks(x: Annotated[str, Depends(needs_tasks)]) -> str:
    return x


async def _h_dep_response(x: str = Depends(needs_response)) -> str:
    return x


@pytest.mark.parametrize(
    ("handler", "says"),
    [
        (_h_query, ["'q'", "fastapi.Query", "plain parameter"]),
        (_h_header, ["'x_token'", "fastapi.Header", "Request"]),
        (_h_body, ["'payload'", "fastapi.Body"]),
        (_h_args, ["*names", "named parameter"]),
        (_h_kwargs, ["**names", "named parameter"]),
        (_h_positional, ["'name'", "positional-only", "remove the '/'"]),
        (_h_response, ["'response'", "Response", "Take a `Request`"]),
        (_h_tasks, ["'tasks'", "BackgroundTasks"]),
        (_h_dep_body, ["name=needs_body", "'item'", "HTTP body", "tool's arguments"]),
        (_h_dep_tasks, ["x=needs_tasks", "BackgroundTasks", "never run"]),
        (_h_dep_response, ["x=needs_response", "Response"]),
    ],
    ids=lambda v: getattr(v, "__name__", "")[3:] or None,
)
def test_what_cannot_be_served_is_refused_at_registration(
    handler: Callable[..., Any], says: list[str]
) -> None:
    """The error names the handler and the parameter, and says what to do."""
    server = McpServer("refused")
    with pytest.raises(TypeError) as caught:
        server.tool(name="t")(handler)
    message = str(caught.value)
    assert message.startswith("tool 't': ")
    for part in says:
        assert part in message


def test_an_untested_fastapi_version_is_refused_at_registration(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Outside the tested range the solver may have changed: registration says which
    version is installed and which range is supported."""
    monkeypatch.setattr(fastapi, "__version__", "0.99.1")
    server = McpServer("old")
    with pytest.raises(TypeError) as caught:
        server.tool(name="t")(_h_dep_tasks)
    assert "FastAPI 0.99.1 is installed" in str(caught.value)
    assert f"fastapi{TESTED_FASTAPI}" in str(caught.value)
    assert "pip install 'mcp-asgi[fastapi]'" in str(caught.value)


def test_dependencies_without_fastapi_s_solver_are_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Without FastAPI's solver (FastAPI not installed), the error says how to get it."""
    monkeypatch.setitem(sys.modules, "fastapi.dependencies.utils", None)
    server = McpServer("none")

    async def handler(x: Annotated[str, Depends(lambda: "x")]) -> str:
        return x

    with pytest.raises(
        TypeError, match=r"tool 't': FastAPI dependencies need FastAPI .*mcp-asgi\[fastapi\]"
    ):
        server.tool(name="t")(handler)


def test_a_handler_without_dependencies_never_needs_fastapi(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Registration only looks for FastAPI's markers when FastAPI is loaded; a plain
    handler registers with FastAPI's solver unavailable."""
    monkeypatch.setitem(sys.modules, "fastapi.dependencies.utils", None)
    server = McpServer("plain")

    @server.tool()
    async def plain(q: str, ctx: Context) -> str:
        return q

    assert server.has_method("tools/call")


def test_a_completion_handler_cannot_take_dependencies() -> None:
    server = McpServer("complete")

    @server.prompt()
    async def ask(topic: str) -> str:
        return topic

    async def suggest(
        argument: str, value: str, dep: Annotated[str, Depends(lambda: "x")]
    ) -> list[str]:
        return []

    with pytest.raises(TypeError, match=r"completion ask: .* cannot take a Request or FastAPI"):
        server.completion(prompt="ask")(suggest)


# -- FastAPI versions: no ceiling, the solver's shape is checked ------------------------------

ROOT = Path(__file__).resolve().parents[2]
_real_solve = fastapi.dependencies.utils.solve_dependencies
# The fakes below wrap the solver of FastAPI >= 0.112.4; `make fastapi-range` runs the
# older shapes for real.
wraps_the_solver = pytest.mark.skipif(
    "embed_body_fields" not in inspect.signature(_real_solve).parameters,
    reason="wraps the solver of FastAPI >= 0.112.4",
)


def greet_server() -> McpServer:
    server = McpServer("greet")

    @server.tool()
    async def greet(who: Annotated[str, Depends(lambda: "world")]) -> str:
        return f"hello {who}"

    return server


async def test_a_newer_fastapi_with_the_same_solver_is_accepted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """No upper bound: a release above the newest tested one registers and resolves."""
    monkeypatch.setattr(fastapi, "__version__", "1.2.0")
    wire = await call_tool(mcp_app(greet_server()), "greet")
    assert wire.result["content"][0]["text"] == "hello world"


@wraps_the_solver
async def test_a_solver_without_the_unused_exit_stack_is_called_without_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """FastAPI 0.121+ keeps `async_exit_stack` only until it removes it (its own TODO): the
    adapter passes the keywords the installed solver declares, read at registration."""
    received: list[list[str]] = []

    async def solve_dependencies(
        *,
        request: Any,
        dependant: Any,
        dependency_overrides_provider: Any = None,
        dependency_cache: Any = None,
        embed_body_fields: bool,
        **inner: Any,  # FastAPI's solver calls itself for sub-dependencies with its stack
    ) -> fastapi.dependencies.utils.SolvedDependency:
        received.append(sorted(inner))
        async with AsyncExitStack() as stack:  # the real solver still requires one
            inner.setdefault("async_exit_stack", stack)
            return await _real_solve(
                request=request,
                dependant=dependant,
                dependency_overrides_provider=dependency_overrides_provider,
                dependency_cache=dependency_cache,
                embed_body_fields=embed_body_fields,
                **inner,
            )

    monkeypatch.setattr(fastapi.dependencies.utils, "solve_dependencies", solve_dependencies)
    wire = await call_tool(mcp_app(greet_server()), "greet")
    assert wire.result["content"][0]["text"] == "hello world"
    assert received[0] == []  # the handler's own call: no async_exit_stack


_CLOSED: list[str] = []


async def _session() -> AsyncIterator[str]:
    yield "session"
    _CLOSED.append("session")


@wraps_the_solver
async def test_a_solver_of_fastapi_0_100_s_shape_is_called_as_it_was(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Before 0.112.3 the solver returns a tuple, and before 0.106 it takes no exit stack:
    its `yield` dependencies use the scope's `fastapi_astack`, set for the call only."""
    scopes: list[dict[str, Any]] = []
    _CLOSED.clear()

    async def solve_dependencies(
        *,
        request: Any,
        dependant: Any,
        dependency_overrides_provider: Any = None,
        dependency_cache: Any = None,
        **inner: Any,  # FastAPI's solver calls itself for sub-dependencies
    ) -> Any:
        if inner:
            return await _real_solve(
                request=request,
                dependant=dependant,
                dependency_overrides_provider=dependency_overrides_provider,
                dependency_cache=dependency_cache,
                **inner,
            )
        scopes.append(request.scope)
        solved = await _real_solve(
            request=request,
            dependant=dependant,
            dependency_overrides_provider=dependency_overrides_provider,
            dependency_cache=dependency_cache,
            async_exit_stack=request.scope["fastapi_astack"],
            embed_body_fields=False,
        )
        return solved.values, solved.errors, None, solved.response, solved.dependency_cache

    solve_dependencies.__annotations__["return"] = tuple[
        dict[str, Any], list[Any], Any, Any, dict[Any, Any]
    ]
    monkeypatch.setattr(fastapi.dependencies.utils, "solve_dependencies", solve_dependencies)

    server = McpServer("old")

    @server.tool()
    async def use(s: Annotated[str, Depends(_session)]) -> str:
        return s

    wire = await call_tool(mcp_app(server), "use")
    assert wire.result["content"][0]["text"] == "session"
    assert _CLOSED == ["session"]
    assert "fastapi_astack" not in scopes[0]


async def _requires_more(**kwargs: Any) -> Any:
    raise AssertionError("never called")


_real = inspect.signature(_real_solve)
_requires_more.__signature__ = _real.replace(  # type: ignore[attr-defined]
    parameters=[
        *_real.parameters.values(),
        inspect.Parameter("scopes_cache", inspect.Parameter.KEYWORD_ONLY),
    ]
)


async def _no_cache(
    *, request: Any, dependant: Any, dependency_overrides_provider: Any = None
) -> fastapi.dependencies.utils.SolvedDependency:
    raise AssertionError("never called")


async def _returns_a_tuple(
    *,
    request: Any,
    dependant: Any,
    dependency_overrides_provider: Any = None,
    dependency_cache: Any = None,
) -> tuple[dict[str, Any], list[Any]]:
    raise AssertionError("never called")


@pytest.mark.parametrize(
    ("solver", "says"),
    [
        (_requires_more, "solve_dependencies requires 'scopes_cache'"),
        (_no_cache, "solve_dependencies has no 'dependency_cache' parameter"),
        (_returns_a_tuple, "solve_dependencies returns"),
        (None, "no solve_dependencies or get_dependant"),
    ],
    ids=["new-required-parameter", "parameter-gone", "other-result", "gone"],
)
def test_a_fastapi_whose_solver_changed_is_refused_at_registration(
    monkeypatch: pytest.MonkeyPatch, solver: Any, says: str
) -> None:
    """The day a FastAPI release changes the solver, registration says so, naming that
    release, what changed and the newest tested FastAPI to install meanwhile."""
    monkeypatch.setattr(fastapi, "__version__", "0.999.0")
    monkeypatch.setattr(fastapi.dependencies.utils, "solve_dependencies", solver)
    with pytest.raises(TypeError) as caught:
        greet_server()
    message = str(caught.value)
    assert message.startswith("tool 'greet': FastAPI 0.999.0 changed its internal dependency")
    assert says in message
    assert f"pip install 'fastapi=={NEWEST_TESTED_FASTAPI}'" in message


def test_the_tested_fastapi_matrix_is_the_one_the_code_and_docs_name() -> None:
    """`make fastapi-range` (in make test) runs these tests with FASTAPI_VERSIONS: its
    oldest is the floor of TESTED_FASTAPI and of the `fastapi` extras, its newest is
    NEWEST_TESTED_FASTAPI (the version the refusal above recommends), and docs/handlers.md
    lists them. To test a newer FastAPI, append it to FASTAPI_VERSIONS and move
    NEWEST_TESTED_FASTAPI and the page with it."""
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    match = re.search(r"^FASTAPI_VERSIONS \?= (.+)$", makefile, re.MULTILINE)
    assert match is not None
    versions = match.group(1).split()
    assert f">={versions[0]}" == TESTED_FASTAPI
    assert versions[-1] == NEWEST_TESTED_FASTAPI
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert pyproject.count(f'"fastapi{TESTED_FASTAPI}"') == 2  # the fastapi and test extras
    page = " ".join((ROOT / "docs" / "handlers.md").read_text(encoding="utf-8").split())
    assert f"**FastAPI {TESTED_FASTAPI.replace('>=', '>= ')}**" in page
    assert f"(tested: {', '.join(versions)};" in page
    assert f"pip install 'fastapi=={NEWEST_TESTED_FASTAPI}'" in page
