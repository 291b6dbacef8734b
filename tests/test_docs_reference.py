"""The API reference documents every public name once, under the path users import it from.

docs/reference/*.md render the docstrings with mkdocstrings `::: path` directives
(`make docs-strict` fails on a path that does not resolve); this checks that none is
missing, documented twice, or documented under an internal path.
"""

from __future__ import annotations

import ast
import re
from collections import Counter
from pathlib import Path

from .test_public_api import INTEGRATIONS, MOVED, PUBLIC

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = ROOT / "docs" / "reference"
_DIRECTIVE = re.compile(r"^:::\s+(\S+)\s*$", re.MULTILINE)
_PYTHON_BLOCK = re.compile(r"```python\n(.*?)```", re.DOTALL)


def directives() -> list[str]:
    """The identifiers of every `:::` directive of the reference pages."""
    return [
        identifier
        for page in sorted(REFERENCE.glob("*.md"))
        for identifier in _DIRECTIVE.findall(page.read_text(encoding="utf-8"))
    ]


def public_paths() -> dict[str, str]:
    """Each public name and the one import path it is documented under."""
    return {
        name: f"{module}.{name}"
        for module, names in PUBLIC.items()
        for name in names
        if name != "__version__"
    }


PAGES = {
    "mcp_asgi.auth": "auth.md",
    "mcp_asgi.bus": "bus.md",
    "mcp_asgi.bus.redis": "bus.md",
    "mcp_asgi.downstream": "downstream.md",
    "mcp_asgi.input": "input.md",
    "mcp_asgi.routes": "routes.md",
    "mcp_asgi.stdio": "stdio.md",
    "mcp_asgi.testing": "testing.md",
}
"""The reference page of each integration."""


def test_the_reference_has_directives() -> None:
    """The pattern finds the directives (a guard against the other tests passing vacuously)."""
    assert len(directives()) >= len(public_paths())


def test_every_public_name_is_documented_once() -> None:
    """Each public name is the target of exactly one directive across the reference."""
    by_name = Counter(identifier.rsplit(".", 1)[-1] for identifier in directives())
    counts = {name: by_name[name] for name in public_paths()}
    assert counts == dict.fromkeys(public_paths(), 1)


def test_every_public_name_is_documented_under_its_public_path() -> None:
    """The directive names the public import path, not the module that defines the name."""
    documented = set(directives())
    assert [path for path in public_paths().values() if path not in documented] == []


def test_no_directive_is_repeated() -> None:
    """No object is rendered twice (its anchors would clash)."""
    repeated = [path for path, count in Counter(directives()).items() if count > 1]
    assert repeated == []


def test_every_reference_page_is_in_the_nav() -> None:
    """mkdocs.yml lists every reference page (mkdocs only notes a page left out)."""
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    missing = [p.name for p in REFERENCE.glob("*.md") if f"reference/{p.name}" not in nav]
    assert missing == []


def test_each_integration_has_its_own_page() -> None:
    """An integration's names are documented on its own page, which shows their import."""
    assert sorted(PAGES) == sorted(INTEGRATIONS)
    misplaced = []
    for module, names in INTEGRATIONS.items():
        page = (REFERENCE / PAGES[module]).read_text(encoding="utf-8")
        documented = set(_DIRECTIVE.findall(page))
        misplaced += [n for n in names if f"{module}.{n}" not in documented]
        if f"from {module} import " not in page:
            misplaced.append(module)
    assert misplaced == []


def test_every_directive_names_a_public_path() -> None:
    """Nothing is documented under an internal path but the one object meant to be
    reached only through a method (`ctx.side_effect(...)`)."""
    public = set(public_paths().values())
    internal = [d for d in directives() if d not in public]
    assert internal == ["mcp_asgi.server.context.SideEffectMark"]


def test_the_index_says_where_every_moved_name_went() -> None:
    """docs/reference/index.md has a row for each name the root no longer exports."""
    index = (REFERENCE / "index.md").read_text(encoding="utf-8")
    missing = [
        name
        for name, module in MOVED.items()
        if f"| `from mcp_asgi import {name}` | `from {module} import {name}` |" not in index
    ]
    assert missing == []


def test_the_pages_imports_run() -> None:
    """The import block that opens each page imports what it says from where it says."""
    blocks = [
        (page.name, block)
        for page in sorted(REFERENCE.glob("*.md"))
        for block in _PYTHON_BLOCK.findall(page.read_text(encoding="utf-8"))
        if all(isinstance(s, ast.ImportFrom) for s in ast.parse(block).body)
    ]
    assert len(blocks) >= len(PAGES)
    for name, block in blocks:
        exec(compile(block, name, "exec"), {})
