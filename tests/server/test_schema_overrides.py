"""@tool(input_schema=..., output_schema=...) kept verbatim and enforced with a JSON Schema
validator; title, annotations, icons and meta of tools, resources and prompts; the
registration errors a bad option gets."""

from __future__ import annotations

import copy
import re
from typing import Any

import pytest
from pydantic import BaseModel

from mcp_asgi import McpMiddleware, McpServer, TextContent, ToolResult

from ..helpers import JSONSCHEMA_EMPTY, call, mcp_app

DIALECT = "https://json-schema.org/draft/2020-12/schema"

# Root-level composition and conditionals, which no type hint can express: a shipment goes
# either to an address or to a pickup point (numbered from 1); express shipping needs a
# phone number, and only express shipping takes one.
SHIPMENT: dict[str, Any] = {
    "$schema": DIALECT,
    "type": "object",
    "properties": {
        "address": {"type": "string", "minLength": 1},
        "pickup": {"type": "integer"},
        "express": {"type": "boolean"},
        "phone": {"type": "string"},
    },
    "allOf": [{"properties": {"address": {"minLength": 1}}}],
    "anyOf": [{"properties": {"pickup": {"minimum": 1}}}, {"required": ["address"]}],
    "oneOf": [{"required": ["address"]}, {"required": ["pickup"]}],
    "if": {"properties": {"express": {"const": True}}, "required": ["express"]},
    "then": {"required": ["phone"]},
    "else": {"not": {"required": ["phone"]}},
    "additionalProperties": False,
}
RECEIPT: dict[str, Any] = {
    "$schema": DIALECT,
    "type": "object",
    "properties": {"id": {"type": "string", "pattern": "^S[0-9]+$"}, "eta": {"type": "integer"}},
    "required": ["id"],
    "$defs": {"unused": {"type": "null"}},
}
LIST_OF_IDS: dict[str, Any] = {"type": "array", "items": {"type": "integer"}}


class Receipt(BaseModel):
    id: str
    eta: int | None = None


def build() -> McpServer:
    server = McpServer("overrides")

    @server.tool(
        input_schema=SHIPMENT,
        output_schema=RECEIPT,
        title="Ship a parcel",
        annotations={"readOnlyHint": False, "destructiveHint": False, "openWorldHint": True},
        icons=[{"src": "https://example.com/ship.svg", "mimeType": "image/svg+xml"}],
        meta={"com.example/team": "logistics"},
    )
    async def ship(
        address: str | None = None,
        pickup: int | None = None,
        express: bool = False,
        phone: str | None = None,
    ) -> Receipt:
        """Ship a parcel."""
        return Receipt(id="S1" if address != "nowhere" else "lost", eta=2 if express else 5)

    @server.tool(output_schema=LIST_OF_IDS)
    async def ids(how_many: int) -> Any:
        """Structured content of any JSON type: here an array."""
        return list(range(how_many)) if how_many < 3 else ["many"]

    @server.tool(output_schema=RECEIPT)
    async def full(error: bool) -> ToolResult:
        """A ToolResult's structured content meets the output schema, unless an error."""
        if error:
            return ToolResult(["failed"], structured_content={"why": "no"}, is_error=True)
        return ToolResult([TextContent("ok")], structured_content={"id": 7})

    @server.tool(
        input_schema={
            "type": "object",
            "properties": {"city": {"$ref": "https://schemas.example.com/city.json"}},
        }
    )
    async def remote(city: str) -> str:
        return city

    @server.tool(
        input_schema={
            "$schema": "http://json-schema.org/draft-07/schema#",
            "type": "object",
            "properties": {"n": {"type": "integer", "exclusiveMinimum": 0}},
            "definitions": {"x": {"type": "string"}},
        }
    )
    async def draft7(n: int) -> int:
        return n

    @server.resource(
        "res://menu",
        title="Today's menu",
        annotations={"audience": ["user", "assistant"], "priority": 0.2},
        icons=[{"src": "data:image/png;base64,AA==", "sizes": ["16x16"], "theme": "dark"}],
        meta={"com.example/v": 3},
    )
    async def menu() -> str:
        return "soup"

    @server.resource("res://menu/{day}", title="A day's menu", meta={"k": True})
    async def menu_of(day: str) -> str:
        return day

    @server.prompt(title="Plan", icons=[{"src": "https://example.com/p.png"}], meta={"p": 1})
    def plan() -> str:
        return "Plan the week."

    return server


@pytest.fixture(scope="module")
def app() -> McpMiddleware:
    return mcp_app(build())


