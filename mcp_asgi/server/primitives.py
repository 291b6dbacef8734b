"""Registered tools, resources and prompts: their MCP descriptions and how to call them."""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import pydantic
from pydantic_core import PydanticSerializationError

from mcp_asgi._loggers import errors_logger as _errors
from mcp_asgi.protocol.jsonrpc import INTERNAL_ERROR, INVALID_PARAMS, JsonObject, McpError
from mcp_asgi.protocol.request import ParamHeader
from mcp_asgi.server.content import (
    InvalidResult,
    ToolResult,
    message_content,
    resource_contents,
    tool_content,
)
from mcp_asgi.server.context import Context, request_scope_of
from mcp_asgi.server.json_schema import JsonSchema
from mcp_asgi.server.metadata import NO_EXTRAS, Extras
from mcp_asgi.server.schema import (
    HandlerSignature,
    OutputSpec,
    inspect_handler,
    json_value,
    output_spec,
    param_headers,
)

Handler = Callable[..., Any]
_TEMPLATE_VAR = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


def invoke(
    sig: HandlerSignature, fn: Handler, kwargs: dict[str, Any], ctx: Context
) -> Awaitable[Any]:
    """`await invoke(...)`: call a handler: `async def` on the event loop, plain `def` in a
    worker thread; its FastAPI dependencies, if any, are resolved before and closed after.
    A plain function handing back what is awaited (an `async def` handler's own coroutine):
    no frame of its own between the handler and its caller, for a cancellation to unwind
    through."""
    if sig.dependencies is not None:
        return sig.dependencies.call(fn, kwargs, ctx, is_async=sig.is_async)
    if sig.is_async:
        return fn(**kwargs)  # type: ignore[no-any-return]
    # the request scope's `run_sync`, as `ctx.run_sync` calls it, with the arguments handed
    # to the thread: no coroutine of Context's, no `partial`, alive while the thread runs
    return request_scope_of(ctx).run_sync(fn, kwargs)


@dataclass(frozen=True, slots=True)
class Tool:
    name: str
    fn: Handler
    signature: HandlerSignature
    output: OutputSpec
    description: str | None
    extras: Extras
    timeout: float | None
    input_schema: JsonObject
    headers: tuple[ParamHeader, ...]
    arguments_schema: JsonSchema | None = None  # the input_schema= given, checking arguments

    @classmethod
    def build(
        cls,
        fn: Handler,
        *,
        name: str,
        description: str | None,
        timeout: float | None,
        extras: Extras = NO_EXTRAS,
        input_schema: Mapping[str, Any] | None = None,
        output_schema: Mapping[str, Any] | None = None,
    ) -> Tool:
        """Read the handler; `input_schema` and `output_schema` replace the schemas its
        hints would give (`TypeError`/`ValueError` naming the tool if one is unusable)."""
        owner = f"tool {name!r}"
        signature = inspect_handler(fn, name=owner)
        given = None
        if input_schema is not None:
            given = JsonSchema(input_schema, owner=owner, option="input_schema")
            _check_input_schema(given.schema, signature, owner)
        returned = None
        if output_schema is not None:
            returned = JsonSchema(output_schema, owner=owner, option="output_schema")
        schema = given.schema if given is not None else signature.input_schema()
        return cls(
            name=name,
            fn=fn,
            signature=signature,
            output=output_spec(fn, returned, owner=owner),
            description=description,
            extras=extras,
            timeout=timeout,
            input_schema=schema,
            headers=param_headers(schema, name=owner),
            arguments_schema=given,
        )

    def describe(self) -> JsonObject:
        entry: JsonObject = {"name": self.name, "inputSchema": self.input_schema}
        _put(entry, description=self.description)
        if self.output.schema is not None:
            entry["outputSchema"] = self.output.schema
        self.extras.put_into(entry)
        return entry

    async def call(self, arguments: Mapping[str, Any], ctx: Context) -> JsonObject:
        """Run the tool; bad arguments, tool exceptions and return values that cannot be
        sent become `isError` results."""
        if self.arguments_schema is not None:
            problem = self.arguments_schema.problems(dict(arguments))
            if problem is not None:
                return tool_error(f"Invalid arguments for tool {self.name!r}: {problem}")
        try:  # the validator only reads the arguments: a dict needs no copy
            kwargs = self.signature.bind(
                arguments if type(arguments) is dict else dict(arguments), ctx
            )
        except pydantic.ValidationError as exc:
            return tool_error(f"Invalid arguments for tool {self.name!r}: {_describe(exc)}")
        try:
            value = await invoke(self.signature, self.fn, kwargs, ctx)
        except McpError:
            raise
        except Exception as exc:
            if not ctx.cancelled:
                _errors.warning("tool %r raised", self.name, exc_info=True, extra=_fields(ctx))
            return tool_error(f"Tool {self.name!r} failed: {type(exc).__name__}: {exc}")
        try:
            return self._result(value)
        except (pydantic.ValidationError, PydanticSerializationError, InvalidResult) as exc:
            _errors.error(
                "tool %r returned a value that cannot be sent: %s",
                self.name,
                exc,
                exc_info=not isinstance(exc, InvalidResult),
                extra=_fields(ctx),
            )
            return tool_error(f"Tool {self.name!r} returned an invalid result: {exc}")

    def _result(self, value: Any) -> JsonObject:
        """The `tools/call` result for what the handler returned: a `ToolResult` as it is,
        content blocks as content, else structured content (a tool with an output schema)
        or one text block."""
        if type(value) is str and self.output.schema is None:  # most tools: one text block
            return {"content": [{"type": "text", "text": value}]}
        if isinstance(value, ToolResult):
            structured = None
            if value.structured_content is not None:
                structured = json_value(value.structured_content)
                if not value.is_error:
                    self.output.conform(structured)
            elif not value.is_error:
                self.output.unstructured("a ToolResult without structured_content")
            return value.to_json(structured)
        blocks = tool_content(value)
        if blocks is not None:
            self.output.unstructured("content blocks")
            return {"content": blocks}
        if self.output.schema is not None:
            structured = self.output.structured(value)
            text = json.dumps(structured, ensure_ascii=False)
            return {"content": [{"type": "text", "text": text}], "structuredContent": structured}
        return {"content": to_content(value)}


