"""McpServer: discovery, tools, resources, prompts, completion, logging and progress."""

from __future__ import annotations

import base64
import datetime
import json
import threading
from typing import Annotated, Any

import anyio
import anyio.lowlevel
import pytest
from pydantic import BaseModel, Field

from mcp_asgi import Context, McpError, McpMiddleware, McpServer

from ..helpers import Wire, call, mcp_app

SERVER_INFO = "io.modelcontextprotocol/serverInfo"
LOOP_THREAD: dict[str, int] = {}


class Forecast(BaseModel):
    city: str
    celsius: float = Field(description="Temperature in degrees Celsius.")


def build_server() -> McpServer:
    server = McpServer(
        "weather", version="2.1.0", instructions="Ask about the weather.", title="Weather"
    )

    @server.tool()
    async def forecast(city: str) -> Forecast:
        """The forecast for a city.

        Args:
            city: the city's name, e.g. Paris.
        """
        return Forecast(city=city, celsius=21.5)

    @server.tool()
    async def add(a: int, b: int = 1) -> int:
        """Add two integers."""
        return a + b

    @server.tool()
    async def shout(text: str) -> str:
        """Upper-case the text."""
        return text.upper()

    @server.tool()
    async def explode(reason: str) -> str:
        """Always fails."""
        raise RuntimeError(f"boom: {reason}")

    @server.tool()
    async def refuse() -> str:
        """Answers with a JSON-RPC error of its own."""
        raise McpError(4001, "quota exhausted", {"retryAfter": 30})

    @server.tool()
    def where() -> dict[str, int]:
        """A sync tool: reports the thread it ran on."""
        return {"thread": threading.get_ident()}

    @server.tool()
    async def liar() -> int:
        """Returns something that is not the int it promises."""
        return "not a number"  # type: ignore[return-value]

    @server.tool()
    async def describe(schema: str, json: bool = False) -> str:
        """Parameters named like BaseModel attributes still work."""
        return f"{schema}:{json}"

    @server.tool()
    async def chatty(ctx: Context) -> str:
        """Logs at every level."""
        for level in ("debug", "info", "warning", "error"):
            await ctx.log(level, {"said": level}, logger="chatty")
        return "done"

    @server.tool()
    async def steps(count: int, ctx: Context) -> str:
        """Reports progress once per step."""
        for step in range(1, count + 1):
            await ctx.report_progress(step, total=count, message=f"step {step}")
            await anyio.lowlevel.checkpoint()
        return f"{count} steps"

    @server.resource("config://app", mime_type="application/json")
    async def config() -> dict[str, str]:
        """The app configuration."""
        return {"mode": "test"}

    @server.resource("files://logo.png", mime_type="image/png")
    def logo() -> bytes:
        """The logo."""
        return b"\x89PNG\r\n"

    @server.resource("notes://{owner}/{note_id}")
    async def note(owner: str, note_id: int) -> str:
        """One note of one owner."""
        return f"note {note_id} of {owner}"

    @server.prompt()
    def review(code: str, language: str = "python") -> str:
        """Review some code.

        Args:
            code: the code to review.
            language: its programming language.
        """
        return f"Review this {language}: {code}"

    @server.prompt()
    async def dialogue(topic: str) -> list[dict[str, str]]:
        """A two-message prompt."""
        return [
            {"role": "user", "content": f"Tell me about {topic}"},
            {"role": "assistant", "content": "Gladly."},
        ]

    @server.completion(prompt="review")
    def complete_language(argument: str, value: str, context: dict[str, str]) -> list[str]:
        return [lang for lang in ("python", "perl", "php", "rust") if lang.startswith(value)]

    @server.completion(resource="notes://{owner}/{note_id}")
    async def complete_owner(argument: str, value: str, context: dict[str, str]) -> list[str]:
        return [f"{argument}:{value}:{context.get('note_id', '-')}"]

    return server


def make_app(server: McpServer | None = None, **settings: Any) -> McpMiddleware:
    return mcp_app(server or build_server(), **settings)


@pytest.fixture
def app() -> McpMiddleware:
    return make_app()


