"""A form's answer checked against the requested schema (`mcp_asgi.input.form.Form`): every
kind of field the spec's form subset has, and the string formats it names."""

from __future__ import annotations

from typing import Any

import pytest

from mcp_asgi.input.form import Form

from ..helpers import JSONSCHEMA_EMPTY

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "minLength": 2, "maxLength": 5},
        "score": {"type": "number", "minimum": 0, "maximum": 10},
        "agree": {"type": "boolean"},
        "color": {"type": "string", "oneOf": [{"const": "#f00", "title": "Red"}]},
        "tags": {
            "type": "array",
            "minItems": 1,
            "items": {"type": "string", "enum": ["a", "b"]},
        },
        "email": {"type": "string", "format": "email"},
        "site": {"type": "string", "format": "uri"},
        "day": {"type": "string", "format": "date"},
        "at": {"type": "string", "format": "date-time"},
    },
    "required": ["name"],
}
FITS = {
    "name": "Ada",
    "score": 9.5,
    "agree": True,
    "color": "#f00",
    "tags": ["a", "b"],
    "email": "ada@example.com",
    "site": "https://example.com/x",
    "day": "2026-07-28",
    "at": "2026-07-28T12:30:00.5+02:00",
}


def test_an_answer_that_fits_has_no_problem() -> None:
    """Every field right (a leap second and `Z` are RFC 3339 too)."""
    form = Form(SCHEMA)
    assert form.problems(FITS) is None
    assert form.problems({"name": "Bo", "at": "2016-12-31T23:59:60Z"}) is None


@pytest.mark.parametrize(
    ("field", "value", "words"),
    [
        ("name", "A", "name: 'A' is too short"),
        ("name", "Adalbert", "name: 'Adalbert' is too long"),
        ("score", 11, "score: 11 is greater than the maximum of 10"),
        ("score", "9", "score: '9' is not of type 'number'"),
        ("agree", "yes", "agree: 'yes' is not of type 'boolean'"),
        ("color", "#0f0", "color: '#0f0' is not valid under any of the given schemas"),
        ("tags", [], f"tags: [] {JSONSCHEMA_EMPTY}"),
        ("tags", ["c"], "tags.0: 'c' is not one of ['a', 'b']"),
        ("email", "ada.example.com", "email: 'ada.example.com' is not a valid email"),
        ("site", "example.com", "site: 'example.com' is not a valid uri"),
        ("day", "2026-02-30", "day: '2026-02-30' is not a valid date"),
        ("at", "2026-07-28 25:00:00Z", "at: '2026-07-28 25:00:00Z' is not a valid date-time"),
        ("at", "2026-07-28T12:00:00", "at: '2026-07-28T12:00:00' is not a valid date-time"),
    ],
)
def test_a_wrong_field_is_named_with_what_is_wrong(field: str, value: Any, words: str) -> None:
    """One problem, with the field it is in."""
    assert Form(SCHEMA).problems({**FITS, field: value}) == words


def test_every_problem_is_said() -> None:
    """A missing required field and a wrong one: both, in field order."""
    said = Form(SCHEMA).problems({"score": -1})
    assert said == "'name' is a required property; score: -1 is less than the minimum of 0"


def test_an_invalid_schema_is_the_handlers_error() -> None:
    """A schema that is no JSON Schema: ValueError when asked, before anything is sent."""
    with pytest.raises(ValueError, match=r"ctx\.elicit: the schema is not a valid JSON Schema"):
        Form({"type": "object", "properties": {"n": {"type": "text"}}})
