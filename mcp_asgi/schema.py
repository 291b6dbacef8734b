"""Type hints and docstrings -> JSON Schema (2020-12) and argument validation, via pydantic."""

from __future__ import annotations

import dataclasses
import inspect
import re
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, get_origin

import pydantic
from pydantic import BaseModel, ConfigDict, TypeAdapter

from ._validate import ParamHeader
from .cancel import CancelToken
from .context import Context

_ARGS_SECTION = re.compile(r"^\s*(Args|Arguments|Parameters):\s*$")
_ARG_LINE = re.compile(r"^\s+(\*{0,2}\w+)(?:\s*\([^)]*\))?\s*:\s*(.*)$")
_HEADER_TOKEN = re.compile(r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$")


@dataclass(frozen=True, slots=True)
class HandlerSignature:
    """How to call a handler: its argument model and where the injected objects go."""

    arguments: type[BaseModel]
    context_param: str | None
    token_param: str | None
    is_async: bool

    def input_schema(self) -> dict[str, Any]:
        """The JSON Schema of the arguments (root `type: object`)."""
        schema = self.arguments.model_json_schema()
        schema.pop("title", None)
        return schema

    def bind(self, arguments: dict[str, Any], ctx: Context) -> dict[str, Any]:
        """Validate `arguments` and return the keyword arguments for the call.

        Raises `pydantic.ValidationError` when they do not fit the signature.
        """
        model = self.arguments.model_validate(arguments)
        kwargs = {name: getattr(model, name) for name in type(model).model_fields}
        if self.context_param:
            kwargs[self.context_param] = ctx
        if self.token_param:
            kwargs[self.token_param] = ctx.cancel_token
        return kwargs


def inspect_handler(fn: Callable[..., Any], *, name: str) -> HandlerSignature:
    """Read a handler's signature; raise TypeError for signatures that cannot be served."""
    if not callable(fn):
        raise TypeError(f"{name}: handler must be callable")
    hints = typing.get_type_hints(fn, include_extras=True)
    _, arg_docs = parse_docstring(fn)
    fields: dict[str, Any] = {}
    context_param = token_param = None
    for param in inspect.signature(fn).parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise TypeError(f"{name}: *args and **kwargs are not supported in handlers")
        annotation = hints.get(param.name, Any)
        if annotation is Context:
            context_param = param.name
            continue
        if annotation is CancelToken:
            token_param = param.name
            continue
        default = ... if param.default is param.empty else param.default
        description = arg_docs.get(param.name)
        fields[param.name] = (annotation, pydantic.Field(default, description=description))
    model = pydantic.create_model(
        f"{name}_arguments", __config__=ConfigDict(extra="forbid"), **fields
    )
    return HandlerSignature(
        arguments=model,
        context_param=context_param,
        token_param=token_param,
        is_async=inspect.iscoroutinefunction(fn),
    )


def parse_docstring(fn: Callable[..., Any]) -> tuple[str | None, dict[str, str]]:
    """The summary (text before an `Args:` section) and per-argument descriptions."""
    doc = inspect.getdoc(fn)
    if not doc:
        return None, {}
    summary: list[str] = []
    args: dict[str, str] = {}
    current: str | None = None
    in_args = False
    for line in doc.splitlines():
        if _ARGS_SECTION.match(line):
            in_args = True
            continue
        if in_args:
            match = _ARG_LINE.match("    " + line if not line.startswith(" ") else line)
            if line and not line.startswith(" ") and line.rstrip().endswith(":"):
                in_args = False
            elif match and not line.startswith("        "):
                current = match.group(1).lstrip("*")
                args[current] = match.group(2).strip()
                continue
            elif current and line.strip():
                args[current] = f"{args[current]} {line.strip()}"
                continue
        if not in_args:
            summary.append(line)
    text = "\n".join(summary).strip()
    return (text or None), args


@dataclass(frozen=True, slots=True)
class OutputSpec:
    """How a tool's return value becomes `structuredContent`."""

    schema: dict[str, Any] | None
    adapter: TypeAdapter[Any] | None
    wrap: bool

    def structured(self, value: Any) -> Any:
        """The JSON value for `structuredContent`, or None for unstructured output."""
        if self.adapter is None:
            return None
        data = self.adapter.dump_python(value, mode="json")
        return {"result": data} if self.wrap else data


def output_spec(fn: Callable[..., Any]) -> OutputSpec:
    """Derive the output schema from the return annotation (objects as-is, others wrapped)."""
    annotation = typing.get_type_hints(fn, include_extras=True).get("return", Any)
    if annotation in (Any, str, type(None), None) or _is_awaitable(annotation):
        return OutputSpec(None, None, False)
    adapter: TypeAdapter[Any] = TypeAdapter(annotation)
    schema = adapter.json_schema(mode="serialization")
    if _is_object(annotation):
        schema.pop("title", None)
        return OutputSpec(schema, adapter, False)
    wrapped = {"type": "object", "properties": {"result": schema}, "required": ["result"]}
    if "$defs" in schema:
        wrapped["$defs"] = schema.pop("$defs")
    return OutputSpec(wrapped, adapter, True)


def param_headers(input_schema: dict[str, Any], *, name: str) -> tuple[ParamHeader, ...]:
    """The `x-mcp-header` annotations of a tool's top-level properties, validated."""
    seen: set[str] = set()
    headers: list[ParamHeader] = []
    for prop, schema in input_schema.get("properties", {}).items():
        header = schema.get("x-mcp-header") if isinstance(schema, dict) else None
        if header is None:
            continue
        kind = schema.get("type")
        if not isinstance(header, str) or not _HEADER_TOKEN.match(header):
            raise ValueError(f"{name}: x-mcp-header {header!r} is not a valid header token")
        if header.lower() in seen:
            raise ValueError(f"{name}: x-mcp-header {header!r} is used twice")
        if kind not in ("string", "integer", "boolean"):
            raise ValueError(f"{name}: x-mcp-header on {prop!r} needs a string, integer or boolean")
        seen.add(header.lower())
        headers.append(ParamHeader(header=header, argument=prop, kind=kind))
    return tuple(headers)


def _is_object(annotation: Any) -> bool:
    origin = get_origin(annotation) or annotation
    if isinstance(origin, type):
        if issubclass(origin, (BaseModel, dict)):
            return True
        if dataclasses.is_dataclass(origin) or typing.is_typeddict(origin):
            return True
    return False


def _is_awaitable(annotation: Any) -> bool:
    return get_origin(annotation) in (typing.Awaitable, typing.Coroutine)