async def result_of(app: McpMiddleware, method: str, params: Any = None, **kw: Any) -> Any:
    reply = await call(app, method, params, **kw)
    assert reply.status == 200, reply.body
    assert "result" in reply.final, reply.final
    return reply.result


async def error_of(app: McpMiddleware, method: str, params: Any = None) -> dict[str, Any]:
    reply = await call(app, method, params)
    assert "error" in reply.final, reply.final
    return reply.error


async def call_tool(app: McpMiddleware, name: str, arguments: Any = None) -> Any:
    return await result_of(app, "tools/call", {"name": name, "arguments": arguments or {}})


async def complete(app: McpMiddleware, ref: Any, argument: Any, **params: Any) -> Any:
    """The result of completion/complete for `argument` of `ref`."""
    return await result_of(app, "completion/complete", {"ref": ref, "argument": argument, **params})


# -- server/discover -----------------------------------------------------------------


async def test_discover_describes_the_server(app: McpMiddleware) -> None:
    """server/discover lists the version, capabilities, instructions and cache hints."""
    result = await result_of(app, "server/discover")
    assert result["supportedVersions"] == ["2026-07-28"]
    assert result["capabilities"] == {
        "logging": {},
        "tools": {"listChanged": True},
        "resources": {"listChanged": True, "subscribe": True},
        "prompts": {"listChanged": True},
        "completions": {},
    }
    assert result["instructions"] == "Ask about the weather."
    assert result["ttlMs"] == 0
    assert result["cacheScope"] == "public"
    assert result["resultType"] == "complete"
    assert result["_meta"][SERVER_INFO] == {
        "name": "weather",
        "version": "2.1.0",
        "title": "Weather",
    }


async def test_discover_advertises_only_what_is_registered() -> None:
    """Capabilities follow registrations: a tools-only server advertises no resources."""
    server = McpServer("tools-only")

    @server.tool()
    async def noop() -> None:
        """Nothing."""

    result = await result_of(make_app(server, list_ttl=60), "server/discover")
    assert result["capabilities"] == {"logging": {}, "tools": {"listChanged": True}}
    assert "instructions" not in result
    assert result["ttlMs"] == 60_000


@pytest.mark.parametrize("method", ["server/discover", "tools/list"])
async def test_cache_scope_setting(method: str) -> None:
    """`cache_scope="private"` marks cacheable results private, for per-user lists."""
    result = await result_of(make_app(cache_scope="private", list_ttl=5), method)
    assert result["cacheScope"] == "private"
    assert result["ttlMs"] == 5_000


# -- tools/list ----------------------------------------------------------------------

TOOL_NAMES = [
    "forecast",
    "add",
    "shout",
    "explode",
    "refuse",
    "where",
    "liar",
    "describe",
    "chatty",
    "steps",
]


async def test_tools_list_is_in_registration_order(app: McpMiddleware) -> None:
    """tools/list is deterministic: registration order, the same on every call."""
    first = await result_of(app, "tools/list")
    second = await result_of(app, "tools/list")
    assert [t["name"] for t in first["tools"]] == TOOL_NAMES
    assert first["tools"] == second["tools"]
    assert "nextCursor" not in first
    assert first["ttlMs"] == 0
    assert first["cacheScope"] == "public"


async def test_tools_list_pages_with_cursors() -> None:
    """With page_size=3 the tools come in pages linked by nextCursor, ending without one."""
    app = make_app(page_size=3)
    names: list[str] = []
    cursor = None
    pages = 0
    while True:
        result = await result_of(app, "tools/list", {"cursor": cursor} if cursor else None)
        assert len(result["tools"]) <= 3
        names += [t["name"] for t in result["tools"]]
        pages += 1
        cursor = result.get("nextCursor")
        if cursor is None:
            break
    assert names == TOOL_NAMES
    assert pages == 4


@pytest.mark.parametrize("cursor", ["not-a-cursor", "OTk5", 3, ""])
async def test_tools_list_rejects_invalid_cursor(app: McpMiddleware, cursor: Any) -> None:
    """An unknown or malformed cursor is -32602."""
    error = await error_of(app, "tools/list", {"cursor": cursor})
    assert error["code"] == -32602


