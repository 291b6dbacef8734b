"""docs/handlers.md's sections "What a handler can receive" and "Errors and HTTP status"
stay true: their examples run, in order, into one server and FastAPI app, and each tool
answers as the page says (tests/test_docs_handlers.py runs the page's other sections)."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI

from mcp_asgi import McpServer
from mcp_asgi.server.depends import TESTED_FASTAPI

from .helpers import call

PAGE = Path(__file__).resolve().parent.parent / "docs" / "handlers.md"
SECTIONS = ("What a handler can receive", "Errors and HTTP status")
_BLOCK = re.compile(r"```python\n(.*?)```", re.DOTALL)


def sections(text: str) -> str:
    parts = re.split(r"^## ", text, flags=re.MULTILINE)
    return "\n".join(p for p in parts if p.split("\n", 1)[0].strip() in SECTIONS)


@pytest.fixture
def page() -> dict[str, Any]:
    """The namespace the sections' examples leave behind."""
    blocks = _BLOCK.findall(sections(PAGE.read_text(encoding="utf-8")))
    assert len(blocks) >= 7
    namespace: dict[str, Any] = {"__name__": "handlers_md_receive"}
    for block in blocks:
        exec(compile(textwrap.dedent(block), str(PAGE), "exec"), namespace)
    assert isinstance(namespace["server"], McpServer)
    assert isinstance(namespace["app"], FastAPI)
    return namespace


async def tool(app: Any, name: str, arguments: dict[str, Any], **options: Any) -> Any:
    return await call(app, "tools/call", {"name": name, "arguments": arguments}, **options)


def text(wire: Any) -> str:
    value: str = wire.result["content"][0]["text"]
    return value


async def test_each_parameter_kind_works_as_shown(page: dict[str, Any]) -> None:
    app = page["app"]
    listed = {t["name"]: t for t in (await call(app, "tools/list")).result["tools"]}
    assert listed.keys() == {"search", "export", "reindex", "whoami", "count", "summarize"}
    assert listed["search"]["inputSchema"]["properties"]["limit"]["maximum"] == 50
    for name in ("export", "reindex", "whoami", "count"):
        assert listed[name]["inputSchema"]["properties"] == {}, name

    found = await tool(app, "search", {"query": "cats"})
    assert found.result["structuredContent"] == {"result": ["a note about cats"]}
    assert text(await tool(app, "export", {}, progress=True)) == "exported (p-7)"
    assert text(await tool(app, "reindex", {})) == "reindexed"
    assert text(await tool(app, "whoami", {}, headers={"x-tenant": "acme"})) == "acme"
    assert (await tool(app, "count", {})).result["structuredContent"] == {"result": 3}


async def test_overriding_the_dependency_as_the_page_says(page: dict[str, Any]) -> None:
    class FakeNotes:
        def count(self) -> int:
            return 0

    app = page["app"]
    app.dependency_overrides[page["get_notes"]] = lambda: FakeNotes()
    assert (await tool(app, "count", {})).result["structuredContent"] == {"result": 0}


async def test_the_errors_have_the_statuses_the_page_gives(page: dict[str, Any]) -> None:
    app = page["app"]
    missing = await tool(app, "summarize", {"note": "n"})
    assert (missing.status, missing.error["code"]) == (400, -32021)
    assert missing.error["data"] == {"requiredCapabilities": {"sampling": {}}}
    unknown = await tool(app, "summarize", {"note": ""})
    assert (unknown.status, unknown.error["code"]) == (200, 4004)


def test_the_page_names_the_tested_fastapi_range() -> None:
    (low,) = re.findall(r"[\d.]+", TESTED_FASTAPI)  # no ceiling: see depends.Solver
    assert f"FastAPI >= {low}**, with no upper bound" in PAGE.read_text(encoding="utf-8")
