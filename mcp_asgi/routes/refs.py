"""An OpenAPI schema made a self-contained JSON Schema: its `$ref`s resolved.

A `$ref` into the document (`#/components/schemas/Item`) is replaced by what it names,
its sibling keywords kept. A schema that refers to itself, at any depth (a tree, a
linked list), cannot be inlined: that reference becomes `#/$defs/<Name>` and the schema
one entry of the `$defs` the caller puts at the root. OpenAPI 3.0's `nullable: true`
becomes a `"null"` type; the keywords JSON Schema has no use for (`discriminator`,
`xml`, `externalDocs`) are dropped. A `$ref` outside the document is an `Unresolvable`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from mcp_asgi.protocol.jsonrpc import JsonObject

_DROPPED: Final = frozenset({"discriminator", "xml", "externalDocs", "nullable"})


class Unresolvable(ValueError):
    """A `$ref` that names nothing in the document, or something outside it."""


class Resolver:
    """Resolves the schemas of one operation against the OpenAPI `document`, collecting
    the `$defs` its recursive schemas need."""

    def __init__(self, document: Mapping[str, Any]) -> None:
        self._document = document
        self._defs: dict[str, JsonObject] = {}
        self._names: dict[str, str] = {}  # $ref -> its $defs name
        self._pending: list[str] = []

    def resolve(self, schema: Any) -> Any:
        """`schema` with every `$ref` resolved (a new object)."""
        return self._walk(schema, ())

    def defs(self) -> dict[str, JsonObject]:
        """The `$defs` the schemas resolved so far refer to (empty when none recurse)."""
        while self._pending:
            ref = self._pending.pop()
            self._defs[self._names[ref]] = self._walk(self._target(ref), (ref,))
        return dict(self._defs)

    def _walk(self, node: Any, stack: tuple[str, ...]) -> Any:
        if isinstance(node, list):
            return [self._walk(item, stack) for item in node]
        if not isinstance(node, Mapping):
            return node
        ref = node.get("$ref")
        if isinstance(ref, str):
            siblings = {k: self._walk(v, stack) for k, v in node.items() if k != "$ref"}
            if ref in stack:
                return {"$ref": f"#/$defs/{self._def_name(ref)}", **siblings}
            resolved = self._walk(self._target(ref), (*stack, ref))
            return {**resolved, **siblings} if isinstance(resolved, dict) else resolved
        out = {k: self._walk(v, stack) for k, v in node.items() if k not in _DROPPED}
        if node.get("nullable") is True and isinstance(out.get("type"), str):
            out["type"] = [out["type"], "null"]
        return out

    def _target(self, ref: str) -> Any:
        if not ref.startswith("#/"):
            raise Unresolvable(f"$ref {ref!r} points outside the OpenAPI document")
        node: Any = self._document
        for part in ref[2:].split("/"):
            part = part.replace("~1", "/").replace("~0", "~")
            if not isinstance(node, Mapping) or part not in node:
                raise Unresolvable(f"$ref {ref!r} names nothing in the OpenAPI document")
            node = node[part]
        return node

    def _def_name(self, ref: str) -> str:
        name = self._names.get(ref)
        if name is None:
            base = ref.rsplit("/", 1)[-1] or "schema"
            name, n = base, 2
            while name in self._names.values():
                name, n = f"{base}_{n}", n + 1
            self._names[ref] = name
            self._pending.append(ref)
        return name
