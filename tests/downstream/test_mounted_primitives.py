"""A gateway mounts a downstream's resources, resource templates and prompts beside its
tools (`DownstreamResources`, `DownstreamPrompts`): listed under their URIs and names (as
they are, or prefixed), read and got through the gateway, collisions refused at start,
the downstream's list changes relayed to listening clients, and a client dropping a read
or a get cancels the downstream request."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path

import anyio
import pytest

from mcp_asgi import McpServer
from mcp_asgi.downstream import Downstream, DownstreamPrompts, DownstreamResources, DownstreamTools
from mcp_asgi.testing import McpTestClient, serve

from ..helpers import eventually, mcp_app
from ..servers import ROOT
from ..stdio.pipe import probe_lines
from . import everything
from .everything import needs_everything

DOCUMENT = "demo://resource/static/document/features.md"
TEXT_TEMPLATE = "demo://resource/dynamic/text/{resourceId}"


def mounted(downstream: Downstream) -> McpServer:
    """A gateway with a resource of its own, the downstream's resources as they are, its
    dynamic ones again under `ev+`, and its prompts."""
    server = McpServer("gateway")

    @server.resource("local://note")
    async def note() -> str:
        """Ours."""
        return "ours"

    server.add_source(DownstreamResources(downstream))
    server.add_source(DownstreamResources(downstream, prefix="ev+", include=["demo://*/dynamic/*"]))
    server.add_source(DownstreamPrompts(downstream, exclude=["completable-*"]))
    return server


@needs_everything
async def test_everything_resources_and_prompts(tmp_path: Path) -> None:
    """server-everything over stdio: its resources listed beside ours (its URIs as they
    are), its templates as they are and under the `ev+` prefix (selected by a URI pattern,
    `demo://...`, not a `kind:pattern` selector); a static resource read,
    a template's expansion read under the prefix (the contents' URI prefixed too); its
    prompts listed under `everything_` and got with arguments; an unknown URI is not found."""
    tap = tmp_path / "tap.jsonl"
    with serve(mcp_app(mounted(everything.stdio(tap)))) as live:
        client = McpTestClient(live.url + "/mcp")
        discovered = await client.request("server/discover", {})
        capabilities = discovered.final["result"]["capabilities"]
        assert capabilities["prompts"] == {"listChanged": True}

        listed = (await client.request("resources/list", {})).final["result"]["resources"]
        uris = {resource["uri"] for resource in listed}
        assert "local://note" in uris
        assert DOCUMENT in uris
        assert len(uris) == 8  # ours and its seven documents (not under ev+: not dynamic)
        [document] = [resource for resource in listed if resource["uri"] == DOCUMENT]
        assert document["mimeType"] == "text/markdown", document

        result = await client.request("resources/templates/list", {})
        templates = {t["uriTemplate"] for t in result.final["result"]["resourceTemplates"]}
        assert TEXT_TEMPLATE in templates
        assert "ev+" + TEXT_TEMPLATE in templates
        assert len(templates) == 4

        read = await client.request("resources/read", {"uri": DOCUMENT})
        [content] = read.final["result"]["contents"]
        assert content["uri"] == DOCUMENT
        assert "Features" in content["text"], content

        uri = "ev+demo://resource/dynamic/text/3"
        read = await client.request("resources/read", {"uri": uri})
        [content] = read.final["result"]["contents"]
        assert content["uri"] == uri
        assert content["text"].startswith("Resource 3:"), content

        missing = await client.request("resources/read", {"uri": "nowhere://x"})
        assert missing.final["error"]["message"] == "Resource not found: nowhere://x"

        prompts = (await client.request("prompts/list", {})).final["result"]["prompts"]
        names = {prompt["name"] for prompt in prompts}
        assert names == {
            "everything_simple-prompt",
            "everything_args-prompt",
            "everything_resource-prompt",
        }
        params = {"name": "everything_args-prompt", "arguments": {"city": "Paris"}}
        got = await client.request("prompts/get", params)
        [message] = got.final["result"]["messages"]
        assert message["content"]["text"] == "What's weather in Paris?"
    reads = everything.requests(tap, "resources/read")  # (the ev+ one: by its own URI)
    assert len(reads) == 2


@needs_everything
async def test_collisions_refused_at_start(tmp_path: Path) -> None:
    """A URI or a prompt name the downstream would take twice stops the start with a
    ValueError naming it and the way out; `on_collision="skip"` keeps ours."""
    downstream = everything.stdio(tmp_path / "tap.jsonl")
    server = McpServer("gateway")

    @server.resource(DOCUMENT)
    async def features() -> str:
        """Ours."""
        return "ours"

    server.add_source(DownstreamResources(downstream))
    with pytest.raises(ValueError, match=rf"resource URIs already taken: '{DOCUMENT}'.*prefix="):
        async with server.running():
            pass

    server = McpServer("gateway")

    @server.prompt(name="ev_simple-prompt")
    async def simple() -> str:
        """Ours."""
        return "ours"

    server.add_source(DownstreamPrompts(downstream, prefix="ev_"))
    with pytest.raises(ValueError, match=r"prompt names already taken: 'ev_simple-prompt'"):
        async with server.running():
            pass


def changing(probe: Path, mode: str) -> Downstream:
    """The changing server (mcp_asgi over stdio) as a downstream."""
    command = ["-m", "mcp_asgi.stdio", "tests.downstream.changing_server:server"]
    env = {"PYTHONPATH": str(ROOT), "PATH": os.environ["PATH"], "MCP_STDIO_PROBE": str(probe)}
    return Downstream.stdio("inner", sys.executable, command, env=env, cwd=str(ROOT), mode=mode)


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_changes_relayed_and_cancelled(mode: str, tmp_path: Path) -> None:
    """mcp_asgi over stdio, at 2026-07-28 (changes on a `subscriptions/listen` stream the
    gateway opens) and 2025 (notifications/*/list_changed): a downstream tool adding a
    prompt and a resource makes the gateway's listening client get prompts/list_changed
    and resources/list_changed; the next lists show them. With `subscribe=True` the
    downstream's update of a resource it listed reaches the client subscribed to it under
    the gateway's URI (`resources/subscribe` at 2025, a listen stream at 2026-07-28). A
    client dropping a
    resources/read or a prompts/get cancels the downstream request
    (notifications/cancelled: its handler sees client_notification)."""
    probe = tmp_path / "probe"
    downstream = changing(probe, mode)
    server = McpServer("gateway")
    server.add_source(DownstreamTools(downstream))
    server.add_source(DownstreamPrompts(downstream))
    server.add_source(DownstreamResources(downstream, prefix="inner+", subscribe=True))
    with serve(mcp_app(server)) as live:
        client = McpTestClient(live.url + "/mcp")
        wanted = {
            "promptsListChanged": True,
            "resourcesListChanged": True,
            "resourceSubscriptions": ["inner+slow://wait"],
        }
        listen = {"notifications": wanted}
        async with client.stream("subscriptions/listen", listen, id="L") as changes:
            ack = await changes.next_message()
            assert ack is not None
            assert ack["params"]["notifications"] == listen["notifications"]
            assert await client.call_tool("inner_grow", {"name": "fresh"})
            seen: set[str] = set()
            with anyio.fail_after(10):
                while len(seen) < 2:
                    changed = await changes.next_message()
                    assert changed is not None
                    seen.add(changed["method"])
            assert seen == {
                "notifications/prompts/list_changed",
                "notifications/resources/list_changed",
            }
            assert await client.call_tool("inner_touch", {"uri": "slow://wait"})
            with anyio.fail_after(10):
                while (updated := await changes.next_message()) is not None:
                    if updated["method"] == "notifications/resources/updated":
                        break
            assert updated is not None
            assert updated["params"]["uri"] == "inner+slow://wait"
        prompts = (await client.request("prompts/list", {})).final["result"]["prompts"]
        assert {prompt["name"] for prompt in prompts} == {"inner_slow", "inner_fresh"}
        resources = (await client.request("resources/list", {})).final["result"]["resources"]
        assert {r["uri"] for r in resources} == {"inner+slow://wait", "inner+grown://fresh"}
        read = await client.request("resources/read", {"uri": "inner+grown://fresh"})
        assert read.final["result"]["contents"][0]["text"] == "fresh", read.final

        for what, method, params in [
            ("resource", "resources/read", {"uri": "inner+slow://wait"}),
            ("prompt", "prompts/get", {"name": "inner_slow"}),
        ]:
            async with client.stream(method, params) as stream:
                await eventually(probed(probe, f"started {what}"))
                await stream.drop()
            cancelled = f"cancelled {what} client_notification"
            await eventually(probed(probe, cancelled), what=cancelled)


def probed(probe: Path, line: str) -> Callable[[], bool]:
    """Whether the downstream wrote `line` to its probe file."""
    return lambda: line in probe_lines(probe)


@needs_everything
async def test_resource_updates_relayed(tmp_path: Path) -> None:
    """`subscribe=True`: the gateway subscribes server-everything to the resources it
    mounts (resources/subscribe); once server-everything's updates are switched on (its
    tool, through the gateway), the gateway's client listening with that URI in
    `resourceSubscriptions` gets notifications/resources/updated for it."""
    tap = tmp_path / "tap.jsonl"
    downstream = everything.stdio(tap)
    server = McpServer("gateway")
    server.add_source(DownstreamTools(downstream, include=["toggle-subscriber-updates"]))
    server.add_source(DownstreamResources(downstream, include=[DOCUMENT], subscribe=True))
    with serve(mcp_app(server)) as live:
        client = McpTestClient(live.url + "/mcp")
        listen = {"notifications": {"resourceSubscriptions": [DOCUMENT]}}
        async with client.stream("subscriptions/listen", listen, id="L") as updates:
            ack = await updates.next_message()
            assert ack is not None
            assert ack["params"]["notifications"] == listen["notifications"]
            assert len(everything.requests(tap, "resources/subscribe")) == 1
            await client.call_tool("everything_toggle-subscriber-updates", {})
            with anyio.fail_after(10):
                updated = await updates.next_message()
            assert updated is not None
            assert updated["method"] == "notifications/resources/updated"
            assert updated["params"]["uri"] == DOCUMENT
