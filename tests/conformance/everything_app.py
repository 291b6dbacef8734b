"""The fixture server the official MCP conformance suite runs against: every tool, resource
and prompt its server scenarios call, written with mcp_asgi's public API.

Names and behaviours follow the python-sdk's `examples/servers/everything-server` and the
scenarios' own descriptions (`@modelcontextprotocol/conformance`, `src/scenarios/server`):
the suite calls fixtures by these exact names and checks their exact results.

`app()` builds a fresh server behind `McpMiddleware` (both eras on one endpoint).
"""

from __future__ import annotations

import base64
import json
from typing import Annotated, Any

import anyio
from pydantic import BaseModel, Field
from starlette.applications import Starlette

from mcp_asgi import (
    Audio,
    Context,
    EmbeddedResource,
    Image,
    McpError,
    McpMiddleware,
    McpServer,
    TextContent,
    TextResource,
    ToolResult,
)

# A 1x1 PNG and a tiny WAV, as in the reference fixture.
TEST_IMAGE_BASE64 = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIA"
    "X8jx0gAAAABJRU5ErkJggg=="
)
TEST_AUDIO_BASE64 = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA="

NAME_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"name": {"type": "string"}},
    "required": ["name"],
}
CONFIRM_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"ok": {"type": "boolean"}},
    "required": ["ok"],
}
COLOR_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"color": {"type": "string"}},
    "required": ["color"],
}
CONTEXT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"context": {"type": "string"}},
    "required": ["context"],
}

# The inputSchema the json-schema-2020-12 scenario expects to find, keyword for keyword.
JSON_SCHEMA_2020_12_INPUT_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {
        "address": {
            "$anchor": "addressDef",
            "type": "object",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
        }
    },
    "properties": {
        "name": {"type": "string"},
        "address": {"$ref": "#/$defs/address"},
        "contactMethod": {"type": "string", "enum": ["phone", "email"]},
        "phone": {"type": "string"},
        "email": {"type": "string"},
    },
    "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
    "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
    "then": {"required": ["phone"]},
    "else": {"required": ["email"]},
    "additionalProperties": False,
}


PNG = base64.b64decode(TEST_IMAGE_BASE64)
WAV = base64.b64decode(TEST_AUDIO_BASE64)


def _embedded(uri: str, text: str, mime_type: str = "text/plain") -> EmbeddedResource:
    return EmbeddedResource(TextResource(text, uri=uri, mime_type=mime_type))


class UserResponse(BaseModel):
    username: str = Field(description="User's response")
    email: str = Field(description="User's email address")


class Sep1034Defaults(BaseModel):
    """Every primitive type with a default (SEP-1034)."""

    name: str = Field(default="John Doe", description="User name")
    age: int = Field(default=30, description="User age")
    score: float = Field(default=95.5, description="User score")
    status: str = Field(
        default="active",
        description="User status",
        json_schema_extra={"enum": ["active", "inactive", "pending"]},
    )
    verified: bool = Field(default=True, description="Verification status")


SEP1330_ENUMS_SCHEMA: dict[str, Any] = {
    # The values the scenario's description asks for: its client answers with them, and an
    # answer outside the schema is refused (-32602).
    "type": "object",
    "properties": {
        "untitledSingle": {
            "type": "string",
            "description": "Simple enum without titles",
            "enum": ["option1", "option2", "option3"],
        },
        "titledSingle": {
            "type": "string",
            "description": "Enum with titled options (oneOf)",
            "oneOf": [
                {"const": "value1", "title": "First Option"},
                {"const": "value2", "title": "Second Option"},
                {"const": "value3", "title": "Third Option"},
            ],
        },
        "untitledMulti": {
            "type": "array",
            "description": "Multi-select without titles",
            "items": {"type": "string", "enum": ["option1", "option2", "option3"]},
        },
        "titledMulti": {
            "type": "array",
            "description": "Multi-select with titled options",
            "items": {
                "anyOf": [
                    {"const": "value1", "title": "First Choice"},
                    {"const": "value2", "title": "Second Choice"},
                    {"const": "value3", "title": "Third Choice"},
                ]
            },
        },
        "legacyEnum": {
            "type": "string",
            "description": "Legacy enum with enumNames",
            "enum": ["opt1", "opt2", "opt3"],
            "enumNames": ["Option One", "Option Two", "Option Three"],
        },
    },
    "required": ["untitledSingle", "titledSingle", "untitledMulti", "titledMulti", "legacyEnum"],
}


