"""The public surface: the root's names, each integration subpackage's, where moved names went,
and the constructors' shapes (docs/reference/index.md says the rule)."""

from __future__ import annotations

import ast
import importlib
import inspect
import re
import textwrap
from pathlib import Path

import pytest

import mcp_asgi
from mcp_asgi import McpMiddleware, McpServer

ROOT_DIR = Path(__file__).resolve().parent.parent
_PYTHON_BLOCK = re.compile(r"```python\n(.*?)```", re.DOTALL)

ROOT = [
    "Annotations",
    "Audio",
    "BlobResource",
    "CancelReason",
    "CancelToken",
    "ContentBlock",
    "Context",
    "EmbeddedResource",
    "Icon",
    "Image",
    "McpError",
    "McpMiddleware",
    "McpServer",
    "McpSettings",
    "PromptSource",
    "RequestCancelled",
    "ResourceLink",
    "ResourceSource",
    "SourceItem",
    "TextContent",
    "TextResource",
    "ToolAnnotations",
    "ToolNameWarning",
    "ToolResult",
    "ToolSource",
    "__version__",
    "mounted_lifespan",
]
"""What a handler author needs: `mcp_asgi.__all__`."""

INTEGRATIONS = {
    "mcp_asgi.auth": ["InvalidToken", "Principal", "ProtectedResourceMetadata", "TokenVerifier"],
    "mcp_asgi.bus": ["ChangeEvent", "InProcessBus", "NotificationBus"],
    "mcp_asgi.bus.redis": ["RedisBus", "bus_from_url"],
    "mcp_asgi.downstream": [
        "Downstream",
        "DownstreamInputUnsupported",
        "DownstreamPrompts",
        "DownstreamResources",
        "DownstreamTools",
        "DownstreamUnavailable",
    ],
    "mcp_asgi.input": ["ElicitResult", "InputRequired"],
    "mcp_asgi.routes": ["AppRoutes"],
    "mcp_asgi.stdio": ["run_stdio", "serve_stdio"],
    "mcp_asgi.testing": [
        "PROTOCOL_VERSION",
        "LiveServer",
        "McpResponse",
        "McpStream",
        "McpTestClient",
        "encode_header_value",
        "request_meta",
        "serve",
    ],
}
"""Each public subpackage and its public names (docs/reference/index.md#what-is-public)."""

PUBLIC = {"mcp_asgi": ROOT, **INTEGRATIONS}
"""Every public module and its names: everything else is internal."""

MOVED = {
    "InvalidToken": "mcp_asgi.auth",
    "Principal": "mcp_asgi.auth",
    "ProtectedResourceMetadata": "mcp_asgi.auth",
    "TokenVerifier": "mcp_asgi.auth",
    "AppRoutes": "mcp_asgi.routes",
    "Downstream": "mcp_asgi.downstream",
    "DownstreamInputUnsupported": "mcp_asgi.downstream",
    "DownstreamPrompts": "mcp_asgi.downstream",
    "DownstreamResources": "mcp_asgi.downstream",
    "DownstreamTools": "mcp_asgi.downstream",
    "DownstreamUnavailable": "mcp_asgi.downstream",
    "run_stdio": "mcp_asgi.stdio",
    "serve_stdio": "mcp_asgi.stdio",
}
"""The names the root exported before the surface was decided, and where each went."""

# mcp_asgi.bus.redis is a module that needs the `redis` extra, not a package: it has no
# `__all__` of its own, and its names are pinned above.
_WITHOUT_ALL = {"mcp_asgi.bus.redis"}


def test_root_is_pinned_and_sorted() -> None:
    """`mcp_asgi.__all__` is exactly the handler author's names, sorted."""
    assert mcp_asgi.__all__ == ROOT
    assert sorted(mcp_asgi.__all__) == mcp_asgi.__all__


@pytest.mark.parametrize("module", sorted(set(INTEGRATIONS) - _WITHOUT_ALL))
def test_each_integration_is_pinned(module: str) -> None:
    """Each public subpackage's `__all__` is exactly its public names (ruff's RUF022 keeps
    it sorted)."""
    assert importlib.import_module(module).__all__ == INTEGRATIONS[module]


