"""Sealing requestState: signature, expiry, and what counts as the principal."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
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


_ASCII = [chr(c) for c in range(128) if chr(c) != "."]


def _edits(text: str) -> list[str]:
    """The issue's edits of a signature: padding, inserted junk or whitespace, the other
    base64 alphabet, a sibling last character."""
    sibling = chr(ord(text[-1]) ^ 1)
    return [
        text + "==",
        text + "=",
        text[:5] + "!*~" + text[5:],
        text[:5] + " " + text[5:],
        text + "\n",
        "\t" + text,
        text.replace("-", "+").replace("_", "/") if ("-" in text or "_" in text) else text + "+",
        text[:-1] + sibling,
    ]


def test_any_edit_of_the_signature_is_tampered() -> None:
    """Lenient base64 is gone: padding, junk, whitespace, the +/ alphabet, a sibling last
    character (same bytes under lenient decoding) all fail verification."""
    sealer = Sealer(b"k", ttl=10)
    for n in range(40):  # signatures with every kind of last character
        token = sealer.seal({"m": "tools/call", "n": n})
        head, payload, mac = token.split(".")
        for edited in _edits(mac):
            with pytest.raises(StateError) as info:
                sealer.open(f"{head}.{payload}.{edited}", 1)
            assert info.value.data["reason"] == "tampered", edited


@settings(max_examples=300, deadline=None, database=None)
@given(data=st.data())
def test_every_single_character_edit_is_tampered(data: st.DataObject) -> None:
    """Replacing, inserting or deleting any one character of the payload or the signature
    is refused: decoding is strict and canonical."""
    sealer = Sealer(b"k", ttl=10, clock=lambda: 1000.0)
    token = sealer.seal({"m": "tools/call", "x": [1, 2]})
    head, payload, mac = token.split(".")
    part = data.draw(st.sampled_from(["payload", "mac"]))
    text = payload if part == "payload" else mac
    at = data.draw(st.integers(min_value=0, max_value=len(text) - 1))
    char = data.draw(st.sampled_from(_ASCII))
    kind = data.draw(st.sampled_from(["replace", "insert", "delete"]))
    if kind == "replace" and text[at] == char:
        return
    edited = {
        "replace": text[:at] + char + text[at + 1 :],
        "insert": text[:at] + char + text[at:],
        "delete": text[:at] + text[at + 1 :],
    }[kind]
    forged = f"{head}.{edited}.{mac}" if part == "payload" else f"{head}.{payload}.{edited}"
    with pytest.raises(StateError) as info:
        sealer.open(forged, 1)
    assert info.value.data["reason"] == "tampered"