def build_server() -> McpServer:
    """The everything server: a fresh registry on each call."""
    server = McpServer("mcp-conformance-test-server", version="0.1.0")
    _tools(server)
    _input_tools(server)
    _task_tools(server)
    _resources(server)
    _prompts(server)
    return server


def app() -> McpMiddleware:
    """The fixture server behind the middleware (MCP at /mcp, 2026-07-28 and 2025-era)."""
    return McpMiddleware(Starlette(), server=build_server())


# -- tools ---------------------------------------------------------------------------


def _tools(server: McpServer) -> None:
    @server.tool()
    def test_simple_text() -> str:
        """Tests simple text content response"""
        return "This is a simple text response for testing."

    @server.tool()
    def test_image_content() -> Image:
        """Tests image content response"""
        return Image(PNG, "image/png")

    @server.tool()
    def test_audio_content() -> Audio:
        """Tests audio content response"""
        return Audio(WAV, "audio/wav")

    @server.tool()
    def test_embedded_resource() -> EmbeddedResource:
        """Tests embedded resource content response"""
        return _embedded("test://embedded-resource", "This is an embedded resource content.")

    @server.tool()
    def test_multiple_content_types() -> list[TextContent | Image | EmbeddedResource]:
        """Tests response with multiple content types (text, image, resource)"""
        return [
            TextContent("Multiple content types test:"),
            Image(PNG, "image/png"),
            _embedded(
                "test://mixed-content-resource",
                '{"test": "data", "value": 123}',
                "application/json",
            ),
        ]

    @server.tool()
    async def test_tool_with_logging(ctx: Context) -> str:
        """Tests tool that emits log messages during execution"""
        await ctx.log("info", "Tool execution started")
        await anyio.sleep(0.05)
        await ctx.log("info", "Tool processing data")
        await anyio.sleep(0.05)
        await ctx.log("info", "Tool execution completed")
        return "Tool with logging executed successfully"

    @server.tool()
    async def test_logging_tool(ctx: Context) -> str:
        """Logs at info: nothing may be sent unless the request set a log level"""
        await ctx.log("info", "test_logging_tool ran")
        return "logged"

    @server.tool()
    async def test_reconnection(ctx: Context) -> str:
        """Tests SSE polling: closes the stream mid-call, the client resumes (SEP-1699)"""
        await ctx.close_stream()  # a 2025-era SSE reply: the client polls with Last-Event-ID
        await anyio.sleep(0.2)
        return "Reconnection test completed"

    @server.tool()
    async def test_tool_with_progress(ctx: Context) -> str:
        """Tests tool that reports progress notifications"""
        await ctx.report_progress(0, 100, "Completed step 0 of 100")
        await anyio.sleep(0.05)
        await ctx.report_progress(50, 100, "Completed step 50 of 100")
        await anyio.sleep(0.05)
        await ctx.report_progress(100, 100, "Completed step 100 of 100")
        return "progress reported"

    @server.tool()
    def test_error_handling() -> str:
        """Tests error response handling"""
        raise RuntimeError("This tool intentionally returns an error for testing")

    @server.tool()
    async def test_sampling(prompt: str, ctx: Context) -> str:
        """Tests server-initiated sampling (LLM completion request)"""
        answer = await ctx.sample(prompt, max_tokens=100)
        content = answer.get("content")
        text = content.get("text") if isinstance(content, dict) else None
        return f"LLM response: {text if text is not None else 'No response'}"

    @server.tool()
    async def test_elicitation(message: str, ctx: Context) -> str:
        """Tests server-initiated elicitation (user input request)"""
        answer = await ctx.elicit(message, UserResponse)
        content = answer.content.model_dump_json() if answer.content is not None else "{}"
        return f"User response: action={answer.action}, content={content}"

    @server.tool()
    async def test_elicitation_sep1034_defaults(ctx: Context) -> str:
        """Tests elicitation with default values for all primitive types (SEP-1034)"""
        answer = await ctx.elicit("Please provide user information", Sep1034Defaults)
        content = answer.content.model_dump_json() if answer.content is not None else "{}"
        return f"Elicitation result: action={answer.action}, content={content}"

    @server.tool()
    async def test_elicitation_sep1330_enums(ctx: Context) -> str:
        """Tests elicitation with enum schema variations per SEP-1330"""
        answer = await ctx.elicit(
            "Please select values using different enum schema types", SEP1330_ENUMS_SCHEMA
        )
        content = json.dumps(answer.content) if answer.content is not None else "{}"
        return f"Elicitation completed: action={answer.action}, content={content}"

    @server.tool()
    def test_x_mcp_header(
        region: Annotated[
            str,
            Field(
                description="Mirrored into the Mcp-Param-Region header",
                json_schema_extra={"x-mcp-header": "Region"},
            ),
        ] = "<none>",
    ) -> str:
        """Tests SEP-2243 Mcp-Param-* server-side validation"""
        return f"region={region}"

    @server.tool(name="json_schema_2020_12_tool", input_schema=JSON_SCHEMA_2020_12_INPUT_SCHEMA)
    def json_schema_2020_12_tool(
        name: str | None = None,
        address: dict[str, Any] | None = None,
        contactMethod: str | None = None,  # noqa: N803 - the schema's property name
        phone: str | None = None,
        email: str | None = None,
    ) -> str:
        """Tests JSON Schema 2020-12 keyword preservation in tools/list"""
        return "json_schema_2020_12_tool"

    async def announce_tool_change() -> str:
        """Mutates the tool list and announces it to subscriptions/listen streams"""

        def dynamic() -> str:
            """A tool registered and removed by test_trigger_tool_change."""
            return "dynamic"

        server.tool(name="test_dynamic_tool")(dynamic)
        server.remove_tool("test_dynamic_tool")
        return "tool list changed"

    async def announce_prompt_change() -> str:
        """Mutates the prompt list and announces it to subscriptions/listen streams"""

        def dynamic() -> str:
            """A prompt registered and removed by test_trigger_prompt_change."""
            return "dynamic"

        server.prompt(name="test_dynamic_prompt")(dynamic)
        server.remove_prompt("test_dynamic_prompt")
        return "prompt list changed"

    server.tool(name="test_trigger_tool_change")(announce_tool_change)
    server.tool(name="test_trigger_prompt_change")(announce_prompt_change)


