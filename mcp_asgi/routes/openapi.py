"""A route's OpenAPI operation as a tool: its arguments, `inputSchema`, `outputSchema`,
description and annotations.

The arguments are one object: the path, query and header parameters, then the JSON
body's fields (a body that is not an object with properties is one argument, `body`).
A name already taken by an earlier one gets its location as a prefix (`query_id`,
`header_id`, `body_id`), then a number (`body_id_2`). Cookie parameters, and headers the
call sets itself (`Authorization`, `Cookie`, `Host`, `Content-Type`, ...) are not
arguments. `outputSchema` is the JSON schema of the first 2xx response that has one; one
that is not an object's (a list, a number, a union) is wrapped, `{"result": <schema>}`,
as a decorated tool's: structured content is an object.
An operation whose body is a form, multipart or another non-JSON type is `Skipped`, with
the reason.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

from mcp_asgi.protocol.jsonrpc import JsonObject
from mcp_asgi.routes.refs import Resolver
from mcp_asgi.server.json_schema import JsonSchema

Location = Literal["path", "query", "header", "body"]

METHODS: Final = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE")
_ANNOTATIONS: Final[Mapping[str, JsonObject]] = {
    "GET": {"readOnlyHint": True},
    "HEAD": {"readOnlyHint": True},
    "POST": {"readOnlyHint": False},
    "PATCH": {"readOnlyHint": False},
    "PUT": {"readOnlyHint": False, "idempotentHint": True},
    "DELETE": {"readOnlyHint": False, "destructiveHint": True, "idempotentHint": True},
}
NOT_ARGUMENTS: Final = frozenset(
    {
        "authorization",
        "proxy-authorization",
        "cookie",
        "host",
        "content-type",
        "content-length",
        "transfer-encoding",
        "connection",
        "accept-encoding",
    }
)
_LOCATIONS: Final[tuple[Location, ...]] = ("path", "query", "header")


@dataclass(frozen=True, slots=True)
class Argument:
    """One argument of the tool: where it goes in the HTTP request, under which name
    (`key`; empty for the whole body)."""

    name: str
    location: Location
    key: str


@dataclass(frozen=True, slots=True)
class Operation:
    """A route as a tool: how to make its HTTP request from the arguments."""

    method: str
    path: str
    operation_id: str
    arguments: tuple[Argument, ...]
    body_required: bool
    wrap_output: bool
    """Whether its `outputSchema` is the response's in `{"result": ...}` (not an object)."""
    definition: JsonObject
    tags: tuple[str, ...]
    validator: JsonSchema

    @property
    def structured(self) -> bool:
        """Whether the tool declares an `outputSchema`."""
        return "outputSchema" in self.definition


@dataclass(frozen=True, slots=True)
class Skipped:
    """An operation that cannot be a tool, and why."""

    reason: str