def _check_input_schema(schema: JsonObject, signature: HandlerSignature, owner: str) -> None:
    """A tool's `input_schema=`: an object schema whose properties the handler takes."""
    if schema.get("type") != "object":
        raise ValueError(f'{owner}: input_schema needs "type": "object" at its root (MCP)')
    properties = schema.get("properties", {})
    unknown = [p for p in properties if p not in signature.parameters]
    if unknown:
        raise ValueError(
            f"{owner}: input_schema property {unknown[0]!r} is not a parameter of the "
            f"handler (its parameters: {', '.join(signature.parameters) or 'none'})"
        )


def _fields(ctx: Context) -> dict[str, Any]:
    return {"request_id": ctx.request_id, "method": ctx.method}


def tool_error(text: str) -> JsonObject:
    """A `tools/call` result reporting an execution error the model can act on."""
    return {"content": [{"type": "text", "text": text}], "isError": True}


_ANY: Final = pydantic.TypeAdapter(Any)  # building an adapter costs ~100 µs: once


def to_content(value: Any) -> list[JsonObject]:
    """Turn a handler's return value into MCP content blocks."""
    if value is None:
        return []
    if isinstance(value, str):
        return [{"type": "text", "text": value}]
    data = _ANY.dump_python(value, mode="json")
    return [{"type": "text", "text": json.dumps(data, ensure_ascii=False)}]


@dataclass(frozen=True, slots=True)
class Resource:
    uri: str
    fn: Handler
    signature: HandlerSignature
    name: str
    description: str | None
    mime_type: str | None
    pattern: re.Pattern[str] | None = field(default=None)
    extras: Extras = field(default=NO_EXTRAS)

    @classmethod
    def build(
        cls,
        fn: Handler,
        *,
        uri: str,
        name: str,
        description: str | None,
        mime_type: str | None,
        extras: Extras = NO_EXTRAS,
    ) -> Resource:
        signature = inspect_handler(fn, name=f"resource {uri!r}")
        variables = _TEMPLATE_VAR.findall(uri)
        params = set(signature.parameters)
        if set(variables) != params:
            raise TypeError(
                f"resource {uri!r}: template variables {sorted(variables)} must match the "
                f"handler's parameters {sorted(params)}"
            )
        pattern = _compile_template(uri) if variables else None
        return cls(uri, fn, signature, name, description, mime_type, pattern, extras)

    @property
    def is_template(self) -> bool:
        return self.pattern is not None

    def describe(self) -> JsonObject:
        key = "uriTemplate" if self.is_template else "uri"
        entry: JsonObject = {key: self.uri, "name": self.name}
        _put(entry, description=self.description, mimeType=self.mime_type)
        self.extras.put_into(entry)
        return entry

    def match(self, uri: str) -> dict[str, str] | None:
        if self.pattern is None:
            return {} if uri == self.uri else None
        found = self.pattern.fullmatch(uri)
        return found.groupdict() if found else None

    async def read(self, uri: str, variables: dict[str, str], ctx: Context) -> JsonObject:
        kwargs = _bind(self.signature, variables, ctx, f"Invalid resource URI {uri!r}")
        value = await invoke(self.signature, self.fn, kwargs, ctx)
        try:
            several = resource_contents(value)
        except InvalidResult as exc:
            raise _invalid(f"Resource {uri!r}", exc, ctx) from None
        if several is not None:
            return {"contents": [c.to_json(uri=uri, mime_type=self.mime_type) for c in several]}
        content: JsonObject = {"uri": uri}
        if self.mime_type:
            content["mimeType"] = self.mime_type
        if isinstance(value, bytes):
            content["blob"] = base64.b64encode(value).decode("ascii")
        elif isinstance(value, str):
            content["text"] = value
        else:
            content["text"] = to_content(value)[0]["text"] if value is not None else ""
            content.setdefault("mimeType", "application/json")
        return {"contents": [content]}


