"""The HTTP request of a route call: an ASGI scope made from the MCP request's and the
tool's arguments, and its JSON body.

From the MCP request it keeps what any request to the same server has: `scheme`,
`server`, `client`, `http_version`, `root_path` (the route's path is put under it, and in
`path` after it when the MCP request's is: Starlette's mounts before 0.33 leave it out), the
`Host` header, and a shallow copy of the lifespan `state`. Who is calling, per
`Identity`:

- `forward_authorization`: the MCP request's `Authorization` header is sent on: only
  when the app's API and the MCP endpoint are the same protected resource (the token's
  audience is both), since MCP forbids passing a token to another resource;
- otherwise no token: the verified principal is handed over in the scope, as
  `scope["user"]` (a Starlette `BaseUser` whose `principal` it is) and `scope["auth"]`
  (`AuthCredentials` of its scopes); with the host app's own identity, its `user` and
  `auth` as they were.

Either way `Principal.of(request)` gives the route the MCP request's principal. Other
headers are sent only if `forward_headers` names them. `ROUTE_CALL_KEY` marks the scope
as a route call: the MCP endpoint refuses it (a route cannot re-enter it).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import quote, urlencode

from starlette.authentication import AuthCredentials, BaseUser
from starlette.types import Scope

from mcp_asgi._version import __version__
from mcp_asgi.auth.principal import PRINCIPAL_KEY, Principal
from mcp_asgi.routes.openapi import NOT_ARGUMENTS, Operation

ROUTE_CALL_KEY: Final = "mcp_asgi.route_call"
"""The ASGI scope key marking a request as a route called as a tool, in process."""

_USER_AGENT: Final = f"mcp-asgi/{__version__} (route call)".encode()
_PLACEHOLDER: Final = re.compile(r"\{([^{}]*)\}")
_NEVER_FORWARDED: Final = NOT_ARGUMENTS | {"user-agent", "accept", "te", "upgrade"}


@dataclass(frozen=True, slots=True)
class Identity:
    """How a route call carries the caller: the token, or the principal."""

    forward_authorization: bool
    forward_headers: frozenset[str]

    @classmethod
    def of(cls, forward_authorization: bool, forward_headers: Sequence[str]) -> Identity:
        if isinstance(forward_headers, str) or not all(
            isinstance(h, str) and h for h in forward_headers
        ):
            raise TypeError("forward_headers must be a list of header names")
        names = frozenset(h.lower() for h in forward_headers)
        refused = sorted(names & (_NEVER_FORWARDED | {"authorization"}))
        if refused:
            raise ValueError(
                f"forward_headers cannot name {', '.join(refused)}: the call sets them "
                "itself (the Authorization header: forward_authorization=True)"
            )
        if any(h.startswith("mcp-") for h in names):
            raise ValueError("forward_headers cannot name Mcp-* headers: they are the MCP call's")
        return cls(bool(forward_authorization), names)


class PrincipalUser(BaseUser):
    """`scope["user"]` of a route call: the MCP request's verified principal."""

    def __init__(self, principal: Principal) -> None:
        self.principal = principal

    @property
    def is_authenticated(self) -> bool:
        return True

    @property
    def display_name(self) -> str:
        return self.principal.subject

    @property
    def identity(self) -> str:
        return self.principal.subject