def _input_tools(server: McpServer) -> None:
    """Tools that ask the client for input (multi round-trip requests, SEP-2322)."""

    @server.tool()
    async def test_missing_capability(ctx: Context) -> str:
        """Needs the client's sampling capability: -32021 (HTTP 400) without it"""
        await ctx.sample("Say hello", max_tokens=10)
        return "Client declared sampling capability; proceeding."

    @server.tool()
    async def test_streaming_elicitation(ctx: Context) -> str:
        """Asks for the user's name: the request stream carries an InputRequiredResult,
        never a JSON-RPC request"""
        answer = await ctx.elicit("What is your name?", NAME_SCHEMA, key="user_name")
        return f"Hello, {(answer.content or {}).get('name', 'stranger')}!"

    @server.tool()
    async def test_input_required_result_elicitation(ctx: Context) -> str:
        """Tests InputRequiredResult with a single elicitation request"""
        answer = await ctx.elicit("What is your name?", NAME_SCHEMA, key="user_name")
        return f"Hello, {(answer.content or {}).get('name', 'stranger')}!"

    @server.tool()
    async def test_input_required_result_sampling(ctx: Context) -> str:
        """Tests InputRequiredResult with a single sampling request"""
        answer = await ctx.sample(
            "What is the capital of France?", max_tokens=100, key="capital_question"
        )
        content = answer.get("content")
        text = content.get("text") if isinstance(content, dict) else "?"
        return f"Model said: {text}"

    @server.tool()
    async def test_input_required_result_list_roots(ctx: Context) -> str:
        """Tests InputRequiredResult with a single roots/list request"""
        roots = await ctx.list_roots(key="client_roots")
        uris = ", ".join(str(root.get("uri")) for root in roots)
        return f"Client exposed {len(roots)} root(s): {uris}"

    @server.tool()
    async def test_input_required_result_request_state(ctx: Context) -> str:
        """Tests requestState round-tripping: the answer arrives only with the sealed state"""
        await ctx.elicit("Please confirm", CONFIRM_SCHEMA, key="confirm")
        return "state-ok: confirmation received"

    @server.tool()
    async def test_input_required_result_multiple_inputs(ctx: Context) -> str:
        """Tests InputRequiredResult carrying elicitation, sampling and roots together"""
        await ctx.gather(
            ctx.elicit("What is your name?", NAME_SCHEMA, key="user_name"),
            ctx.sample("Generate a greeting", max_tokens=50, key="greeting"),
            ctx.list_roots(key="client_roots"),
        )
        return "All inputs received."

    @server.tool()
    async def test_input_required_result_multi_round(ctx: Context) -> str:
        """Tests a three-round flow: one question per round, the state evolving"""
        step1 = await ctx.elicit("Step 1: What is your name?", NAME_SCHEMA, key="step1")
        step2 = await ctx.elicit("Step 2: What is your favorite color?", COLOR_SCHEMA, key="step2")
        name = (step1.content or {}).get("name")
        color = (step2.content or {}).get("color")
        return f"{name} likes {color}."

    @server.tool()
    async def test_input_required_result_tampered_state(ctx: Context) -> str:
        """The sealed requestState is checked before the handler runs: a tampered one is
        rejected with -32602"""
        await ctx.elicit("Please confirm", CONFIRM_SCHEMA, key="confirm")
        return "state-ok: confirmation received"

    @server.tool()
    async def test_input_required_result_capabilities(ctx: Context) -> str:
        """Asks only for what the client declared it supports"""
        declared = ctx.client_capabilities
        questions: list[Any] = []
        if "sampling" in declared:
            questions.append(ctx.sample("Say hello", max_tokens=50, key="sample"))
        if "elicitation" in declared:
            questions.append(ctx.elicit("What is your name?", NAME_SCHEMA, key="ask"))
        if "roots" in declared:
            questions.append(ctx.list_roots(key="roots"))
        await ctx.gather(*questions)
        return "capability-gated inputs received."


