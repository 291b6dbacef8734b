"""The public surface: names exported from `mcp_asgi` and the constructors' shapes."""

from __future__ import annotations

import importlib
import inspect

import pytest

import mcp_asgi
from mcp_asgi import McpMiddleware, McpServer

EXPORTED = [
    "Annotations",
    "AppRoutes",
    "Audio",
    "BlobResource",
    "CancelReason",
    "CancelToken",
    "ContentBlock",
    "Context",
    "Downstream",
    "DownstreamInputUnsupported",
    "DownstreamPrompts",
    "DownstreamResources",
    "DownstreamTools",
    "DownstreamUnavailable",
    "EmbeddedResource",
    "Icon",
    "Image",
    "InvalidToken",
    "McpError",
    "McpMiddleware",
    "McpServer",
    "McpSettings",
    "Principal",
    "PromptSource",
    "ProtectedResourceMetadata",
    "RequestCancelled",
    "ResourceLink",
    "ResourceSource",
    "SourceTool",
    "TextContent",
    "TextResource",
    "TokenVerifier",
    "ToolAnnotations",
    "ToolNameWarning",
    "ToolResult",
    "ToolSource",
    "__version__",
    "mounted_lifespan",
    "run_stdio",
    "serve_stdio",
]


def test_all_is_pinned_and_sorted() -> None:
    """`mcp_asgi.__all__` is exactly the documented names, sorted."""
    assert mcp_asgi.__all__ == EXPORTED
    assert sorted(mcp_asgi.__all__) == mcp_asgi.__all__


def test_every_exported_name_exists() -> None:
    """Every name in `__all__` is importable from the package root."""
    for name in mcp_asgi.__all__:
        assert getattr(mcp_asgi, name) is not None


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
