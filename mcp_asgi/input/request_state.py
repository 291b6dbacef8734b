"""Sealing `requestState`: HMAC-SHA256 over a JSON payload, with expiry and bindings.

Format: ``v1.<base64url(payload JSON)>.<base64url(HMAC-SHA256(key, "v1." + payload))>``.
The payload is signed, not encrypted: the client can read it (it only ever holds what the
client itself answered, digests, and an expiry), but cannot change it.

Bindings checked on every retry, each failing with -32602 (HTTP 400):
- the signature (`tampered`): also what a replica with a different key sees;
- the expiry (`expired`), from `request_state_ttl`;
- the method and a digest of the salient params (`mismatch`): everything in `params`
  except `_meta`, `inputResponses` and `requestState`;
- a digest of the authenticated principal (`principal`), when the request had one.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import re
import secrets
import time
from collections.abc import Callable, Mapping
from typing import Any, Final

from starlette.types import Scope

from mcp_asgi._loggers import input_logger as logger
from mcp_asgi.auth.principal import principal_key
from mcp_asgi.protocol.jsonrpc import INVALID_PARAMS, ProtocolError, RequestId

VERSION: Final = "v1"
RETRY_KEYS: Final = ("inputResponses", "requestState")
_B64URL: Final = re.compile(r"[A-Za-z0-9_-]*")


def canonical(value: Any) -> bytes:
    """A stable JSON encoding (sorted keys, no spaces) for digests."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def digest(value: Any) -> str:
    """A short hex digest of a JSON value."""
    return hashlib.sha256(canonical(value)).hexdigest()[:32]


def params_digest(method: str, params: Mapping[str, Any]) -> str:
    """Identifies the originating request: the method and its salient params."""
    salient = {k: v for k, v in params.items() if k not in ("_meta", *RETRY_KEYS)}
    return digest([method, salient])


def principal_of(asgi_scope: Scope) -> str | None:
    """The authenticated principal of a request, or None (`mcp_asgi.auth`'s
    `principal_key`): the endpoint's verified `Principal` when authorization is on, else
    `scope["user"]` when it is authenticated (Starlette's `AuthenticationMiddleware`), its
    `identity`, else its `display_name`; otherwise `scope["auth"]` when it is a mapping with
    a `sub` claim (token-verifying middleware that stores the claims there), as `iss|sub`.
    """
    return principal_key(asgi_scope)


class StateError(ProtocolError):
    """A `requestState` that is rejected (-32602, HTTP 400); `data.reason` says why."""

    def __init__(self, reason: str, detail: str, request_id: RequestId) -> None:
        super().__init__(
            400,
            INVALID_PARAMS,
            f"Invalid params: requestState {detail}",
            {"reason": reason},
            request_id=request_id,
        )


class Sealer:
    """Seals and opens `requestState` with one key; shared by every replica that has it."""

    def __init__(
        self,
        key: bytes | None,
        *,
        ttl: float,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if ttl <= 0:
            raise ValueError("request_state_ttl must be positive")
        self._generated = key is None
        self._key = key if key is not None else secrets.token_bytes(32)
        self._ttl = ttl
        self._clock = clock
        self._warned = False

    def seal(self, payload: dict[str, Any]) -> str:
        """Sign `payload` with an expiry added."""
        if self._generated and not self._warned:
            self._warned = True
            logger.warning(
                "request_state_key is not set: requestState is sealed with a random "
                "per-process key, so a retry reaching another worker or replica is "
                "rejected; set MCP_REQUEST_STATE_KEY to one secret shared by all of them"
            )
        body = dict(payload, exp=round(self._clock() + self._ttl, 3))
        encoded = _b64(canonical(body))
        return f"{VERSION}.{encoded}.{_b64(self._mac(encoded))}"

    def open(self, token: Any, request_id: RequestId) -> dict[str, Any]:
        """Verify and decode a `requestState`; raise `StateError` when it must be rejected."""
        if not isinstance(token, str):
            raise StateError("malformed", "must be a string", request_id)
        parts = token.split(".")
        if len(parts) != 3 or parts[0] != VERSION:
            raise StateError("malformed", "is malformed", request_id)
        _, encoded, mac = parts
        try:
            valid = hmac.compare_digest(_unb64(mac), self._mac(encoded))
        except (binascii.Error, ValueError):
            valid = False
        if not valid:
            raise StateError(
                "tampered",
                "failed verification (altered, or sealed with another request_state_key)",
                request_id,
            )
        payload = json.loads(_unb64(encoded))
        if not isinstance(payload, dict) or not isinstance(payload.get("exp"), (int, float)):
            raise StateError("malformed", "is malformed", request_id)
        if payload["exp"] < self._clock():
            raise StateError(
                "expired",
                "has expired: send the request again without inputResponses and requestState",
                request_id,
            )
        return payload

    def _mac(self, encoded: str) -> bytes:
        return hmac.new(self._key, f"{VERSION}.{encoded}".encode(), hashlib.sha256).digest()


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    """Strict, canonical base64url without padding: the one encoding `_b64` produces, so
    any edited character is refused (`ValueError`), never decoded leniently."""
    if len(text) % 4 == 1 or not _B64URL.fullmatch(text):
        raise ValueError("not canonical unpadded base64url")
    data = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    if _b64(data) != text:  # unused low bits set: a sibling last character
        raise ValueError("not canonical unpadded base64url")
    return data