# -- tasks (io.modelcontextprotocol/tasks) -------------------------------------------

CONFIRM_DELETE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"confirm": {"type": "boolean"}},
    "required": ["confirm"],
}


def _task_tools(server: McpServer) -> None:
    """The Tasks extension's fixtures (the suite's tasks-* scenarios)."""

    @server.tool()
    def greet(name: str) -> str:
        """Sync only: greets by name"""
        return f"Hello, {name}!"

    @server.tool(task="optional")
    async def slow_compute(seconds: float, label: str = "") -> str:
        """Sleeps `seconds`, then says so; a task when it outlasts the result window"""
        await anyio.sleep(seconds)
        return f"computed {label} after {seconds:g}s"

    @server.tool(task="required")
    async def failing_job() -> ToolResult:
        """Always a task; reports a tool error after about a second"""
        await anyio.sleep(1)
        return ToolResult(["the job failed"], is_error=True)

    @server.tool(task="optional")
    async def protocol_error_job() -> str:
        """A task that ends with a JSON-RPC error (status failed)"""
        await anyio.sleep(0.5)
        raise McpError(-32603, "the job crashed")

    @server.tool(task="optional")
    async def confirm_delete(filename: str, ctx: Context) -> str:
        """A task that asks the user to confirm, then deletes"""
        await ctx.start_task()
        answer = await ctx.elicit(f"Delete {filename}?", CONFIRM_DELETE_SCHEMA)
        confirmed = answer.accepted and (answer.content or {}).get("confirm") is True
        return f"{filename} deleted" if confirmed else f"{filename} kept"

    @server.tool(task="optional")
    async def multi_input(ctx: Context) -> str:
        """A task asking two questions at once"""
        await ctx.start_task()
        name, confirm = await ctx.gather(
            ctx.elicit("Your name?", NAME_SCHEMA), ctx.elicit("Go on?", CONFIRM_DELETE_SCHEMA)
        )
        return f"{(name.content or {}).get('name')}: {confirm.action}"

    @server.tool(task="required")
    async def test_tool_with_task(ctx: Context) -> str:
        """An MRTR round for the user's name, then a task that greets them"""
        answer = await ctx.elicit("What is your name?", NAME_SCHEMA, key="user_name")
        await ctx.start_task()
        await anyio.sleep(0.2)
        return f"Hello, {(answer.content or {}).get('name', 'stranger')}, from a task!"


