"""The docs stay true: examples run, and every setting is documented."""

from __future__ import annotations

import ast
import re
import textwrap
from pathlib import Path

import pytest

from mcp_asgi import McpSettings
from mcp_asgi.auth.guard import AUTH_FAILURE_REASONS

ROOT = Path(__file__).resolve().parent.parent
DOCS = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md")])
_PYTHON_BLOCK = re.compile(r"```python\n(.*?)```", re.DOTALL)


def python_blocks(path: Path) -> list[str]:
    """The Python code blocks of a Markdown file, dedented (some sit in list items)."""
    return [textwrap.dedent(b) for b in _PYTHON_BLOCK.findall(path.read_text(encoding="utf-8"))]


def test_readme_example_runs() -> None:
    """The README's example builds a working app."""
    namespace: dict[str, object] = {}
    for block in python_blocks(ROOT / "README.md"):
        exec(compile(block, "README.md", "exec"), namespace)
    assert "app" in namespace


@pytest.mark.parametrize("path", DOCS, ids=lambda p: p.name)
def test_doc_examples_are_valid_python(path: Path) -> None:
    """Every Python example in the docs at least parses."""
    for block in python_blocks(path):
        compile(block, str(path), "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)


def test_every_setting_is_documented() -> None:
    """docs/configuration.md names every McpSettings field and its environment variable."""
    text = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    missing = [
        name
        for name in McpSettings.model_fields
        if f"`{name}`" not in text or f"MCP_{name.upper()}" not in text
    ]
    assert missing == []


def test_readme_starts_with_the_two_commands() -> None:
    """The README opens with `make run` and `make test`."""
    head = (ROOT / "README.md").read_text(encoding="utf-8").split("\n\n", 2)[1]
    assert "make run" in head
    assert "make test" in head


def test_every_auth_failure_reason_is_documented() -> None:
    """docs/observability.md lists every reason the auth failures metric carries."""
    text = (ROOT / "docs" / "observability.md").read_text(encoding="utf-8")
    assert [reason for reason in AUTH_FAILURE_REASONS if f"`{reason}`" not in text] == []
