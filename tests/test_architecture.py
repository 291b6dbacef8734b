"""The architecture contract (`[tool.importlinter]` in pyproject.toml, `make contracts`).

The contract is run against a copy of the package with one upward import added, to show
that it catches it (a real import and a `TYPE_CHECKING`-only one); and the package's import
graph, `TYPE_CHECKING` imports included, must have no cycle between modules (the
`acyclic_siblings` contract misses a cycle through a package's `__init__`).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import grimp
import pytest

import mcp_asgi

PACKAGE = Path(mcp_asgi.__file__).parent
PYPROJECT = PACKAGE.parent / "pyproject.toml"
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


def lint_copy(tmp_path: Path, module: str, added: str) -> str:
    """Copy the package and pyproject.toml to `tmp_path`, append `added` to `module` (a path
    inside the package) and run lint-imports on the copy; its output."""
    shutil.copytree(PACKAGE, tmp_path / "mcp_asgi", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(PYPROJECT, tmp_path / "pyproject.toml")
    with (tmp_path / "mcp_asgi" / module).open("a") as f:
        f.write("\n" + added + "\n")
    # the copy comes first on the path: it, not the installed package, is analysed
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    done = subprocess.run(
        [str(LINT_IMPORTS), "--no-cache"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=20,
        check=False,
    )
    assert done.returncode != 0, done.stdout
    return done.stdout


def appended_line(tmp_path: Path, module: str) -> int:
    """The number of the last line of `module` in the copy (the added import)."""
    return len((tmp_path / "mcp_asgi" / module).read_text().splitlines())


def test_contract_catches_an_upward_import(tmp_path: Path) -> None:
    out = lint_copy(tmp_path, "protocol/jsonrpc.py", "from mcp_asgi.server import mcp_server")
    line = appended_line(tmp_path, "protocol/jsonrpc.py")
    assert "Layers: each subpackage imports only the layers below it BROKEN" in out
    assert f"mcp_asgi.protocol.jsonrpc -> mcp_asgi.server.mcp_server (l.{line})" in out


def test_contract_counts_type_checking_imports(tmp_path: Path) -> None:
    added = (
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from mcp_asgi.lifecycle import scope"
    )
    out = lint_copy(tmp_path, "protocol/headers.py", added)
    line = appended_line(tmp_path, "protocol/headers.py")
    assert "Layers: each subpackage imports only the layers below it BROKEN" in out
    assert f"mcp_asgi.protocol.headers -> mcp_asgi.lifecycle.scope (l.{line})" in out


def test_contract_forbids_the_root_package_inside(tmp_path: Path) -> None:
    out = lint_copy(tmp_path, "http/reply.py", "import mcp_asgi")
    line = appended_line(tmp_path, "http/reply.py")
    assert "nothing inside the package imports the root package (its re-exports) BROKEN" in out
    assert f"mcp_asgi.http.reply -> mcp_asgi (l.{line})" in out


def strongly_connected(graph: grimp.ImportGraph) -> list[list[str]]:
    """The import cycles: strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for imported in sorted(graph.find_modules_directly_imported_by(module)):
            if imported not in index:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in on_stack:
                low[module] = min(low[module], index[imported])
        if low[module] == index[module]:
            component: list[str] = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == module:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for module in sorted(graph.modules):
        if module not in index:
            visit(module)
    return found


def test_no_import_cycles() -> None:
    graph = grimp.build_graph(
        "mcp_asgi",
        include_external_packages=False,
        exclude_type_checking_imports=False,
        cache_dir=None,
    )
    assert strongly_connected(graph) == []


@pytest.mark.parametrize(
    ("edges", "cycles"),
    [
        ({"a": {"b"}, "b": {"c"}, "c": set()}, []),
        ({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}, [["a", "b", "c"]]),
    ],
)
def test_strongly_connected(edges: dict[str, set[str]], cycles: list[list[str]]) -> None:
    graph = grimp.ImportGraph()
    for importer, imported in edges.items():
        graph.add_module(importer)
        for other in imported:
            graph.add_import(importer=importer, imported=other)
    assert strongly_connected(graph) == cycles
