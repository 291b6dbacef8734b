"""How big JSON is: its number of values, and the memory Python takes for it once parsed:
what a bound on a request or on stored client data counts."""

from __future__ import annotations

import sys
from typing import Any, Final

from pydantic_core import to_json

PER_VALUE: Final = 100
"""Bytes of Python objects one JSON value (or object key) takes at most once parsed, besides
its characters: measured 36 for `[{},…]`, 64 for `[{"a":0},…]`, 96 for one-key objects in
one-key objects with distinct keys (`tests/limits/test_memory_bounds.py`)."""

PER_TEXT_BYTE: Final = 4
"""Bytes a parsed string takes at most per byte of its JSON text: a `str` holds every
character in 4 bytes once one of them is beyond U+FFFF (ASCII next to an emoji)."""

_MARKS: Final = bytes.maketrans(b"[{:", b",,,")
_UNMARKED: Final = bytes(i for i in range(256) if i not in b'[{,:"')


def json_values(text: bytes, limit: int = sys.maxsize) -> int:
    """The number of values in JSON `text`, object keys included: one plus its `[`, `{`, `,`
    and `:` outside strings (an empty array or object counts twice). Above `limit`, any
    number above it, as soon as that is known (the strings alone are too many).

    In C but for one `split`: escapes dropped (no quote is left inside a string), then only
    the marks and quotes kept, and the marks between quotes not counted."""
    plain = text.replace(b"\\\\", b"").replace(b'\\"', b"")
    marks = plain.translate(_MARKS, _UNMARKED)
    strings = marks.count(b'"') // 2  # each a value or a key
    if strings > limit:
        return strings
    if not strings:
        return 1 + len(marks)
    return 1 + sum(map(len, marks.split(b'"')[::2]))


def held_bytes(text_bytes: int, values: int) -> int:
    """At most the bytes the Python objects parsed from JSON text of `text_bytes` bytes and
    `values` values (`json_values`) take."""
    return PER_TEXT_BYTE * text_bytes + PER_VALUE * values


def json_held(*values: Any) -> int:
    """At most the bytes the parsed JSON `values` take (`held_bytes` of their compact JSON)."""
    total = 0
    for value in values:
        if value is not None:
            text = to_json(value, inf_nan_mode="null")
            total += held_bytes(len(text), json_values(text))
    return total
