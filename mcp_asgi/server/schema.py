"""Type hints and docstrings -> JSON Schema (2020-12) and argument validation, via pydantic."""

from __future__ import annotations

import dataclasses
import inspect
import re
import typing
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Final, get_origin

import pydantic
from pydantic import BaseModel, ConfigDict, TypeAdapter
from pydantic.fields import FieldInfo
from starlette.datastructures import UploadFile

from mcp_asgi.lifecycle.cancel import CancelToken
from mcp_asgi.protocol.request import ParamHeader
from mcp_asgi.server.content import InvalidResult, may_be_content
from mcp_asgi.server.context import Context
from mcp_asgi.server.depends import Dependencies, injected
from mcp_asgi.server.json_schema import JsonSchema

_ARGS_SECTION = re.compile(r"^\s*(Args|Arguments|Parameters):\s*$")
_ARG_LINE = re.compile(r"^\s+(\*{0,2}\w+)(?:\s*\([^)]*\))?\s*:\s*(.*)$")
_HEADER_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+\Z")
_DOTTED = re.compile(r"(?:\w+\.)+(\w+)")


@dataclass(frozen=True, slots=True)
class HandlerSignature:
    """How to call a handler: its argument model and where the injected objects go.

    The model's fields have internal names aliased to the handler's parameter names, so a
    parameter may be called anything (`schema`, `json`, `model_config`, ...).
    `request_param` receives the HTTP `Request`; `dependencies` are the FastAPI
    dependencies, resolved around the call (`primitives.invoke`).
    """

    arguments: type[BaseModel]
    context_param: str | None
    token_param: str | None
    is_async: bool
    request_param: str | None = None
    dependencies: Dependencies | None = None
    _names: tuple[tuple[str, str], ...] = dataclasses.field(init=False, repr=False, compare=False)
    _validate: Callable[[Any], BaseModel] = dataclasses.field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # (field name, parameter name) pairs, read once: `bind` runs on every call
        fields = self.arguments.model_fields.items()
        object.__setattr__(self, "_names", tuple((n, f.alias or n) for n, f in fields))
        model = self.arguments  # a model not built yet (forward references) builds itself
        complete = model.__pydantic_complete__
        validate = model.__pydantic_validator__.validate_python if complete else None
        object.__setattr__(self, "_validate", validate or model.model_validate)

    @property
    def parameters(self) -> dict[str, FieldInfo]:
        """The client-visible parameters, by name, in declaration order."""
        return {field.alias or name: field for name, field in self.arguments.model_fields.items()}

    def input_schema(self) -> dict[str, Any]:
        """The JSON Schema of the arguments (root `type: object`)."""
        schema = self.arguments.model_json_schema(by_alias=True)
        schema.pop("title", None)
        return schema

    def bind(self, arguments: dict[str, Any], ctx: Context) -> dict[str, Any]:
        """Validate `arguments` and return the keyword arguments for the call.

        Raises `pydantic.ValidationError` when they do not fit the signature.
        """
        # the model's own validator: `model_validate` is a Python wrapper around this call
        fields = self._validate(arguments).__dict__
        kwargs = {}
        for name, param in self._names:  # not a comprehension: a call of its own on 3.11
            kwargs[param] = fields[name]
        if self.context_param:
            kwargs[self.context_param] = ctx
        if self.token_param:
            kwargs[self.token_param] = ctx.cancel_token
        if self.request_param:
            kwargs[self.request_param] = ctx.request
        return kwargs


def inspect_handler(fn: Callable[..., Any], *, name: str) -> HandlerSignature:
    """Read a handler's signature; raise TypeError for signatures that cannot be served."""
    if not callable(fn):
        raise TypeError(f"{name}: handler must be callable")
    try:
        hints = typing.get_type_hints(fn, include_extras=True)
    except Exception as exc:
        raise TypeError(f"{name}: cannot resolve the handler's type hints: {exc}") from exc
    _, arg_docs = parse_docstring(fn)
    fields: dict[str, Any] = {}
    context_param = token_param = request_param = None
    dependency_params: list[inspect.Parameter] = []
    for index, param in enumerate(inspect.signature(fn).parameters.values()):
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            stars = "*" if param.kind is param.VAR_POSITIONAL else "**"
            raise TypeError(
                f"{name}: parameter {stars}{param.name} cannot be served: declare each "
                "argument as a named parameter"
            )
        if param.kind is param.POSITIONAL_ONLY:
            raise TypeError(
                f"{name}: parameter {param.name!r} is positional-only: arguments are passed "
                "by name, so remove the '/' from the signature"
            )
        annotation = hints.get(param.name, Any)
        if annotation is Context:
            context_param = param.name
            continue
        if annotation is CancelToken:
            token_param = param.name
            continue
        kind = injected(param.name, param, annotation, handler=name)
        if kind == "request":
            request_param = param.name
            continue
        if kind == "depends":
            dependency_params.append(param.replace(annotation=annotation))
            continue
        if _names_upload(annotation):
            raise TypeError(
                f"{name}: parameter {param.name!r} is an UploadFile, but a handler's arguments "
                "are the call's JSON values, never uploaded files: take the file's contents "
                "as a `str` argument (base64 for binary data, e.g. pydantic's Base64Bytes), "
                "or a URL or resource URI to fetch it from"
            )
        default = ... if param.default is param.empty else param.default
        description = arg_docs.get(param.name)
        fields[f"p{index}"] = (
            annotation,
            pydantic.Field(default, alias=param.name, description=description),
        )
    try:
        model = _arguments_model(fields)
    except pydantic.PydanticUserError as exc:
        raise _no_schema(fields, name, exc) from None
    return HandlerSignature(
        arguments=model,
        context_param=context_param,
        token_param=token_param,
        is_async=inspect.iscoroutinefunction(fn),
        request_param=request_param,
        dependencies=Dependencies.build(fn, dependency_params, name=name)
        if dependency_params
        else None,
    )


