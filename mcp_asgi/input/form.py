"""A form's answer (`ctx.elicit` with a JSON Schema) checked against the schema asked.

The spec restricts a form to a flat object of strings, numbers, integers, booleans and
single- or multi-select enums; the schema is checked as the JSON Schema (2020-12) it is:
types, `required`, `enum` and `oneOf`/`anyOf` consts, `minimum`/`maximum`,
`minLength`/`maxLength`, `minItems`/`maxItems`, and the string formats the spec names
(`email`, `uri`, `date`, `date-time`), which are asserted rather than left as annotations.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Mapping
from typing import Any, Final

from jsonschema import Draft202012Validator, FormatChecker, exceptions

__all__ = ["Form"]

_EMAIL: Final = re.compile(r"[^@\s]+@[^@\s]+\Z")
_URI: Final = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*:[^\s]+\Z")  # RFC 3986: scheme ":" ...
_DATE_TIME: Final = re.compile(
    r"(\d{4}-\d{2}-\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(\.\d+)?([Zz]|[+-](\d{2}):(\d{2}))\Z"
)
_FORMATS = FormatChecker(formats=())


@_FORMATS.checks("email")
def _email(value: object) -> bool:
    return not isinstance(value, str) or bool(_EMAIL.match(value))


@_FORMATS.checks("uri")
def _uri(value: object) -> bool:
    return not isinstance(value, str) or bool(_URI.match(value))


@_FORMATS.checks("date")
def _date(value: object) -> bool:
    return not isinstance(value, str) or _is_date(value)


@_FORMATS.checks("date-time")
def _date_time(value: object) -> bool:
    """RFC 3339: a full date, `T`, hours, minutes, seconds (60 for a leap second), a zone."""
    if not isinstance(value, str):
        return True
    found = _DATE_TIME.match(value)
    if found is None or not _is_date(found[1]):
        return False
    hour, minute, second = int(found[2]), int(found[3]), int(found[4])
    zone_hour, zone_minute = int(found[7] or 0), int(found[8] or 0)
    return hour < 24 and minute < 60 and second <= 60 and zone_hour < 24 and zone_minute < 60


def _is_date(text: str) -> bool:
    if len(text) != 10:
        return False
    try:
        datetime.date.fromisoformat(text)
    except ValueError:
        return False
    return True


class Form:
    """One requested schema and what it finds wrong with an answer."""

    __slots__ = ("_validator",)

    def __init__(self, schema: Mapping[str, Any]) -> None:
        """`ValueError` if `schema` is not a valid JSON Schema (the handler's mistake)."""
        try:
            Draft202012Validator.check_schema(schema)
        except exceptions.SchemaError as exc:
            raise ValueError(
                f"ctx.elicit: the schema is not a valid JSON Schema: {exc.message}"
            ) from None
        self._validator = Draft202012Validator(schema, format_checker=_FORMATS)

    def problems(self, content: Any) -> str | None:
        """Every problem of `content` under the schema, each with the field it is in (a
        form is flat, so there are few), or None if it fits."""
        found = sorted(self._validator.iter_errors(content), key=lambda e: [str(p) for p in e.path])
        if not found:
            return None
        return "; ".join(_said(error) for error in found)


def _said(error: exceptions.ValidationError) -> str:
    where = ".".join(str(part) for part in error.absolute_path)
    if error.validator == "format":
        message = f"{error.instance!r} is not a valid {error.validator_value}"
    else:
        message = error.message
    return f"{where}: {message}" if where else message
