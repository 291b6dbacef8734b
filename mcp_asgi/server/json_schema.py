"""A JSON Schema given by the user (`input_schema=`, `output_schema=`): kept verbatim,
checked against its dialect's meta-schema at registration, and used to validate values.

The dialect is the schema's `$schema`, JSON Schema 2020-12 without one (MCP's default);
2019-09, draft-07, -06, -04 and -03 are understood too, any other `$schema` is refused.
A `$ref` is resolved inside the schema only: the validator has no way to fetch a network
URI (MCP forbids dereferencing one automatically), so such a `$ref` fails validation with
a message saying so instead of reaching out.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable, Mapping
from typing import Any, Final

import referencing
import referencing.exceptions
from jsonschema import exceptions, validators
from jsonschema.protocols import Validator

from mcp_asgi.protocol.jsonrpc import JsonObject

__all__ = ["JsonSchema"]

_DEFAULT_DIALECT: Final = "https://json-schema.org/draft/2020-12/schema"


class JsonSchema:
    """One schema, its validator, and what it finds wrong with a value."""

    __slots__ = ("_validator", "schema")

    def __init__(self, schema: Mapping[str, Any], *, owner: str, option: str) -> None:
        """Check `schema`; `TypeError`/`ValueError` naming `owner` and `option` if it is not
        a JSON object, declares an unknown dialect or is invalid under its dialect."""
        if not isinstance(schema, Mapping):
            raise TypeError(f"{owner}: {option} must be a dict, not {type(schema).__name__}")
        try:
            verbatim: JsonObject = json.loads(json.dumps(dict(schema), allow_nan=False))
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{owner}: {option} must be JSON: {exc}") from None
        dialect = verbatim.get("$schema", _DEFAULT_DIALECT)
        known = isinstance(dialect, str)
        nothing: Any = None  # what validator_for answers for a dialect it does not know
        cls = validators.validator_for({"$schema": dialect if known else ""}, default=nothing)
        if cls is None:
            raise ValueError(
                f"{owner}: {option} declares $schema {verbatim['$schema']!r}, a dialect this "
                "server does not support (leave $schema out for JSON Schema 2020-12)"
            )
        try:
            cls.check_schema(verbatim)
        except exceptions.SchemaError as exc:
            raise ValueError(
                f"{owner}: {option} is not a valid JSON Schema: {_where(exc.path)}{exc.message}"
            ) from None
        self.schema = copy.deepcopy(verbatim)
        """The schema, exactly as given (a copy)."""
        # An empty registry: a $ref can only name this schema or the dialects' meta-schemas.
        self._validator: Validator = cls(verbatim, registry=referencing.Registry())

    def problems(self, value: Any) -> str | None:
        """What is wrong with `value` under the schema (the most relevant problem, where it
        is, and how many more there are), or None if it is valid."""
        try:
            found = list(self._validator.iter_errors(value))
        except referencing.exceptions.Unresolvable as exc:
            return (
                f"the schema's $ref {exc.ref!r} cannot be resolved (only references "
                "inside the schema are, never over the network)"
            )
        best = exceptions.best_match(found)
        if best is None:
            return None
        more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
        return f"{_where(best.absolute_path)}{best.message}{more}"


def _where(path: Iterable[Any]) -> str:
    parts = [str(part) for part in path]
    return f"at {'.'.join(parts)!r}: " if parts else ""