def _arguments_model(fields: dict[str, Any]) -> type[BaseModel]:
    """The model of a handler's arguments, checked to have a JSON Schema (pydantic's
    `PydanticUserError` if a type has none)."""
    model: type[BaseModel] = pydantic.create_model(
        "Arguments", __config__=ConfigDict(extra="forbid", arbitrary_types_allowed=False), **fields
    )
    model.model_json_schema(by_alias=True)
    return model


def _no_schema(fields: dict[str, Any], owner: str, exc: Exception) -> TypeError:
    """The error for arguments without a JSON Schema, naming the first parameter at fault
    (found by trying each alone) and what to write instead."""
    for key, (annotation, info) in fields.items():
        try:
            _arguments_model({key: (annotation, info)})
        except pydantic.PydanticUserError:
            param, shown = info.alias, _type_name(annotation)
            return TypeError(
                f"{owner}: parameter {param!r} has type {shown}, which has no JSON Schema; "
                f"if it is a dependency, write `{param}: {shown} = Depends(get_{param})`; "
                "if it is an argument, give it a type JSON can hold (str, int, list[str], "
                "a pydantic model, a dataclass, a TypedDict...)"
            )
    return TypeError(f"{owner}: parameter types cannot be served as JSON: {exc}")


def _type_name(annotation: Any) -> str:
    """A type hint as written in code: `Foo`, `list[Foo]`, `Optional[Foo]` (no modules,
    no `Annotated` metadata)."""
    if get_origin(annotation) is typing.Annotated:
        return _type_name(typing.get_args(annotation)[0])
    if isinstance(annotation, type) and not typing.get_args(annotation):
        return annotation.__qualname__
    return _DOTTED.sub(r"\1", str(annotation))


def _names_upload(annotation: Any) -> bool:
    """Whether a type hint is, or holds, Starlette's (or FastAPI's) `UploadFile`."""
    if isinstance(annotation, type) and issubclass(annotation, UploadFile):
        return True
    return any(_names_upload(arg) for arg in typing.get_args(annotation))


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
    """How a tool's return value becomes `structuredContent`: through the return
    annotation (`adapter`), checked against the `output_schema=` given (`given`), if any.
    A tool with no `schema` returns unstructured content."""

    schema: dict[str, Any] | None
    adapter: TypeAdapter[Any] | None
    wrap: bool
    given: JsonSchema | None = None

    def structured(self, value: Any) -> Any:
        """The JSON value for `structuredContent` (for a tool with a `schema`).

        Raises `pydantic.ValidationError` for a value that does not fit the annotation,
        `InvalidResult` for one the given schema refuses.
        """
        if self.adapter is None:
            data = json_value(value)
        else:
            checked = self.adapter.validate_python(value)  # a dict for a model return is fine
            data = self.adapter.dump_python(checked, mode="json", warnings="error")
        data = {"result": data} if self.wrap else data
        self.conform(data)
        return data

    def unstructured(self, what: str) -> None:
        """Raise `InvalidResult` if the tool lists an output schema: a result without
        structured content would break it (clients refuse such a result)."""
        if self.schema is not None:
            raise InvalidResult(
                f"it returned {what}, but its outputSchema promises structured content: "
                "return data that matches it, or ToolResult(blocks, structured_content=...)"
            )

    def conform(self, data: Any) -> None:
        """Raise `InvalidResult` if `data` does not match the given output schema."""
        problem = self.given.problems(data) if self.given is not None else None
        if problem is not None:
            raise InvalidResult(
                f"its structured content does not match its output schema: {problem}"
            )


_ANY: Final[TypeAdapter[Any]] = TypeAdapter(Any)


def json_value(value: Any) -> Any:
    """`value` as JSON data: pydantic's JSON mode (models, dataclasses, dates...)."""
    return _ANY.dump_python(value, mode="json", warnings="error")


