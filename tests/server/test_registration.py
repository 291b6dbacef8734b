"""Registration refuses what could never be served, at decorator time, naming the tool and
the parameter and saying what to do; it warns about tool names some clients refuse."""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable
from typing import Annotated, Any

import fastapi
import pytest
from pydantic import Field
from starlette.datastructures import UploadFile

from mcp_asgi import McpServer, ToolNameWarning


class Database:
    """A class pydantic has no schema for (a dependency written without `Depends`)."""


def _upload(report: UploadFile) -> str:
    return ""


def _fastapi_upload(files: list[fastapi.UploadFile] | None = None) -> str:
    return ""


def _plain_class(query: str, db: Database) -> str:
    return ""


def _nested_class(rows: list[Database]) -> str:
    return ""


def _annotated_class(db: Annotated[Database, Field(description="the database")]) -> str:
    return ""


def _returns_class() -> Database:
    return Database()


@pytest.mark.parametrize(
    ("handler", "says"),
    [
        (_upload, ["tool 't'", "parameter 'report'", "UploadFile", "`str` argument"]),
        (_fastapi_upload, ["tool 't'", "parameter 'files'", "UploadFile", "`str` argument"]),
        (
            _plain_class,
            [
                "tool 't': parameter 'db' has type Database, which has no JSON Schema",
                "if it is a dependency, write `db: Database = Depends(get_db)`",
            ],
        ),
        (_nested_class, ["parameter 'rows' has type list[Database]"]),
        (_annotated_class, ["`db: Database = Depends(get_db)`"]),
        (_returns_class, ["tool 't'", "return annotation Database has no JSON Schema"]),
    ],
    ids=lambda v: getattr(v, "__name__", "")[1:] or None,
)
def test_what_has_no_json_schema_is_refused(handler: Callable[..., Any], says: list[str]) -> None:
    """A TypeError naming the tool and the parameter (or the return annotation), with what
    to write instead; nothing is registered."""
    server = McpServer("refused")
    with pytest.raises(TypeError) as caught:
        server.tool(name="t")(handler)
    for words in says:
        assert words in str(caught.value)
    assert "arbitrary_types_allowed" not in str(caught.value)
    with pytest.raises(KeyError):  # nothing registered under that name
        server.remove_tool("t")


def test_resources_and_prompts_name_themselves() -> None:
    """The same check for a resource template's and a prompt's parameters."""
    server = McpServer("refused")

    def read(db: Database) -> str:
        return ""

    with pytest.raises(TypeError, match=re.escape("resource 'db://{db}': parameter 'db' has")):
        server.resource("db://{db}")(read)
    with pytest.raises(TypeError, match=re.escape("prompt 'ask': parameter 'db' has type")):
        server.prompt(name="ask")(_plain_class)


@pytest.mark.parametrize("name", ["bad name!", "", "x" * 129, "tool/path", "émoji"])
def test_a_name_outside_the_spec_is_refused(name: str) -> None:
    """Only 1 to 128 of A-Z a-z 0-9 _ - . (the spec's tool names): ValueError at once."""
    server = McpServer("names")
    with pytest.raises((ValueError, TypeError), match="name"):
        server.tool(name)(_upload)


def test_a_function_name_that_is_no_tool_name_is_refused() -> None:
    """A lambda's `<lambda>` is not a tool name: the message says to pass name=."""
    with pytest.raises(ValueError, match=re.escape("tool name '<lambda>'")) as caught:
        McpServer("names").tool(lambda: 1)
    assert "name=" in str(caught.value)


@pytest.mark.parametrize(
    ("name", "why"),
    [("admin.tools.list", "has a dot"), ("x" * 65, "longer than 64 characters")],
)
def test_names_popular_clients_refuse_are_warned_about(name: str, why: str) -> None:
    """Allowed by the spec, refused by several clients: a ToolNameWarning pointing at the
    decorator's line; the tool is registered."""
    server = McpServer("names")
    with pytest.warns(ToolNameWarning, match=why) as caught:
        server.tool(name)(lambda: "ok")
    assert caught[0].filename == __file__
    server.remove_tool(name)  # registered: a KeyError otherwise


def test_a_long_function_name_is_warned_about_at_the_decorator() -> None:
    """Through the bare decorator too, the warning points at the user's code."""
    server = McpServer("names")
    with pytest.warns(ToolNameWarning) as caught:

        @server.tool
        def a_function_whose_name_goes_on_and_on_well_past_what_many_clients_allow() -> str:
            return ""

    assert caught[0].filename == __file__


def test_valid_names_are_silent() -> None:
    """A plain name up to 64 characters: no warning (warnings are errors in the tests)."""
    server = McpServer("names")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        server.tool("get_user-v2")(lambda: "ok")
        server.tool("x" * 64)(lambda: "ok")