@pytest.mark.parametrize("module", sorted(PUBLIC))
def test_every_public_name_exists(module: str) -> None:
    """Every public name is importable from its public module."""
    imported = importlib.import_module(module)
    assert [name for name in PUBLIC[module] if getattr(imported, name, None) is None] == []


def test_no_name_is_public_twice() -> None:
    """No object is exported from two public modules: the root holds no integration."""
    seen: dict[int, str] = {}
    twice = []
    for module, names in PUBLIC.items():
        imported = importlib.import_module(module)
        for name in names:
            value = getattr(imported, name)
            if isinstance(value, str):
                continue  # equal strings may be one object (__version__, PROTOCOL_VERSION)
            if id(value) in seen:
                twice.append((seen[id(value)], f"{module}.{name}"))
            seen[id(value)] = f"{module}.{name}"
    assert twice == []


@pytest.mark.parametrize("name", sorted(MOVED))
def test_moved_names_are_only_in_their_subpackage(name: str) -> None:
    """A name that moved to an integration is gone from the root, with no alias."""
    assert not hasattr(mcp_asgi, name)
    assert name in importlib.import_module(MOVED[name]).__all__


def _imports(code: str, filename: str) -> list[tuple[str, str]]:
    """The (module, name) pairs `code` imports from mcp_asgi."""
    flags = ast.PyCF_ONLY_AST | ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
    tree = compile(code, filename, "exec", flags=flags)
    found = [node for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)]
    return [
        (node.module, alias.name)
        for node in found
        if node.module is not None and node.module.startswith("mcp_asgi")
        for alias in node.names
    ]


def test_docs_and_examples_import_only_public_names() -> None:
    """What users read and copy (README, guides, examples) imports each name from its
    public module."""
    sources = [
        (str(path), block)
        for path in [ROOT_DIR / "README.md", *sorted((ROOT_DIR / "docs").glob("**/*.md"))]
        for block in _PYTHON_BLOCK.findall(path.read_text(encoding="utf-8"))
    ]
    sources += [
        (str(p), p.read_text(encoding="utf-8")) for p in (ROOT_DIR / "examples").glob("**/*.py")
    ]
    imports = [
        (module, name) for f, code in sources for module, name in _imports(textwrap.dedent(code), f)
    ]
    assert len(imports) > len(ROOT)
    assert [(m, n) for m, n in imports if n not in PUBLIC.get(m, [])] == []


def test_middleware_options_are_keyword_only() -> None:
    """McpMiddleware takes the app positionally and every option by keyword only."""
    parameters = list(inspect.signature(McpMiddleware).parameters.values())
    assert [(p.name, p.kind) for p in parameters[:1]] == [
        ("app", inspect.Parameter.POSITIONAL_OR_KEYWORD)
    ]
    options = {p.name: p for p in parameters[1:]}
    assert list(options) == [
        "server",
        "path",
        "settings",
        "tracer_provider",
        "meter_provider",
        "token_verifier",
    ]
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in options.values())
    assert options["server"].default is inspect.Parameter.empty
    assert all(options[name].default is None for name in list(options)[1:])


def test_server_options_are_keyword_only() -> None:
    """McpServer takes its name positionally and everything else by keyword only."""
    parameters = list(inspect.signature(McpServer).parameters.values())
    assert parameters[0].name == "name"
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in parameters[1:])
    assert {"version", "instructions"} <= {p.name for p in parameters[1:]}


def test_version_is_a_string() -> None:
    """`__version__` is a non-empty version string."""
    assert isinstance(mcp_asgi.__version__, str)
    assert mcp_asgi.__version__


@pytest.mark.parametrize(
    "old",
    [
        "mcp_asgi.cancel",
        "mcp_asgi.context",
        "mcp_asgi.jsonrpc",
        "mcp_asgi.scope",
        "mcp_asgi.redis_bus",
    ],
)
def test_no_old_import_paths(old: str) -> None:
    """The never-released library keeps no module that only re-exports another's names
    (docs/architecture.md says where each went)."""
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module(old)