async def call_tool(app: McpMiddleware, name: str, **arguments: Any) -> dict[str, Any]:
    return (await call(app, "tools/call", {"name": name, "arguments": arguments})).result


async def listed(app: McpMiddleware, method: str, key: str) -> dict[str, dict[str, Any]]:
    items = (await call(app, method)).result[key]
    return {item.get("name") or item["uriTemplate"]: item for item in items}


async def test_schemas_and_extras_are_listed_verbatim(app: McpMiddleware) -> None:
    """tools/list carries the given schemas as given ($schema, root allOf/anyOf/oneOf,
    if/then/else, $defs) and the title, annotations, icons and _meta."""
    ship = (await listed(app, "tools/list", "tools"))["ship"]
    assert ship == {
        "name": "ship",
        "title": "Ship a parcel",
        "description": "Ship a parcel.",
        "inputSchema": SHIPMENT,
        "outputSchema": RECEIPT,
        "annotations": {"readOnlyHint": False, "destructiveHint": False, "openWorldHint": True},
        "icons": [{"src": "https://example.com/ship.svg", "mimeType": "image/svg+xml"}],
        "_meta": {"com.example/team": "logistics"},
    }
    assert list(ship["inputSchema"]) == list(SHIPMENT)  # the keys' order too


async def test_a_given_schema_is_a_copy() -> None:
    """Changing the dict after registration changes nothing."""
    server = McpServer("copy")
    schema = copy.deepcopy(RECEIPT)

    @server.tool(output_schema=schema)
    async def t() -> Any:
        return {"id": "S1"}

    schema["required"] = ["eta"]
    tools = (await call(mcp_app(server), "tools/list")).result["tools"]
    assert tools[0]["outputSchema"]["required"] == ["id"]


@pytest.mark.parametrize(
    ("arguments", "problem"),
    [
        ({"address": "1 Main St"}, None),
        ({"pickup": 12, "express": True, "phone": "555"}, None),
        ({"address": "x", "pickup": 1}, "is valid under each of"),  # oneOf
        ({"express": False}, "is not valid under any of the given schemas"),  # oneOf
        ({"pickup": 0}, "at 'pickup': 0 is less than the minimum of 1"),  # anyOf
        ({"address": "x", "express": True}, "'phone' is a required property"),  # if/then
        ({"address": "x", "phone": "555"}, "should not be valid under"),  # else
        ({"address": ""}, JSONSCHEMA_EMPTY),  # allOf
        ({"address": "x", "colour": "red"}, "Additional properties are not allowed"),
    ],
)
async def test_arguments_are_validated_against_the_given_schema(
    app: McpMiddleware, arguments: dict[str, Any], problem: str | None
) -> None:
    """Arguments must satisfy the input schema, its root keywords included."""
    result = await call_tool(app, "ship", **arguments)
    if problem is None:
        assert "isError" not in result, result
        assert result["structuredContent"]["id"] == "S1"
    else:
        assert result["isError"] is True
        text = result["content"][0]["text"]
        assert text.startswith("Invalid arguments for tool 'ship': ")
        assert problem in text


async def test_draft_07_is_honoured(app: McpMiddleware) -> None:
    """A schema declaring draft-07 is validated as draft-07 (numeric exclusiveMinimum)."""
    assert "isError" not in await call_tool(app, "draft7", n=1)
    refused = await call_tool(app, "draft7", n=0)
    assert "less than or equal to the minimum of 0" in refused["content"][0]["text"]


async def test_a_network_ref_is_never_fetched(app: McpMiddleware) -> None:
    """A $ref to a URL is not dereferenced: the call fails saying so (no request is made:
    the validator has nothing that could fetch it)."""
    result = await call_tool(app, "remote", city="Oslo")
    assert result["isError"] is True
    assert (
        "'https://schemas.example.com/city.json' cannot be resolved"
        in (result["content"][0]["text"])
    )


async def test_structured_content_must_match_the_given_output_schema(app: McpMiddleware) -> None:
    """The return value is structuredContent checked against output_schema (any JSON type)."""
    assert (await call_tool(app, "ids", how_many=2))["structuredContent"] == [0, 1]
    wrong = await call_tool(app, "ids", how_many=3)
    assert wrong["isError"] is True
    assert wrong["content"][0]["text"] == (
        "Tool 'ids' returned an invalid result: its structured content does not match its "
        "output schema: at '0': 'many' is not of type 'integer'"
    )
    lost = await call_tool(app, "ship", address="nowhere")
    assert "'lost' does not match '^S[0-9]+$'" in lost["content"][0]["text"]