async def test_tool_descriptions_and_schemas(app: McpMiddleware) -> None:
    """Docstrings and type hints become descriptions, inputSchema and outputSchema."""
    tools = {t["name"]: t for t in (await result_of(app, "tools/list"))["tools"]}
    forecast = tools["forecast"]
    assert forecast["description"] == "The forecast for a city."
    assert forecast["inputSchema"]["type"] == "object"
    assert forecast["inputSchema"]["required"] == ["city"]
    assert forecast["inputSchema"]["properties"]["city"] == {
        "type": "string",
        "description": "the city's name, e.g. Paris.",
        "title": "City",
    }
    assert forecast["outputSchema"]["properties"]["celsius"]["type"] == "number"
    assert tools["add"]["outputSchema"] == {
        "type": "object",
        "properties": {"result": {"type": "integer"}},
        "required": ["result"],
    }
    assert "outputSchema" not in tools["shout"]
    assert set(tools["describe"]["inputSchema"]["properties"]) == {"schema", "json"}
    assert "ctx" not in tools["chatty"]["inputSchema"].get("properties", {})


# -- tools/call ----------------------------------------------------------------------


async def test_model_return_is_structured(app: McpMiddleware) -> None:
    """A pydantic model return is structuredContent, mirrored as JSON text."""
    result = await call_tool(app, "forecast", {"city": "Paris"})
    assert result["structuredContent"] == {"city": "Paris", "celsius": 21.5}
    assert json.loads(result["content"][0]["text"]) == result["structuredContent"]
    assert result.get("isError", False) is False


async def test_int_return_is_wrapped(app: McpMiddleware) -> None:
    """A non-object return is wrapped as {"result": value}."""
    result = await call_tool(app, "add", {"a": 2, "b": 3})
    assert result["structuredContent"] == {"result": 5}
    assert result["content"] == [{"type": "text", "text": '{"result": 5}'}]


async def test_str_return_is_text(app: McpMiddleware) -> None:
    """A str return is one text block and no structuredContent."""
    result = await call_tool(app, "shout", {"text": "hi"})
    assert result["content"] == [{"type": "text", "text": "HI"}]
    assert "structuredContent" not in result


async def test_unknown_tool_is_a_jsonrpc_error(app: McpMiddleware) -> None:
    """An unknown tool is JSON-RPC -32602, not an isError result."""
    error = await error_of(app, "tools/call", {"name": "nope", "arguments": {}})
    assert error["code"] == -32602
    assert "nope" in error["message"]


@pytest.mark.parametrize(
    ("arguments", "names"),
    [
        ({"a": "two"}, "a"),
        ({}, "a"),
        ({"a": 1, "c": 2}, "c"),
    ],
    ids=["wrong-type", "missing", "unexpected"],
)
async def test_bad_arguments_are_an_error_result(
    app: McpMiddleware, arguments: dict[str, Any], names: str
) -> None:
    """Arguments failing the input schema are an isError result naming the problem."""
    result = await call_tool(app, "add", arguments)
    assert result["isError"] is True
    text = result["content"][0]["text"]
    assert "Invalid arguments for tool 'add'" in text
    assert f"{names}:" in text


async def test_arguments_not_an_object_is_a_jsonrpc_error(app: McpMiddleware) -> None:
    """`arguments` that is not an object fails the CallToolRequest schema: -32602."""
    error = await error_of(app, "tools/call", {"name": "add", "arguments": [1, 2]})
    assert error["code"] == -32602


async def test_tool_exception_is_an_error_result(
    app: McpMiddleware, caplog: pytest.LogCaptureFixture
) -> None:
    """An exception in a tool is an isError result whose text carries the message."""
    result = await call_tool(app, "explode", {"reason": "disk full"})
    assert result["isError"] is True
    assert "RuntimeError: boom: disk full" in result["content"][0]["text"]
    assert any(r.name == "mcp_asgi.errors" for r in caplog.records)