def output_spec(
    fn: Callable[..., Any], given: JsonSchema | None = None, *, owner: str = "tool"
) -> OutputSpec:
    """The output schema: `given` (the tool's `output_schema=`), else derived from the
    return annotation (objects as they are, other types wrapped in `{"result": ...}`).
    An annotation that may be content blocks (`may_be_content`: a block, `ToolResult`,
    `object`, `list[Any]`...), `str`, `None` or none at all mean unstructured content.
    `TypeError` naming `owner` for an annotation without a JSON Schema."""
    annotation = typing.get_type_hints(fn, include_extras=True).get("return", Any)
    unstructured = annotation in (Any, str, type(None), None)
    if unstructured or _is_awaitable(annotation) or may_be_content(annotation):
        if given is None:
            return OutputSpec(None, None, False)
        return OutputSpec(given.schema, None, False, given)
    try:
        adapter: TypeAdapter[Any] = TypeAdapter(annotation)
        schema = adapter.json_schema(mode="serialization")
    except pydantic.PydanticUserError:
        raise TypeError(
            f"{owner}: its return annotation {_type_name(annotation)} has no JSON Schema, "
            "so what it returns cannot be sent: annotate a type JSON can hold (str, a dict, "
            "a list, a pydantic model, a dataclass, a TypedDict...) or content blocks"
        ) from None
    if given is not None:
        return OutputSpec(given.schema, adapter, False, given)
    if _is_object(annotation):
        schema.pop("title", None)
        return OutputSpec(schema, adapter, False)
    wrapped = {"type": "object", "properties": {"result": schema}, "required": ["result"]}
    if "$defs" in schema:
        wrapped["$defs"] = schema.pop("$defs")
    return OutputSpec(wrapped, adapter, True)


def param_headers(input_schema: dict[str, Any], *, name: str) -> tuple[ParamHeader, ...]:
    """The `x-mcp-header` annotations of a tool's input schema, validated as clients do.

    Clients drop a tool with any invalid annotation, so one is an error at registration:
    it must sit on a string, integer or boolean property reached from the root through
    `properties` only (not inside `items`, `anyOf`, `$defs`, ...), be an RFC 9110 token,
    and be unique (case-insensitively).
    """
    seen: dict[str, str] = {}
    headers: list[ParamHeader] = []
    for path, schema in _schema_positions(input_schema):
        if _X_MCP_HEADER not in schema:
            continue
        header = schema[_X_MCP_HEADER]
        where = ".".join(path or ()) or "the schema root"
        if not path:
            raise ValueError(
                f"{name}: x-mcp-header must be on a property reached through 'properties' "
                "only, not inside items, anyOf/oneOf, $defs or a nested model"
            )
        if not isinstance(header, str) or not _HEADER_TOKEN.match(header):
            raise ValueError(f"{name}: x-mcp-header {header!r} is not a valid header token")
        if header.lower() in seen:
            raise ValueError(
                f"{name}: x-mcp-header {header!r} on {where!r} duplicates {seen[header.lower()]!r}"
            )
        kind = schema.get("type")
        if kind not in ("string", "integer", "boolean"):
            raise ValueError(
                f"{name}: x-mcp-header on {where!r} needs a plain string, integer or boolean "
                f"property (not nullable, not a number); its schema type is {kind!r}"
            )
        seen[header.lower()] = where
        headers.append(ParamHeader(header=header, path=path, kind=kind))
    return tuple(headers)


_X_MCP_HEADER = "x-mcp-header"
_SUBSCHEMA: Final = frozenset(
    {
        "items",
        "contains",
        "unevaluatedItems",
        "additionalProperties",
        "propertyNames",
        "unevaluatedProperties",
        "not",
        "if",
        "then",
        "else",
        "contentSchema",
    }
)
_SUBSCHEMA_LIST: Final = frozenset({"allOf", "anyOf", "oneOf", "prefixItems"})
_SUBSCHEMA_MAP: Final = frozenset({"patternProperties", "dependentSchemas", "$defs", "definitions"})


def _schema_positions(
    root: Any,
) -> Iterator[tuple[tuple[str, ...] | None, dict[str, Any]]]:
    """Every subschema with its chain of `properties` keys (None once off that chain)."""
    stack: list[tuple[tuple[str, ...] | None, Any]] = [((), root)]
    while stack:
        path, node = stack.pop()
        if not isinstance(node, dict):
            continue
        yield path, node
        for key, value in node.items():
            if key == "properties" and isinstance(value, dict):
                for prop, sub in value.items():
                    stack.append(((*path, prop) if path is not None else None, sub))
            elif key in _SUBSCHEMA:
                stack.append((None, value))
            elif key in _SUBSCHEMA_LIST and isinstance(value, list):
                stack.extend((None, sub) for sub in value)
            elif key in _SUBSCHEMA_MAP and isinstance(value, dict):
                stack.extend((None, sub) for sub in value.values())


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
