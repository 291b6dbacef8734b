"""Irreversible steps: a cancel after `ctx.side_effect(...)` is a reconciliation item."""

from __future__ import annotations

import logging

import anyio
import pytest

from mcp_asgi import CancelReason, CancelToken, Context, McpServer, RequestCancelled
from mcp_asgi.testing import McpTestClient

from ..helpers import (
    CANCEL_LOGGER,
    Otel,
    Probe,
    attrs,
    drop_mid_call,
    eventually,
    mcp_app,
    records_for,
    serving,
    wait_for,
)


def build_server(probe: Probe) -> McpServer:
    server = McpServer("effects")

    @server.tool()
    async def charge(order: str, ctx: Context) -> str:
        """Marks a charge, then waits for the payment provider forever."""
        ctx.side_effect("charge_card", idempotency_key=f"order-{order}")
        with probe.running(ctx):
            await anyio.sleep_forever()
        return "never"

    @server.tool()
    async def email(ctx: Context) -> str:
        """Sends an e-mail in a shielded step: a cancel mid-step lets the step finish."""
        try:
            async with ctx.side_effect("send_email"):
                probe.token = ctx.cancel_token
                probe.started.set()
                await anyio.to_thread.run_sync(probe.release.wait, 30)
                probe.notes.append("step completed")
            await ctx.checkpoint()
            probe.notes.append("after the step")
        finally:
            probe.exit(ctx.cancel_reason)
        return "sent"

    @server.tool()
    def ship(ctx: Context, token: CancelToken) -> str:
        """A thread that marks a step too late: the mark refuses to start it."""
        probe.token = token
        probe.started.set()
        token.wait(30)
        try:
            ctx.side_effect("ship_parcel", "parcel-1")
        except RequestCancelled as cancelled:
            probe.notes.append(f"refused: {cancelled.reason.value}")
        finally:
            probe.exit(token.reason)
        return "shipped"

    @server.tool()
    async def no_effect(ctx: Context) -> str:
        """Waits forever without marking anything."""
        with probe.running(ctx):
            await anyio.sleep_forever()
        return "never"

    @server.tool()
    async def done(ctx: Context) -> str:
        """Marks a step and completes."""
        ctx.side_effect("write_ledger", "ledger-9")
        return "ok"

    @server.tool()
    async def unnamed(ctx: Context) -> str:
        """Marks a step without a name."""
        ctx.side_effect("")
        return "unreachable"

    return server


async def cancel_mid_call(client: McpTestClient, tool: str, probe: Probe, **args: str) -> None:
    """Call `tool` (the request id is its name), drop the connection once it has started,
    and wait until it has exited."""
    await drop_mid_call(client, tool, probe, args, id=tool)
    await wait_for(probe.exited)


async def test_cancel_after_a_side_effect_is_recorded(
    otel: Otel, caplog: pytest.LogCaptureFixture
) -> None:
    """Span attribute, counter and one WARNING record with what reconciliation needs."""
    caplog.set_level(logging.DEBUG, logger=CANCEL_LOGGER)
    probe = Probe()
    with serving(mcp_app(build_server(probe), otel)) as client:
        await cancel_mid_call(client, "charge", probe, order="42")
        await otel.wait_span("tools/call charge")
    attributes = attrs(otel.span("tools/call charge"))
    assert attributes["mcp_asgi.cancellation.after_side_effect"] is True
    assert attributes["mcp_asgi.side_effect.name"] == "charge_card"
    assert otel.total("mcp_asgi.cancellations", {"gen_ai.tool.name": "charge"}) == 1
    after_side_effect = {"mcp_asgi.cancellation.after_side_effect": True}
    assert otel.total("mcp_asgi.cancellations", after_side_effect) == 1
    [record] = records_for(caplog, "charge")
    assert record.levelno == logging.WARNING
    fields = {k: getattr(record, k, None) for k in ("tool", "side_effect", "idempotency_key")}
    assert fields == {"tool": "charge", "side_effect": "charge_card", "idempotency_key": "order-42"}
    assert getattr(record, "reason", None) == "client_disconnect"
    assert getattr(record, "after_side_effect", None) is True


