"""`RequestHeaders`: the headers a request is read by, found in one pass over the ASGI list."""

from __future__ import annotations

from mcp_asgi.http.origin import origin_allowed
from mcp_asgi.protocol.headers import (
    ACCEPT,
    AUTHORIZATION,
    CONTENT_LENGTH,
    HOST,
    MCP_NAME,
    ORIGIN,
    PROTOCOL_VERSION,
    SESSION_ID,
    RequestHeaders,
)


def test_the_first_value_of_each_known_header_is_kept_by_slot() -> None:
    raw = [
        (b"host", b"example.test"),
        (b"user-agent", b"x"),  # not one the endpoint reads
        (b"accept", b"application/json"),
        (b"accept", b"text/event-stream"),
        (b"mcp-protocol-version", b"2026-07-28"),
    ]
    headers = RequestHeaders(raw)
    assert headers.first[HOST] == b"example.test"
    assert headers.first[ACCEPT] == b"application/json"
    assert headers.text(PROTOCOL_VERSION) == "2026-07-28"
    assert headers.first[ORIGIN] is None
    assert headers.text(ORIGIN) is None
    assert headers.raw is raw  # the whole list, for the Mcp-Param-* headers a tool declares


def test_a_header_sent_more_than_once_sets_its_bit() -> None:
    headers = RequestHeaders(
        [(b"mcp-name", b"a"), (b"content-length", b"4"), (b"mcp-name", b"b"), (b"host", b"h")]
    )
    assert headers.repeated == 1 << MCP_NAME
    assert headers.first[MCP_NAME] == b"a"


def test_names_in_another_case_are_the_same_header() -> None:
    """ASGI servers send lower-case names; one that does not is matched all the same."""
    headers = RequestHeaders(
        [(b"Authorization", b"Bearer t"), (b"MCP-Session-Id", b"s"), (b"mcp-session-id", b"t")]
    )
    assert headers.text(AUTHORIZATION) == "Bearer t"
    assert headers.first[SESSION_ID] == b"s"
    assert headers.repeated == 1 << SESSION_ID


def test_values_are_decoded_as_latin_1() -> None:
    headers = RequestHeaders.of({"type": "http", "headers": [(b"content-length", b"\xe9")]})
    assert headers.text(CONTENT_LENGTH) == "é"


def test_every_reader_sees_a_name_in_another_case_the_origin_check_for_one() -> None:
    """A server that sends `Origin` in capitals gets it checked all the same (DNS
    rebinding protection does not depend on the server lower-casing names)."""
    asgi_scope = {"type": "http", "server": ("127.0.0.1", 8000)}
    foreign = RequestHeaders([(b"host", b"127.0.0.1:8000"), (b"Origin", b"http://evil.example")])
    same = RequestHeaders([(b"Host", b"127.0.0.1:8000"), (b"Origin", b"http://127.0.0.1:8000")])
    assert not origin_allowed(asgi_scope, foreign, frozenset())
    assert origin_allowed(asgi_scope, same, frozenset())