async def test_tool_result_structured_content_is_checked_unless_an_error(
    app: McpMiddleware,
) -> None:
    """A ToolResult's structured content must match too; an isError result need not."""
    wrong = await call_tool(app, "full", error=False)
    assert wrong["isError"] is True
    assert "7 is not of type 'string'" in wrong["content"][0]["text"]
    failed = await call_tool(app, "full", error=True)
    assert failed["isError"] is True
    assert failed["structuredContent"] == {"why": "no"}


async def test_resource_and_prompt_extras_are_listed(app: McpMiddleware) -> None:
    """resources/list, resources/templates/list and prompts/list carry title, annotations,
    icons and _meta."""
    menu = (await listed(app, "resources/list", "resources"))["menu"]
    assert menu == {
        "uri": "res://menu",
        "name": "menu",
        "title": "Today's menu",
        "annotations": {"audience": ["user", "assistant"], "priority": 0.2},
        "icons": [{"src": "data:image/png;base64,AA==", "sizes": ["16x16"], "theme": "dark"}],
        "_meta": {"com.example/v": 3},
    }
    template = (await listed(app, "resources/templates/list", "resourceTemplates"))["menu_of"]
    assert (template["title"], template["_meta"]) == ("A day's menu", {"k": True})
    prompt = (await listed(app, "prompts/list", "prompts"))["plan"]
    assert prompt == {
        "name": "plan",
        "title": "Plan",
        "icons": [{"src": "https://example.com/p.png"}],
        "_meta": {"p": 1},
    }


async def _handler(a: int) -> int:
    return a


@pytest.mark.parametrize(
    ("options", "error", "words"),
    [
        ({"input_schema": {"type": "array"}}, ValueError, '"type": "object" at its root'),
        ({"input_schema": {"properties": {"a": {}}}}, ValueError, '"type": "object"'),
        ({"input_schema": {"type": "object", "properties": {"b": {}}}}, ValueError, "'b'"),
        ({"input_schema": {"type": "object", "minProperties": -1}}, ValueError, "not a valid"),
        ({"input_schema": ["type", "object"]}, TypeError, "input_schema must be a dict"),
        ({"output_schema": {"type": "integr"}}, ValueError, "output_schema is not a valid"),
        (
            {"output_schema": {"$schema": "https://example.com/s", "type": "object"}},
            ValueError,
            "dialect",
        ),
        ({"output_schema": {"x": float("nan")}}, ValueError, "output_schema must be JSON"),
        ({"annotations": {"readOnly": True}}, ValueError, "readOnly: Extra inputs"),
        ({"annotations": {"readOnlyHint": "yes"}}, ValueError, "readOnlyHint"),
        ({"icons": [{"mimeType": "image/png"}]}, ValueError, "icons: 0.src: Field required"),
        ({"icons": {"src": "x"}}, TypeError, "icons must be a list"),
        ({"meta": {"bad key": 1}}, ValueError, "'bad key' is not a valid _meta key"),
        ({"meta": [("k", 1)]}, TypeError, "meta must be a dict"),
        ({"title": 5}, TypeError, "title must be a str"),
        (
            {"input_schema": {"type": "object", "properties": {"a": {"x-mcp-header": "A B"}}}},
            ValueError,
            "x-mcp-header",
        ),
    ],
)
def test_bad_tool_options_are_refused(
    options: dict[str, Any], error: type[Exception], words: str
) -> None:
    """A bad option is refused at registration, naming the tool."""
    server = McpServer("bad")
    with pytest.raises(error, match=re.escape(words)) as raised:
        server.tool("calc", **options)(_handler)
    assert str(raised.value).startswith(("tool 'calc': ", "calc: "))


@pytest.mark.parametrize(
    ("register", "words"),
    [
        (lambda s: s.resource("res://x", annotations={"priority": -1}), "resource 'res://x': "),
        (lambda s: s.resource("res://x", icons=[{"src": "a", "theme": "blue"}]), "theme"),
        (lambda s: s.resource("res://x", meta={"": 1, "a b": 2}), "'a b'"),
        (lambda s: s.prompt("p", icons=[{"src": 1}]), "prompt 'p': invalid icons"),
        (lambda s: s.prompt("p", meta={"com.example/": {1, 2}}), "meta must hold JSON"),
    ],
)
def test_bad_resource_and_prompt_options_are_refused(register: Any, words: str) -> None:
    """Resources and prompts check their options the same way."""
    with pytest.raises((TypeError, ValueError), match=re.escape(words)):
        register(McpServer("bad"))(_handler)