async def test_mcp_error_in_tool_is_that_jsonrpc_error(app: McpMiddleware) -> None:
    """McpError raised in a tool is answered as exactly that JSON-RPC error."""
    error = await error_of(app, "tools/call", {"name": "refuse", "arguments": {}})
    assert error == {"code": 4001, "message": "quota exhausted", "data": {"retryAfter": 30}}


async def test_return_not_matching_annotation_is_an_error_result(app: McpMiddleware) -> None:
    """A tool returning something other than its annotation gets isError, not bad data."""
    result = await call_tool(app, "liar")
    assert result["isError"] is True
    assert "structuredContent" not in result
    assert "invalid result" in result["content"][0]["text"]


async def test_parameters_may_shadow_model_attributes(app: McpMiddleware) -> None:
    """Parameters named `schema` or `json` are ordinary arguments."""
    result = await call_tool(app, "describe", {"schema": "public", "json": True})
    assert result["content"][0]["text"] == "public:True"


async def test_sync_tool_runs_in_a_worker_thread(app: McpMiddleware) -> None:
    """A plain `def` tool runs off the event loop's thread."""
    result = await call_tool(app, "where")
    assert result["structuredContent"]["thread"] != threading.get_ident()


# -- resources -----------------------------------------------------------------------


async def test_resources_list_and_templates_list(app: McpMiddleware) -> None:
    """Static resources and URI templates are listed separately, with cache hints."""
    resources = await result_of(app, "resources/list")
    assert resources["resources"] == [
        {
            "uri": "config://app",
            "name": "config",
            "description": "The app configuration.",
            "mimeType": "application/json",
        },
        {
            "uri": "files://logo.png",
            "name": "logo",
            "description": "The logo.",
            "mimeType": "image/png",
        },
    ]
    templates = await result_of(app, "resources/templates/list")
    assert templates["resourceTemplates"] == [
        {
            "uriTemplate": "notes://{owner}/{note_id}",
            "name": "note",
            "description": "One note of one owner.",
        }
    ]
    for result in (resources, templates):
        assert result["ttlMs"] == 0
        assert result["cacheScope"] == "public"


async def test_read_static_resource(app: McpMiddleware) -> None:
    """A static resource reads as text with its MIME type and cache hints."""
    result = await result_of(app, "resources/read", {"uri": "config://app"})
    assert result["contents"] == [
        {"uri": "config://app", "mimeType": "application/json", "text": '{"mode": "test"}'}
    ]
    assert result["ttlMs"] == 0
    assert result["cacheScope"] == "public"


async def test_read_template_resource(app: McpMiddleware) -> None:
    """A URI matching a template calls its handler with the variables, validated."""
    result = await result_of(app, "resources/read", {"uri": "notes://ada/42"})
    assert result["contents"] == [{"uri": "notes://ada/42", "text": "note 42 of ada"}]


async def test_bytes_resource_is_a_blob(app: McpMiddleware) -> None:
    """bytes are returned base64-encoded as `blob`."""
    result = await result_of(app, "resources/read", {"uri": "files://logo.png"})
    content = result["contents"][0]
    assert base64.b64decode(content["blob"]) == b"\x89PNG\r\n"
    assert content["mimeType"] == "image/png"
    assert "text" not in content


@pytest.mark.parametrize("uri", ["config://other", "notes://ada", "notes://ada/not-a-number"])
async def test_unknown_resource_is_invalid_params(app: McpMiddleware, uri: str) -> None:
    """An unknown URI (or template variables that do not validate) is -32602."""
    error = await error_of(app, "resources/read", {"uri": uri})
    assert error["code"] == -32602


# -- prompts -------------------------------------------------------------------------


async def test_prompts_list(app: McpMiddleware) -> None:
    """Prompts list their arguments with required flags and descriptions."""
    result = await result_of(app, "prompts/list")
    assert result["prompts"][0] == {
        "name": "review",
        "description": "Review some code.",
        "arguments": [
            {"name": "code", "required": True, "description": "the code to review."},
            {"name": "language", "required": False, "description": "its programming language."},
        ],
    }
    assert [p["name"] for p in result["prompts"]] == ["review", "dialogue"]
    assert result["ttlMs"] == 0
    assert result["cacheScope"] == "public"


