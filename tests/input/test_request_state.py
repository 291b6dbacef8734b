"""Sealing requestState: signature, expiry, and what counts as the principal."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from starlette.authentication import SimpleUser, UnauthenticatedUser

from mcp_asgi.input.request_state import Sealer, StateError, params_digest, principal_of

from ..helpers import Clock


def test_a_sealed_payload_opens_until_it_expires() -> None:
    """The payload round-trips; after the ttl it is rejected as expired."""
    clock = Clock(1_000.0)
    sealer = Sealer(b"k", ttl=10, clock=clock)
    token = sealer.seal({"a": {"x": [1]}})
    assert sealer.open(token, 1)["a"] == {"x": [1]}
    clock.now += 11
    with pytest.raises(StateError) as info:
        sealer.open(token, 1)
    assert info.value.data == {"reason": "expired"}
    assert info.value.http_status == 400
    assert info.value.request_id == 1


@pytest.mark.parametrize("token", [None, 5, "", "v1.a", "v2.a.b", "v1.e30.!!!"])
def test_malformed_tokens_are_rejected(token: Any) -> None:
    """Anything that is not a v1 token is -32602."""
    with pytest.raises(StateError) as info:
        Sealer(b"k", ttl=10).open(token, "r")
    assert info.value.code == -32602
    assert info.value.data["reason"] in ("malformed", "tampered")


def test_another_key_or_an_edit_fails_verification() -> None:
    """A different key, or one changed character, is reported as tampered."""
    token = Sealer(b"k", ttl=10).seal({"m": "tools/call"})
    with pytest.raises(StateError, match="failed verification"):
        Sealer(b"other", ttl=10).open(token, 1)
    head, payload, mac = token.split(".")
    edited = payload.replace(payload[5], "A" if payload[5] != "A" else "B", 1)
    with pytest.raises(StateError, match="failed verification"):
        Sealer(b"k", ttl=10).open(f"{head}.{edited}.{mac}", 1)


def test_a_generated_key_warns_once(caplog: pytest.LogCaptureFixture) -> None:
    """Without a configured key the first seal logs that replicas need a shared key."""
    sealer = Sealer(None, ttl=10)
    with caplog.at_level(logging.WARNING, logger="mcp_asgi.input"):
        sealer.seal({})
        sealer.seal({})
    warnings = [r for r in caplog.records if "request_state_key" in r.getMessage()]
    assert len(warnings) == 1


def test_params_digest_ignores_meta_and_retry_fields() -> None:
    """The digest covers the salient params only."""
    base = {"name": "t", "arguments": {"a": 1}}
    retry = dict(base, _meta={"x": 1}, inputResponses={}, requestState="s")
    assert params_digest("tools/call", base) == params_digest("tools/call", retry)
    assert params_digest("tools/call", base) != params_digest("prompts/get", base)
    assert params_digest("tools/call", base) != params_digest(
        "tools/call", {"name": "t", "arguments": {"a": 2}}
    )


@pytest.mark.parametrize(
    ("scope", "principal"),
    [
        ({}, None),
        ({"user": UnauthenticatedUser()}, None),
        ({"user": SimpleUser("alice")}, "user:alice"),
        ({"auth": {"sub": "42", "iss": "https://id"}}, "sub:https://id|42"),
        ({"auth": {"scopes": ["a"]}}, None),
    ],
)
def test_principal_of(scope: dict[str, Any], principal: str | None) -> None:
    """An authenticated scope["user"], else a scope["auth"] mapping with a sub claim."""
    assert principal_of(scope) == principal