def operation_of(
    document: Mapping[str, Any], path: str, method: str, operation: Mapping[str, Any]
) -> Operation | Skipped:
    """The tool of `operation` (`method` on `path`) in the OpenAPI `document`."""
    resolver = Resolver(document)
    path_item = document.get("paths", {}).get(path, {})
    body = _body_schema(operation, resolver)
    if isinstance(body, Skipped):
        return body
    properties: dict[str, Any] = {}
    required: list[str] = []
    arguments: list[Argument] = []

    def add(name: str, location: Location, key: str, schema: Any, needed: bool) -> None:
        name = _unique(name, location, properties)
        properties[name] = schema if isinstance(schema, dict) else {}
        arguments.append(Argument(name, location, key))
        if needed:
            required.append(name)

    parameters = [resolver.resolve(p) for p in path_item.get("parameters", [])]
    own = [resolver.resolve(p) for p in operation.get("parameters", [])]
    overridden = {(p.get("in"), p.get("name")) for p in own}
    parameters = [p for p in parameters if (p.get("in"), p.get("name")) not in overridden]
    for location in _LOCATIONS:
        for param in [*parameters, *own]:
            name = param.get("name")
            if param.get("in") != location or not isinstance(name, str) or not name:
                continue
            if location == "header" and name.lower() in NOT_ARGUMENTS:
                continue
            schema = dict(param.get("schema") or {})
            if param.get("description") and "description" not in schema:
                schema["description"] = param["description"]
            add(name, location, name, schema, location == "path" or bool(param.get("required")))
    if body is not None:
        schema, needed = body
        fields = schema.get("properties")
        if schema.get("type") == "object" and isinstance(fields, dict) and fields:
            inner = set(schema.get("required") or ())
            for key, field_schema in fields.items():
                add(key, "body", key, field_schema, needed and key in inner)
        else:
            add("body", "body", "", schema, needed)
    input_schema: JsonObject = {"type": "object", "properties": properties}
    if required:
        input_schema["required"] = required
    output = _output_schema(operation, resolver)
    wrap_output = output is not None and output.get("type") != "object"
    if output is not None and wrap_output:
        output = {"type": "object", "properties": {"result": output}, "required": ["result"]}
    defs = resolver.defs()
    if defs:
        input_schema["$defs"] = defs
        if output is not None:
            output["$defs"] = defs
    owner = f"route {method} {path}"
    try:
        validator = JsonSchema(input_schema, owner=owner, option="inputSchema")
        if output is not None:
            JsonSchema(output, owner=owner, option="outputSchema")
    except (TypeError, ValueError) as exc:
        return Skipped(f"its schema is not usable as a JSON Schema: {exc}")
    definition: JsonObject = {"inputSchema": input_schema}
    summary, text = operation.get("summary"), operation.get("description")
    if isinstance(summary, str) and summary:
        definition["title"] = summary
    if isinstance(text, str) and text.strip():
        definition["description"] = text.strip()
    elif isinstance(summary, str) and summary:
        definition["description"] = summary
    if output is not None:
        definition["outputSchema"] = output
    definition["annotations"] = dict(_ANNOTATIONS[method])
    return Operation(
        method=method,
        path=path,
        operation_id=str(operation.get("operationId") or _default_id(method, path)),
        arguments=tuple(arguments),
        body_required=body is not None and body[1],
        wrap_output=wrap_output,
        definition=definition,
        tags=tuple(str(t) for t in operation.get("tags", ()) if isinstance(t, str)),
        validator=validator,
    )


def _body_schema(
    operation: Mapping[str, Any], resolver: Resolver
) -> tuple[JsonObject, bool] | Skipped | None:
    """The JSON body's schema and whether it is required; None without a body."""
    body = operation.get("requestBody")
    if not isinstance(body, Mapping):
        return None
    body = resolver.resolve(body)
    content = body.get("content") or {}
    for media_type, spec in content.items():
        if _is_json(media_type):
            schema = resolver.resolve((spec or {}).get("schema") or {})
            return (schema if isinstance(schema, dict) else {}), bool(body.get("required"))
    kinds = ", ".join(content) or "none given"
    if any(k in ("multipart/form-data", "application/x-www-form-urlencoded") for k in content):
        return Skipped(f"its body is a form or multipart ({kinds}): only JSON bodies are sent")
    return Skipped(f"its body is not JSON ({kinds}): only JSON bodies are sent")


def _output_schema(operation: Mapping[str, Any], resolver: Resolver) -> JsonObject | None:
    responses = {str(code): spec for code, spec in (operation.get("responses") or {}).items()}
    for code in sorted(responses):
        if not (code.startswith("2") and len(code) == 3):
            continue
        found = responses[code] if isinstance(responses[code], Mapping) else {}
        for media_type, spec in (found.get("content") or {}).items():
            schema = (spec or {}).get("schema") if _is_json(media_type) else None
            if isinstance(schema, Mapping) and schema:
                resolved = resolver.resolve(schema)
                return resolved if isinstance(resolved, dict) else None
        return None
    return None


def _is_json(media_type: str) -> bool:
    kind = media_type.split(";", 1)[0].strip().lower()
    return kind == "application/json" or kind.endswith("+json")


def _unique(name: str, location: Location, taken: Mapping[str, Any]) -> str:
    if name not in taken:
        return name
    candidate = f"{location}_{name}"
    n = 2
    while candidate in taken:
        candidate, n = f"{location}_{name}_{n}", n + 1
    return candidate


def _default_id(method: str, path: str) -> str:
    cleaned = "".join(c if c.isalnum() else "_" for c in path).strip("_")
    return f"{method.lower()}_{cleaned}" if cleaned else method.lower()