def route_request(
    mcp_scope: Scope,
    operation: Operation,
    arguments: Mapping[str, Any],
    identity: Identity,
    principal: Principal | None,
) -> tuple[dict[str, Any], bytes]:
    """The ASGI scope and body of calling `operation` with `arguments` (valid ones)."""
    path_values: dict[str, str] = {}
    query: list[tuple[str, str]] = []
    headers: list[tuple[bytes, bytes]] = []
    fields: dict[str, Any] = {}
    body: Any = None
    whole = False
    for argument in operation.arguments:
        if argument.name not in arguments:
            continue
        value = arguments[argument.name]
        if argument.location == "path":
            path_values[argument.key] = as_text(value)
        elif argument.location == "query":
            values = value if isinstance(value, list) else [value]
            query.extend((argument.key, as_text(v)) for v in values)
        elif argument.location == "header":
            key = argument.key.lower().encode("latin-1")
            headers.append((key, as_text(value).encode("latin-1")))  # as servers decode it
        elif argument.key:
            fields[argument.key] = value
        else:
            body, whole = value, True
    if fields or (operation.body_required and not whole):
        body, whole = fields, True
    content = _json(body) if whole else b""
    root = mcp_scope.get("root_path", "")
    path, raw_path = fill_path(root, operation.path, path_values)
    if not _under_root(mcp_scope):
        path = path[len(root) :]
    headers.extend(_carried(mcp_scope, identity))
    headers.append((b"user-agent", _USER_AGENT))
    headers.append((b"accept", b"*/*"))
    if whole:
        headers.append((b"content-type", b"application/json"))
        headers.append((b"content-length", str(len(content)).encode()))
    scope: dict[str, Any] = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": mcp_scope.get("http_version", "1.1"),
        "method": operation.method,
        "scheme": mcp_scope.get("scheme", "http"),
        "server": mcp_scope.get("server"),
        "client": mcp_scope.get("client"),
        "root_path": root,
        "path": path,
        "raw_path": raw_path,
        "query_string": urlencode(query).encode(),
        "headers": headers,
        ROUTE_CALL_KEY: True,
    }
    state = mcp_scope.get("state")
    if isinstance(state, dict):
        scope["state"] = dict(state)
    if principal is not None:
        scope[PRINCIPAL_KEY] = principal
        if not identity.forward_authorization:
            _hand_over(scope, mcp_scope, principal)
    return scope, content


def _under_root(mcp_scope: Scope) -> bool:
    """Whether the MCP request's `path` holds its `root_path` (ASGI servers, Starlette >=
    0.35's mounts) or follows it (Starlette < 0.33's mounts strip it): the call's does the
    same, for the host app's router to read it as it read the MCP request's."""
    root: str = mcp_scope.get("root_path", "")
    path: str = mcp_scope.get("path", "")
    return path.startswith(root) and (len(path) == len(root) or path[len(root)] == "/")


def _carried(mcp_scope: Scope, identity: Identity) -> list[tuple[bytes, bytes]]:
    """The MCP request's headers the call carries: Host, those allowed, and the
    `Authorization` header when it is forwarded."""
    wanted = identity.forward_headers | {"host"}
    if identity.forward_authorization:
        wanted = wanted | {"authorization"}
    return [(k, v) for k, v in mcp_scope.get("headers", []) if k.decode("latin-1") in wanted]


def _hand_over(scope: dict[str, Any], mcp_scope: Scope, principal: Principal) -> None:
    if principal.source == "host":
        for key in ("user", "auth"):
            if key in mcp_scope:
                scope[key] = mcp_scope[key]
        return
    scope["user"] = PrincipalUser(principal)
    scope["auth"] = AuthCredentials(sorted(principal.scopes))


def fill_path(root: str, template: str, values: Mapping[str, str]) -> tuple[str, bytes]:
    """`template` under `root` with its `{name}`s replaced by `values`: the decoded `path`
    and its `raw_path`, the same path percent-encoded (`%2F` for a value's `/`, as an HTTP
    client sends it). Each placeholder is filled once, left to right: a value holding
    `{other}` is not filled again."""
    path, raw = [root], [quote(root)]
    for n, part in enumerate(_PLACEHOLDER.split(template)):
        if n % 2 == 0:
            path.append(part)
            raw.append(quote(part))
        elif part in values:
            path.append(values[part])
            raw.append(quote(values[part], safe=""))
        else:
            path.append("{" + part + "}")
            raw.append(quote("{" + part + "}"))
    return "".join(path), "".join(raw).encode("ascii")


def as_text(value: Any) -> str:
    """A parameter's value as the text of a path segment, query value or header."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (str, int, float)):
        return str(value)
    return json.dumps(value, separators=(",", ":"))


def _json(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()
