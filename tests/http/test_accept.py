"""Accept negotiation: which reply each Accept header gets (the same when asked again, as
the parse of each distinct value is remembered), and a bounded memory of those values."""

from __future__ import annotations

import pytest

from mcp_asgi.http import accept
from mcp_asgi.http.accept import ResponseMode, negotiate
from mcp_asgi.protocol.headers import RequestHeaders


def accept_header(value: str | None) -> RequestHeaders:
    return RequestHeaders([] if value is None else [(b"accept", value.encode("latin-1"))])


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, "json"),
        ("application/json", "json"),
        ("text/event-stream", "sse"),
        ("application/json, text/event-stream", "auto"),
        ("*/*", "auto"),
        ("APPLICATION/JSON;q=0.5, text/*", "auto"),
        ("application/json;q=0, text/event-stream", "sse"),
        ("application/json; q=0.0", None),
        ("text/html", None),
        ("application/json;q=nonsense", "json"),
    ],
)
def test_each_accept_value_gets_its_reply_also_when_asked_again(
    value: str | None, expected: ResponseMode | None
) -> None:
    assert negotiate(accept_header(value), "auto") == expected
    assert negotiate(accept_header(value), "auto") == expected  # from memory


def test_the_configured_mode_answers_an_accept_that_admits_both() -> None:
    both = accept_header("application/json, text/event-stream")
    assert negotiate(both, "json") == "json"
    assert negotiate(both, "sse") == "sse"


def test_a_client_varying_its_accept_cannot_grow_the_memory() -> None:
    for n in range(3 * accept._REMEMBERED):
        assert negotiate(accept_header(f"application/json, x/v{n}"), "auto") == "json"
    assert 0 < len(accept._admitted) <= accept._REMEMBERED