async def test_prompts_get(app: McpMiddleware) -> None:
    """prompts/get renders the prompt's messages."""
    result = await result_of(app, "prompts/get", {"name": "review", "arguments": {"code": "x=1"}})
    assert result["messages"] == [
        {"role": "user", "content": {"type": "text", "text": "Review this python: x=1"}}
    ]
    result = await result_of(app, "prompts/get", {"name": "dialogue", "arguments": {"topic": "AI"}})
    assert [m["role"] for m in result["messages"]] == ["user", "assistant"]


@pytest.mark.parametrize(
    "params",
    [
        {"name": "review", "arguments": {}},
        {"name": "review", "arguments": {"code": "x", "extra": "y"}},
        {"name": "nope", "arguments": {}},
    ],
    ids=["missing-required", "unexpected", "unknown"],
)
async def test_prompts_get_errors(app: McpMiddleware, params: dict[str, Any]) -> None:
    """A missing required argument or an unknown prompt is -32602."""
    error = await error_of(app, "prompts/get", params)
    assert error["code"] == -32602


# -- completion ----------------------------------------------------------------------


async def test_completion_for_prompt_argument(app: McpMiddleware) -> None:
    """completion/complete calls the registered completer (sync ones in a thread)."""
    review = {"type": "ref/prompt", "name": "review"}
    result = await complete(app, review, {"name": "language", "value": "p"})
    assert result["completion"] == {
        "values": ["python", "perl", "php"],
        "total": 3,
        "hasMore": False,
    }


async def test_completion_for_template_with_context(app: McpMiddleware) -> None:
    """A resource template's completer receives the other arguments as context."""
    result = await complete(
        app,
        {"type": "ref/resource", "uri": "notes://{owner}/{note_id}"},
        {"name": "owner", "value": "a"},
        context={"arguments": {"note_id": "7"}},
    )
    assert result["completion"]["values"] == ["owner:a:7"]


async def test_completion_without_completer_is_empty(app: McpMiddleware) -> None:
    """A known prompt without a completer completes to nothing."""
    dialogue = {"type": "ref/prompt", "name": "dialogue"}
    result = await complete(app, dialogue, {"name": "topic", "value": ""})
    assert result["completion"] == {"values": [], "total": 0, "hasMore": False}


@pytest.mark.parametrize(
    "ref",
    [
        {"type": "ref/prompt", "name": "nope"},
        {"type": "ref/resource", "uri": "x://y"},
        {"type": "ref/tool"},
    ],
)
async def test_completion_unknown_ref_is_invalid_params(app: McpMiddleware, ref: Any) -> None:
    """A reference to an unknown prompt or resource is -32602."""
    params = {"ref": ref, "argument": {"name": "a", "value": ""}}
    assert (await error_of(app, "completion/complete", params))["code"] == -32602


# -- every result --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "params"),
    [
        ("server/discover", None),
        ("tools/list", None),
        ("tools/call", {"name": "shout", "arguments": {"text": "a"}}),
        ("tools/call", {"name": "explode", "arguments": {"reason": "x"}}),
        ("resources/list", None),
        ("resources/templates/list", None),
        ("resources/read", {"uri": "config://app"}),
        ("prompts/list", None),
        ("prompts/get", {"name": "review", "arguments": {"code": "x"}}),
        (
            "completion/complete",
            {
                "ref": {"type": "ref/prompt", "name": "review"},
                "argument": {"name": "language", "value": ""},
            },
        ),
    ],
)
async def test_every_result_has_result_type_and_server_info(
    app: McpMiddleware, method: str, params: Any
) -> None:
    """Every result carries resultType and _meta serverInfo."""
    result = await result_of(app, method, params)
    assert result["resultType"] == "complete"
    assert result["_meta"][SERVER_INFO]["name"] == "weather"


# -- logging and progress ------------------------------------------------------------