# -- resources -----------------------------------------------------------------------


def _resources(server: McpServer) -> None:
    @server.resource("test://static-text", mime_type="text/plain")
    def static_text_resource() -> str:
        """A static text resource for testing"""
        return "This is the content of the static text resource."

    @server.resource("test://static-binary", mime_type="image/png")
    def static_binary_resource() -> bytes:
        """A static binary resource (image) for testing"""
        return base64.b64decode(TEST_IMAGE_BASE64)

    @server.resource("test://template/{id}/data", mime_type="application/json")
    def template_resource(id: str) -> str:
        """A resource template with parameter substitution"""
        return json.dumps({"id": id, "templateTest": True, "data": f"Data for ID: {id}"})

    @server.resource("test://watched-resource", mime_type="text/plain")
    def watched_resource() -> str:
        """A resource that can be subscribed to for updates"""
        return "Watched resource content"


# -- prompts -------------------------------------------------------------------------


def _prompts(server: McpServer) -> None:
    @server.prompt()
    def test_simple_prompt() -> str:
        """A simple prompt without arguments"""
        return "This is a simple prompt for testing."

    @server.prompt()
    def test_prompt_with_arguments(arg1: str, arg2: str) -> str:
        """A prompt with required arguments

        Args:
            arg1: First test argument
            arg2: Second test argument
        """
        return f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'"

    @server.prompt()
    def test_prompt_with_embedded_resource(resourceUri: str) -> list[EmbeddedResource | str]:  # noqa: N803
        """A prompt that includes an embedded resource

        Args:
            resourceUri: URI of the resource to embed
        """
        return [
            _embedded(resourceUri, "Embedded resource content for testing."),
            "Please process the embedded resource above.",
        ]

    @server.prompt()
    def test_prompt_with_image() -> list[Image | str]:
        """A prompt that includes image content"""
        return [Image(PNG, "image/png"), "Please analyze the image above."]

    @server.prompt()
    async def test_input_required_result_prompt(ctx: Context) -> str:
        """Tests InputRequiredResult from prompts/get (a non-tool request)"""
        answer = await ctx.elicit(
            "What context should the prompt use?", CONTEXT_SCHEMA, key="user_context"
        )
        text = (answer.content or {}).get("context", "?")
        return f"Use the following context: {text}"

    @server.completion(prompt="test_prompt_with_arguments")
    def complete_prompt_argument(argument: str, value: str, context: dict[str, str]) -> list[str]:
        """Suggestions for the prompt's arguments: none (what the suite accepts)"""
        return []
