"""The docs' entry points reach every page, and no doc cites a file that is not in the
repository: README.md and docs/index.md list every guide, docs/reference/index.md every
reference page; every relative link resolves; every repository path cited in backticks
(`tests/backends/test_deploy.py`, `server/sources.py` under the package) and every file
named bare (`peers.md`) exists."""

from __future__ import annotations

import os
import re
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
GUIDES = sorted(p.name for p in DOCS.glob("*.md") if p.name != "index.md")
REFERENCE = sorted(p.name for p in (DOCS / "reference").glob("*.md") if p.name != "index.md")
PAGES = [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]

_FENCE = re.compile(r"```.*?```", re.DOTALL)
_LINK = re.compile(r"\]\(([^)\s]+)\)")
_CODE = re.compile(r"`([^`\s]+)`")
_BARE = re.compile(r"(?<![\w/.-])([\w-]+\.(?:py|md|mjs))\b")
# Cited paths start at the repository root, or name a module under the package.
_TOP = ("bench", "deploy", "docs", "examples", "mcp_asgi", "tests")
_SOURCE = (".py", ".md", ".mjs", ".json", ".yml", ".yaml", ".toml")
_SKIPPED_DIRS = {"node_modules", "site", "dist", "__pycache__"}


def prose(page: Path) -> str:
    """The page without its fenced code blocks (examples name the reader's files)."""
    return _FENCE.sub("", page.read_text(encoding="utf-8"))


def links(page: Path) -> list[str]:
    """The targets of the page's Markdown links, without their anchors."""
    return [target.split("#")[0] for target in _LINK.findall(prose(page))]


@cache
def file_names() -> frozenset[str]:
    """The names of the repository's files (hidden and generated folders left out)."""
    names: set[str] = set()
    for _folder, dirs, files in os.walk(ROOT):
        dirs[:] = [d for d in dirs if not d.startswith(".") and d not in _SKIPPED_DIRS]
        names.update(files)
    return frozenset(names)


def cited_paths(page: Path) -> list[str]:
    """The repository paths the page cites in backticks."""
    found = []
    for code in _CODE.findall(prose(page)):
        if "/" not in code or "<" in code or ":" in code or "/." in code:
            continue  # not a path, a placeholder, or a git-ignored folder a command creates
        if code.split("/")[0] in _TOP or code.endswith(_SOURCE):
            found.append(code)
    return found


def exists(cited: str) -> bool:
    """Whether a cited path (a glob or `{a,b}` allowed) is a file or folder of the
    repository, from its root or, for a module, from the package."""
    braces = re.search(r"\{([^}]*)\}", cited)
    if braces is not None:
        head, tail = cited[: braces.start()], cited[braces.end() :]
        return all(exists(head + part + tail) for part in braces.group(1).split(","))
    return any(any(base.glob(cited.rstrip("/"))) for base in (ROOT, ROOT / "mcp_asgi"))


def test_readme_and_index_list_every_guide() -> None:
    readme = set(links(ROOT / "README.md"))
    index = set(links(DOCS / "index.md"))
    assert [g for g in GUIDES if f"docs/{g}" not in readme] == []
    assert [g for g in GUIDES if g not in index] == []


def test_reference_index_lists_every_reference_page() -> None:
    listed = set(links(DOCS / "reference" / "index.md"))
    assert [page for page in REFERENCE if page not in listed] == []


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_cited_files_exist(page: Path) -> None:
    """Relative links, cited repository paths and bare file names all exist."""
    missing = [
        target
        for target in links(page)
        if target and not re.match(r"^[a-z]+:", target) and not (page.parent / target).exists()
    ]
    missing += [cited for cited in cited_paths(page) if not exists(cited)]
    missing += [bare for bare in _BARE.findall(prose(page)) if bare not in file_names()]
    assert missing == []