async def test_a_shielded_step_completes_then_the_cancel_lands(
    otel: Otel, caplog: pytest.LogCaptureFixture
) -> None:
    """`async with ctx.side_effect(...)`: the step finishes despite the cancel; the handler
    stops right after it; the cancel is recorded as after the side effect."""
    caplog.set_level(logging.DEBUG, logger=CANCEL_LOGGER)
    probe = Probe()
    with serving(mcp_app(build_server(probe), otel)) as client:
        await drop_mid_call(client, "email", probe, {}, id="email")
        assert probe.token is not None
        assert await anyio.to_thread.run_sync(probe.token.wait, 10)  # the cancel has landed
        probe.release.set()
        await wait_for(probe.exited)
        await otel.wait_span("tools/call email")
    assert probe.notes == ["step completed"]
    assert probe.reason is CancelReason.CLIENT_DISCONNECT
    [record] = records_for(caplog, "email")
    assert record.levelno == logging.WARNING
    assert getattr(record, "side_effect", None) == "send_email"
    assert getattr(record, "idempotency_key", "unset") is None


async def test_a_step_is_never_started_after_the_cancel(
    otel: Otel, caplog: pytest.LogCaptureFixture
) -> None:
    """Marking a step once the request is cancelled raises RequestCancelled (here in a
    thread); the cancel is a plain one, logged at INFO."""
    caplog.set_level(logging.DEBUG, logger=CANCEL_LOGGER)
    probe = Probe()
    with serving(mcp_app(build_server(probe), otel)) as client:
        await cancel_mid_call(client, "ship", probe)
        await otel.wait_span("tools/call ship")
    assert probe.notes == ["refused: client_disconnect"]
    [record] = records_for(caplog, "ship")
    assert record.levelno == logging.INFO
    assert getattr(record, "after_side_effect", None) is False
    attributes = attrs(otel.span("tools/call ship"))
    assert attributes["mcp_asgi.cancellation.after_side_effect"] is False
    assert "mcp_asgi.side_effect.name" not in attributes


async def test_a_plain_cancel_is_one_info_record(caplog: pytest.LogCaptureFixture) -> None:
    """Without a side effect: one INFO record with the structured fields of the contract."""
    caplog.set_level(logging.DEBUG, logger=CANCEL_LOGGER)
    probe = Probe()
    with serving(mcp_app(build_server(probe))) as client:
        await cancel_mid_call(client, "no_effect", probe)
        await eventually(lambda: bool(records_for(caplog, "no_effect")), what="the record")
    [record] = records_for(caplog, "no_effect")
    assert record.levelno == logging.INFO
    fields = {
        key: getattr(record, key, "missing")
        for key in (
            "request_id",
            "method",
            "tool",
            "reason",
            "outcome",
            "after_side_effect",
            "side_effect",
            "idempotency_key",
        )
    }
    assert fields == {
        "request_id": "no_effect",
        "method": "tools/call",
        "tool": "no_effect",
        "reason": "client_disconnect",
        "outcome": "exited",
        "after_side_effect": False,
        "side_effect": None,
        "idempotency_key": None,
    }
    elapsed = getattr(record, "elapsed", None)
    assert isinstance(elapsed, float)
    assert elapsed >= 0


async def test_a_cancel_after_a_side_effect_is_logged_where_only_warnings_are(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Without an SDK, with the cancellation logger at WARNING: the record of a cancel after
    a side effect is still made and logged (a plain cancel's INFO record is not)."""
    caplog.set_level(logging.WARNING, logger=CANCEL_LOGGER)
    probe = Probe()
    with serving(mcp_app(build_server(probe))) as client:
        await cancel_mid_call(client, "charge", probe, order="7")
        await eventually(lambda: bool(records_for(caplog, "charge")), what="the record")
    [record] = records_for(caplog, "charge")
    assert record.levelno == logging.WARNING
    assert getattr(record, "idempotency_key", None) == "order-7"


async def test_a_completed_request_with_a_side_effect_logs_nothing(
    otel: Otel, caplog: pytest.LogCaptureFixture
) -> None:
    """A mark on a request that completes is only a span attribute."""
    caplog.set_level(logging.DEBUG, logger=CANCEL_LOGGER)
    with serving(mcp_app(build_server(Probe()), otel)) as client:
        assert (await client.call_tool("done"))["content"][0]["text"] == "ok"
        await otel.wait_span("tools/call done")
    attributes = attrs(otel.span("tools/call done"))
    assert attributes["mcp_asgi.side_effect.name"] == "write_ledger"
    assert "mcp_asgi.cancellation.reason" not in attributes
    assert [r for r in caplog.records if r.levelno > logging.DEBUG] == []


async def test_a_side_effect_needs_a_name() -> None:
    """An empty name is a programming error."""
    with serving(mcp_app(build_server(Probe()))) as client:
        result = await client.call_tool("unnamed")
    assert result["isError"] is True
    assert "name must not be empty" in result["content"][0]["text"]