def notifications(reply: Wire, method: str) -> list[dict[str, Any]]:
    return [m["params"] for m in reply.messages if m.get("method") == method]


async def test_no_log_messages_without_log_level(app: McpMiddleware) -> None:
    """Without _meta logLevel no notifications/message is sent (and the reply is JSON)."""
    reply = await call(app, "tools/call", {"name": "chatty", "arguments": {}})
    assert reply.content_type == "application/json"
    assert notifications(reply, "notifications/message") == []
    assert reply.result["content"][0]["text"] == "done"


@pytest.mark.parametrize(
    ("level", "expected"),
    [
        ("debug", ["debug", "info", "warning", "error"]),
        ("warning", ["warning", "error"]),
        ("emergency", []),
    ],
)
async def test_log_messages_at_or_above_the_level(
    app: McpMiddleware, level: str, expected: list[str]
) -> None:
    """With a logLevel, only messages at or above it are sent, before the result."""
    reply = await call(app, "tools/call", {"name": "chatty", "arguments": {}}, log_level=level)
    messages = notifications(reply, "notifications/message")
    assert [m["level"] for m in messages] == expected
    for m in messages:
        assert m["logger"] == "chatty"
        assert m["data"] == {"said": m["level"]}
    assert reply.final["result"]["content"][0]["text"] == "done"


async def test_progress_is_streamed_as_sse(app: McpMiddleware) -> None:
    """With a progressToken, progress arrives as SSE events ahead of the final result."""
    reply = await call(
        app, "tools/call", {"name": "steps", "arguments": {"count": 3}}, progress=True
    )
    assert reply.content_type == "text/event-stream"
    assert reply.headers["x-accel-buffering"] == "no"
    assert "no-cache" in reply.headers["cache-control"]
    progress = notifications(reply, "notifications/progress")
    assert progress == [
        {"progressToken": "p-7", "progress": step, "total": 3, "message": f"step {step}"}
        for step in (1, 2, 3)
    ]
    assert reply.final["id"] == 7
    assert reply.final["result"]["content"][0]["text"] == "3 steps"
    assert "id" not in reply.messages[0]


async def test_no_progress_without_token(app: McpMiddleware) -> None:
    """Without a progressToken no progress is sent and the reply is one JSON body."""
    reply = await call(app, "tools/call", {"name": "steps", "arguments": {"count": 3}})
    assert reply.content_type == "application/json"
    assert len(reply.messages) == 1


async def test_json_mode_drops_progress() -> None:
    """response_mode=json answers with one JSON body; notifications are dropped."""
    app = make_app(response_mode="json")
    reply = await call(
        app, "tools/call", {"name": "steps", "arguments": {"count": 2}}, progress=True
    )
    assert reply.content_type == "application/json"
    assert reply.result["content"][0]["text"] == "2 steps"


# -- replies that plain json cannot encode ------------------------------------------


def awkward_server() -> McpServer:
    server = McpServer("awkward")

    @server.tool()
    async def dated(ctx: Context) -> str:
        """Fails with error data that is not plain JSON."""
        await ctx.report_progress(1)
        raise McpError(4002, "stale", {"since": datetime.datetime(2020, 1, 2, 3, 4, 5)})

    @server.resource("odd://thing")
    async def thing() -> Any:
        """Something JSON cannot represent at all."""
        return {"nan": float("nan")}

    @server.prompt()
    def binary() -> list[dict[str, Any]]:
        """A prompt whose content carries an unencodable object."""
        return [{"role": "user", "content": {"type": "text", "text": object()}}]

    return server


@pytest.mark.parametrize("progress", [False, True], ids=["json", "sse"])
async def test_error_data_is_encoded_like_pydantic(progress: bool) -> None:
    """McpError data with datetimes reaches the client as JSON, in JSON and SSE replies."""
    app = make_app(awkward_server())
    reply = await call(app, "tools/call", {"name": "dated", "arguments": {}}, progress=progress)
    assert reply.status == 200
    assert reply.error == {
        "code": 4002,
        "message": "stale",
        "data": {"since": "2020-01-02T03:04:05"},
    }


