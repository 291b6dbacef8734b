"""Registered tools, resources and prompts: their MCP descriptions and how to call them."""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pydantic
from pydantic_core import PydanticSerializationError

from mcp_asgi._loggers import errors_logger as _errors
from mcp_asgi.protocol.jsonrpc import INVALID_PARAMS, JsonObject, McpError
from mcp_asgi.protocol.request import ParamHeader
from mcp_asgi.server.context import Context
from mcp_asgi.server.schema import (
    HandlerSignature,
    OutputSpec,
    inspect_handler,
    output_spec,
    param_headers,
)

Handler = Callable[..., Any]
_TEMPLATE_VAR = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


async def invoke(sig: HandlerSignature, fn: Handler, kwargs: dict[str, Any], ctx: Context) -> Any:
    """Call a handler: `async def` on the event loop, plain `def` in a worker thread."""
    if sig.is_async:
        return await fn(**kwargs)
    return await ctx.run_sync(lambda: fn(**kwargs))


@dataclass(frozen=True, slots=True)
class Tool:
    name: str
    fn: Handler
    signature: HandlerSignature
    output: OutputSpec
    description: str | None
    title: str | None
    annotations: JsonObject | None
    timeout: float | None
    input_schema: JsonObject
    headers: tuple[ParamHeader, ...]

    @classmethod
    def build(
        cls,
        fn: Handler,
        *,
        name: str,
        title: str | None,
        description: str | None,
        annotations: JsonObject | None,
        timeout: float | None,
    ) -> Tool:
        signature = inspect_handler(fn, name=name)
        schema = signature.input_schema()
        return cls(
            name=name,
            fn=fn,
            signature=signature,
            output=output_spec(fn),
            description=description,
            title=title,
            annotations=annotations,
            timeout=timeout,
            input_schema=schema,
            headers=param_headers(schema, name=name),
        )

    def describe(self) -> JsonObject:
        entry: JsonObject = {"name": self.name, "inputSchema": self.input_schema}
        _put(entry, title=self.title, description=self.description, annotations=self.annotations)
        if self.output.schema is not None:
            entry["outputSchema"] = self.output.schema
        return entry

    async def call(self, arguments: Mapping[str, Any], ctx: Context) -> JsonObject:
        """Run the tool; bad arguments and tool exceptions become `isError` results."""
        try:
            kwargs = self.signature.bind(dict(arguments), ctx)
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
        except (pydantic.ValidationError, PydanticSerializationError) as exc:
            _errors.error(
                "tool %r returned a value that does not match its return annotation",
                self.name,
                exc_info=True,
                extra=_fields(ctx),
            )
            return tool_error(f"Tool {self.name!r} returned an invalid result: {exc}")

    def _result(self, value: Any) -> JsonObject:
        structured = self.output.structured(value)
        if structured is not None:
            text = json.dumps(structured, ensure_ascii=False)
            return {"content": [{"type": "text", "text": text}], "structuredContent": structured}
        return {"content": to_content(value)}


def _fields(ctx: Context) -> dict[str, Any]:
    return {"request_id": ctx.request_id, "method": ctx.method}


def tool_error(text: str) -> JsonObject:
    """A `tools/call` result reporting an execution error the model can act on."""
    return {"content": [{"type": "text", "text": text}], "isError": True}


def to_content(value: Any) -> list[JsonObject]:
    """Turn a handler's return value into MCP content blocks."""
    if value is None:
        return []
    if isinstance(value, str):
        return [{"type": "text", "text": value}]
    data = pydantic.TypeAdapter(Any).dump_python(value, mode="json")
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

    @classmethod
    def build(
        cls, fn: Handler, *, uri: str, name: str, description: str | None, mime_type: str | None
    ) -> Resource:
        signature = inspect_handler(fn, name=name)
        variables = _TEMPLATE_VAR.findall(uri)
        params = set(signature.parameters)
        if set(variables) != params:
            raise TypeError(
                f"resource {uri!r}: template variables {sorted(variables)} must match the "
                f"handler's parameters {sorted(params)}"
            )
        pattern = _compile_template(uri) if variables else None
        return cls(uri, fn, signature, name, description, mime_type, pattern)

    @property
    def is_template(self) -> bool:
        return self.pattern is not None

    def describe(self) -> JsonObject:
        key = "uriTemplate" if self.is_template else "uri"
        entry: JsonObject = {key: self.uri, "name": self.name}
        _put(entry, description=self.description, mimeType=self.mime_type)
        return entry

    def match(self, uri: str) -> dict[str, str] | None:
        if self.pattern is None:
            return {} if uri == self.uri else None
        found = self.pattern.fullmatch(uri)
        return found.groupdict() if found else None

    async def read(self, uri: str, variables: dict[str, str], ctx: Context) -> JsonObject:
        try:
            kwargs = self.signature.bind(variables, ctx)
        except pydantic.ValidationError as exc:
            raise McpError(
                INVALID_PARAMS, f"Invalid resource URI {uri!r}: {_describe(exc)}"
            ) from None
        value = await invoke(self.signature, self.fn, kwargs, ctx)
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
    title: str | None
    description: str | None

    @classmethod
    def build(cls, fn: Handler, *, name: str, title: str | None, description: str | None) -> Prompt:
        return cls(name, fn, inspect_handler(fn, name=name), title, description)

    def describe(self) -> JsonObject:
        entry: JsonObject = {"name": self.name}
        _put(entry, title=self.title, description=self.description)
        arguments = []
        for arg, info in self.signature.parameters.items():
            item: JsonObject = {"name": arg, "required": info.is_required()}
            _put(item, description=info.description)
            arguments.append(item)
        if arguments:
            entry["arguments"] = arguments
        return entry

    async def get(self, arguments: Mapping[str, Any], ctx: Context) -> JsonObject:
        try:
            kwargs = self.signature.bind(dict(arguments), ctx)
        except pydantic.ValidationError as exc:
            raise McpError(
                INVALID_PARAMS, f"Invalid arguments for prompt {self.name!r}: {_describe(exc)}"
            ) from None
        value = await invoke(self.signature, self.fn, kwargs, ctx)
        result: JsonObject = {"messages": _to_messages(value)}
        _put(result, description=self.description)
        return result


def _to_messages(value: Any) -> list[JsonObject]:
    items = value if isinstance(value, list) else [value]
    messages: list[JsonObject] = []
    for item in items:
        if isinstance(item, str):
            messages.append({"role": "user", "content": {"type": "text", "text": item}})
        elif isinstance(item, dict) and "role" in item and "content" in item:
            content = item["content"]
            if isinstance(content, str):
                content = {"type": "text", "text": content}
            messages.append({"role": item["role"], "content": content})
        else:
            raise TypeError("a prompt must return str, or a list of str or {role, content} dicts")
    return messages


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
