"""How big a JSON value is, as compact JSON text: what a bound on stored client data counts."""

from __future__ import annotations

from typing import Any

from pydantic_core import to_json


def json_size(value: Any) -> int:
    """The length in bytes of `value` as compact JSON (UTF-8); 0 for None."""
    if value is None:
        return 0
    return len(to_json(value, inf_nan_mode="null"))