async def test_nan_becomes_null() -> None:
    """NaN never reaches the wire (it is not JSON): it is sent as null."""
    reply = await call(make_app(awkward_server()), "resources/read", {"uri": "odd://thing"})
    assert json.loads(reply.result["contents"][0]["text"]) == {"nan": None}


async def test_unencodable_result_is_an_internal_error() -> None:
    """A result that cannot be encoded at all is answered with -32603, never a bare 500."""
    reply = await call(make_app(awkward_server()), "prompts/get", {"name": "binary"})
    assert reply.status == 200
    assert reply.final["id"] == 7
    assert reply.error["code"] == -32603


# -- registration errors -------------------------------------------------------------


def test_duplicate_names_are_refused() -> None:
    """Registering a second tool, prompt or resource under a taken name is a ValueError."""
    server = build_server()
    with pytest.raises(ValueError, match="already registered"):
        server.tool(name="add")(lambda: 1)
    with pytest.raises(ValueError, match="already registered"):
        server.prompt(name="review")(lambda: "x")
    with pytest.raises(ValueError, match="already registered"):
        server.resource("config://app")(lambda: "x")


class Inner(BaseModel):
    zone: Annotated[str, Field(json_schema_extra={"x-mcp-header": "Zone"})]


def _header(name: str) -> Any:
    return Field(json_schema_extra={"x-mcp-header": name})


async def _bad_token(region: Annotated[str, _header("Bad Header")]) -> None: ...
async def _bad_type(ratio: Annotated[float, _header("Ratio")]) -> None: ...
async def _nullable(region: Annotated[str | None, _header("Region")] = None) -> None: ...
async def _duplicate(
    a: Annotated[str, _header("Region")], b: Annotated[str, _header("region")]
) -> None: ...
async def _nested(inner: Inner) -> None: ...
async def _in_list(tags: list[Annotated[str, _header("Tag")]]) -> None: ...


@pytest.mark.parametrize(
    "fn",
    [_bad_token, _bad_type, _nullable, _duplicate, _nested, _in_list],
    ids=lambda f: f.__name__,
)
def test_bad_x_mcp_header_is_refused(fn: Any) -> None:
    """An x-mcp-header clients would reject makes registration fail with ValueError."""
    with pytest.raises(ValueError, match="x-mcp-header"):
        McpServer("s").tool()(fn)


def test_template_variables_must_match_parameters() -> None:
    """A URI template whose variables differ from the handler's parameters is a TypeError."""
    server = McpServer("s")
    with pytest.raises(TypeError, match="template variables"):
        server.resource("notes://{id}")(lambda note_id: "x")
    with pytest.raises(TypeError, match="template variables"):
        server.resource("notes://static")(lambda note_id: "x")


def test_other_registration_errors() -> None:
    """Unservable handlers and bad options fail at registration, not at call time."""
    server = McpServer("s")

    def star(*args: int) -> None: ...
    def positional(a: int, /) -> None: ...

    with pytest.raises(TypeError, match=r"\*args"):
        server.tool()(star)
    with pytest.raises(TypeError, match="positional-only"):
        server.tool()(positional)
    with pytest.raises(ValueError, match="scheme"):
        server.resource("no-scheme")
    with pytest.raises(TypeError, match="needs a URI"):
        server.resource(star)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="positive"):
        server.tool(timeout=0)
    with pytest.raises(ValueError, match="exactly one"):
        server.completion()
    with pytest.raises(ValueError, match="must not be empty"):
        McpServer("")


async def test_decorators_work_without_parentheses() -> None:
    """`@server.tool` and `@server.prompt` register with default names."""
    server = McpServer("bare")

    @server.tool
    async def ping_me() -> str:
        """Pong."""
        return "pong"

    @server.prompt
    def hello() -> str:
        """Say hello."""
        return "hello"

    app = make_app(server)
    assert (await call_tool(app, "ping_me"))["content"][0]["text"] == "pong"
    prompts = await result_of(app, "prompts/list")
    assert [p["name"] for p in prompts["prompts"]] == ["hello"]