@dataclass(frozen=True, slots=True)
class Prompt:
    name: str
    fn: Handler
    signature: HandlerSignature
    description: str | None
    extras: Extras = field(default=NO_EXTRAS)

    @classmethod
    def build(
        cls, fn: Handler, *, name: str, description: str | None, extras: Extras = NO_EXTRAS
    ) -> Prompt:
        signature = inspect_handler(fn, name=f"prompt {name!r}")
        return cls(name, fn, signature, description, extras)

    def describe(self) -> JsonObject:
        entry: JsonObject = {"name": self.name}
        _put(entry, description=self.description)
        self.extras.put_into(entry)
        arguments = []
        for arg, info in self.signature.parameters.items():
            item: JsonObject = {"name": arg, "required": info.is_required()}
            _put(item, description=info.description)
            arguments.append(item)
        if arguments:
            entry["arguments"] = arguments
        return entry

    async def get(self, arguments: Mapping[str, Any], ctx: Context) -> JsonObject:
        kwargs = _bind(
            self.signature, dict(arguments), ctx, f"Invalid arguments for prompt {self.name!r}"
        )
        value = await invoke(self.signature, self.fn, kwargs, ctx)
        try:
            messages = _to_messages(value)
        except InvalidResult as exc:
            raise _invalid(f"Prompt {self.name!r}", exc, ctx) from None
        result: JsonObject = {"messages": messages}
        _put(result, description=self.description)
        return result


def _to_messages(value: Any) -> list[JsonObject]:
    """A prompt's messages: each item a content block or `str` (a `user` message), or a
    `{"role": ..., "content": ...}` dict whose content is a block, a `str` or a block's dict."""
    items = value if isinstance(value, (list, tuple)) else [value]
    messages: list[JsonObject] = []
    for index, item in enumerate(items):
        where = f"message {index}"
        role: Any = "user"
        content = item
        if isinstance(item, dict) and "type" not in item:
            if "role" not in item or "content" not in item:
                raise InvalidResult(f"{where} is a dict without 'role' and 'content'")
            role, content = item["role"], item["content"]
            if role not in ("user", "assistant"):
                raise InvalidResult(f"{where} has the role {role!r}: 'user' or 'assistant'")
        messages.append({"role": role, "content": message_content(content, where)})
    return messages


def _invalid(what: str, exc: InvalidResult, ctx: Context) -> McpError:
    """The -32603 error for a resource or prompt handler's result that cannot be sent."""
    _errors.error("%s returned a value that cannot be sent: %s", what, exc, extra=_fields(ctx))
    return McpError(INTERNAL_ERROR, f"{what} returned an invalid result: {exc}")


def _compile_template(template: str) -> re.Pattern[str]:
    parts: list[str] = []
    last = 0
    for match in _TEMPLATE_VAR.finditer(template):
        parts.append(re.escape(template[last : match.start()]))
        parts.append(f"(?P<{match.group(1)}>[^/?#]+)")
        last = match.end()
    parts.append(re.escape(template[last:]))
    return re.compile("".join(parts))


def _describe(exc: pydantic.ValidationError) -> str:
    problems = []
    for error in exc.errors(include_url=False):
        where = ".".join(str(p) for p in error["loc"]) or "arguments"
        problems.append(f"{where}: {error['msg']}")
    return "; ".join(problems)


def _put(target: JsonObject, **values: Any) -> None:
    for key, value in values.items():
        if value is not None:
            target[key] = value


def _bind(
    signature: HandlerSignature, arguments: dict[str, Any], ctx: Context, what: str
) -> dict[str, Any]:
    """The handler's keyword arguments, or -32602 beginning with `what` (resources and
    prompts; a tool's bad arguments are a tool error instead)."""
    try:
        return signature.bind(arguments, ctx)
    except pydantic.ValidationError as exc:
        raise McpError(INVALID_PARAMS, f"{what}: {_describe(exc)}") from None
