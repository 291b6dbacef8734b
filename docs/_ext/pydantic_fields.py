"""A griffe extension for the API reference: pydantic fields documented from `Field(...)`.

`McpSettings` declares each field as `name: type = Field(default=..., description="...")`.
Statically, griffe sees neither the description nor the default. This copies the
`description` into the field's docstring, shows the `default` as the field's value, and,
for a settings class with an `env_prefix`, names the environment variable it is read from.
No import, no network: only the source's syntax tree.
"""

from __future__ import annotations

import ast
from typing import Any

import griffe

_LIMITS = {"gt": ">", "ge": "≥", "lt": "<", "le": "≤", "min_length": "length ≥"}


def _keyword(call: ast.Call, name: str) -> ast.expr | None:
    return next((k.value for k in call.keywords if k.arg == name), None)


def _env_prefix(cls: griffe.Object) -> str | None:
    config = cls.members.get("model_config")
    value = getattr(config, "value", None)
    if not isinstance(value, griffe.ExprCall):
        return None
    for argument in value.arguments:
        if isinstance(argument, griffe.ExprKeyword) and argument.name == "env_prefix":
            prefix = ast.literal_eval(str(argument.value))
            return prefix if isinstance(prefix, str) else None
    return None


class PydanticFields(griffe.Extension):
    """Fill in the docstring and value of attributes assigned `Field(...)`."""

    def on_attribute_instance(self, *, node: Any, attr: griffe.Attribute, **kwargs: Any) -> None:
        if not isinstance(node, ast.AnnAssign) or not isinstance(node.value, ast.Call):
            return
        func = node.value.func
        called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
        if called != "Field":
            return
        description = _keyword(node.value, "description")
        default = _keyword(node.value, "default")
        if default is None and node.value.args:
            default = node.value.args[0]
        if default is not None:
            attr.value = ast.unparse(default)
        if attr.docstring is None and description is not None:
            text = ast.literal_eval(description)
            limits = [
                f"`{symbol} {ast.unparse(bound)}`"
                for keyword, symbol in _LIMITS.items()
                if (bound := _keyword(node.value, keyword)) is not None
            ]
            if limits:
                text += f" Must be {' and '.join(limits)}."
            prefix = _env_prefix(attr.parent) if attr.parent is not None else None
            if prefix:
                text += f"\n\nEnvironment variable: `{prefix}{attr.name.upper()}`."
            attr.docstring = griffe.Docstring(text, parent=attr)
        attr.labels.clear()
        attr.labels.add("field")
