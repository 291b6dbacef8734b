"""The API reference documents every public name once, under the path users import it from.

docs/reference/*.md render the docstrings with mkdocstrings `::: path` directives
(`make docs-strict` fails on a path that does not resolve); this checks that none is
missing, documented twice, or documented under an internal path.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import mcp_asgi
import mcp_asgi.testing

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = ROOT / "docs" / "reference"
_DIRECTIVE = re.compile(r"^:::\s+(\S+)\s*$", re.MULTILINE)


def directives() -> list[str]:
    """The identifiers of every `:::` directive of the reference pages."""
    return [
        identifier
        for page in sorted(REFERENCE.glob("*.md"))
        for identifier in _DIRECTIVE.findall(page.read_text(encoding="utf-8"))
    ]


def public_paths() -> dict[str, str]:
    """Each public name and the one import path it is documented under."""
    paths = {name: f"mcp_asgi.{name}" for name in mcp_asgi.__all__ if name != "__version__"}
    paths.update({name: f"mcp_asgi.testing.{name}" for name in mcp_asgi.testing.__all__})
    paths["RedisBus"] = "mcp_asgi.bus.redis.RedisBus"
    return paths


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
