"""Every handle is bound to its principal: 2025-era sessions (POST, GET, DELETE) and MRTR
requestState, with real tokens; another principal's handle is as good as none."""

from __future__ import annotations

from typing import Any

import httpx

from ..servers import LATEST
from .apps import Ran
from .conftest import Live


def _legacy_headers(token: str | None, session: str | None = None) -> dict[str, str]:
    headers = {
        "content-type": "application/json",
        "accept": "application/json, text/event-stream",
        "mcp-protocol-version": LATEST,
    }
    if token is not None:
        headers["authorization"] = f"Bearer {token}"
    if session is not None:
        headers["mcp-session-id"] = session
    return headers


def _rpc(method: str, params: dict[str, Any] | None = None, id: int = 1) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": id, "method": method, "params": params or {}}


async def _initialize(http: httpx.AsyncClient, url: str, token: str | None) -> str:
    params = {
        "protocolVersion": LATEST,
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"},
    }
    response = await http.post(url, json=_rpc("initialize", params), headers=_legacy_headers(token))
    assert response.status_code == 200, response.text
    return response.headers["mcp-session-id"]


async def test_a_session_belongs_to_its_principal(live: Live, ran: Ran) -> None:
    """Another principal (or nobody) gets 404 for a session's POST, GET and DELETE, as if
    it did not exist; the same principal with a fresh token goes on using it."""
    alice, bob = live.token(), live.token(client_id="other-agent", client_secret="other-secret")
    call = _rpc("tools/call", {"name": "whoami", "arguments": {}}, id=2)
    async with httpx.AsyncClient(timeout=10) as http:
        session = await _initialize(http, live.url, alice)
        foreign_post = await http.post(live.url, json=call, headers=_legacy_headers(bob, session))
        foreign_get = await http.get(live.url, headers=_legacy_headers(bob, session))
        foreign_delete = await http.delete(live.url, headers=_legacy_headers(bob, session))
        anonymous = await http.post(live.url, json=call, headers=_legacy_headers(None, session))
        unknown = await http.post(
            live.url, json=call, headers=_legacy_headers(bob, "no-such-session")
        )
        assert ran.calls == []
        again = await http.post(live.url, json=call, headers=_legacy_headers(live.token(), session))
        deleted = await http.delete(live.url, headers=_legacy_headers(alice, session))
    for response in (foreign_post, foreign_get, foreign_delete):
        assert response.status_code == 404
        assert response.json()["error"] == unknown.json()["error"]
    assert anonymous.status_code == 401
    assert again.status_code == 200
    assert again.json()["result"]["structuredContent"]["subject"] == "agent"
    assert deleted.status_code == 204
    assert ran.calls == ["whoami"]


async def test_request_state_belongs_to_its_principal(live: Live, ran: Ran) -> None:
    """An MRTR requestState issued to one principal is refused (400, reason principal) for
    another, before the handler runs again; its own principal completes the round."""
    alice = live.token()
    bob = live.token(client_id="other-agent", client_secret="other-secret")
    params = {"name": "ask", "arguments": {}}
    async with live.client(alice, capabilities={"elicitation": {}}) as client:
        first = (await client.request("tools/call", params)).final["result"]
    assert first["resultType"] == "input_required"
    (key,) = first["inputRequests"]
    retry = {
        **params,
        "inputResponses": {key: {"action": "decline"}},
        "requestState": first["requestState"],
    }
    async with live.client(bob, capabilities={"elicitation": {}}) as client:
        stolen = await client.request("tools/call", retry)
    assert stolen.status == 400
    assert stolen.final["error"]["data"] == {"reason": "principal"}
    assert ran.calls == ["ask"]
    async with live.client(live.token(), capabilities={"elicitation": {}}) as client:
        done = (await client.request("tools/call", retry)).final["result"]
    assert done["content"][0]["text"] == "answered decline"
