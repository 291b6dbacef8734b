"""What describes a tool, resource, prompt or content block besides its data: icons,
annotations and `_meta`, in their MCP shapes, each checked once.

The shapes are `TypedDict`s whose keys are the wire's own (`mimeType`, `readOnlyHint`), so
a plain dict literal is the value and a type checker checks it. `Extras` holds the checked
values of one primitive and puts them into its listing entry.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Final, Literal

import pydantic
from pydantic import ConfigDict, TypeAdapter, with_config
from typing_extensions import Required, TypedDict  # pydantic needs these before 3.12

from mcp_asgi.protocol.jsonrpc import JsonObject

__all__ = [
    "NO_EXTRAS",
    "Annotations",
    "Extras",
    "Icon",
    "ToolAnnotations",
    "check_annotations",
    "check_icons",
    "check_meta",
    "check_tool_annotations",
]

# unknown keys are refused (a misspelt hint would be dropped by clients without a word)
_STRICT = ConfigDict(extra="forbid", strict=True)


@with_config(_STRICT)
class Icon(TypedDict, total=False):
    """An icon a client may show: `{"src": "https://.../icon.png", "mimeType": "image/png",
    "sizes": ["48x48"], "theme": "light"}`; only `src` (an `https:` URL or a `data:` URI) is
    required."""

    src: Required[str]
    mimeType: str
    sizes: list[str]
    theme: Literal["light", "dark"]


@with_config(_STRICT)
class Annotations(TypedDict, total=False):
    """Hints for the client about a content block or a resource: who it is for
    (`audience`: `"user"`, `"assistant"`), how important it is (`priority`, 0 to 1) and when
    it last changed (`lastModified`, ISO 8601)."""

    audience: list[Literal["user", "assistant"]]
    priority: Annotated[float, pydantic.Field(ge=0, le=1)]
    lastModified: str


@with_config(_STRICT)
class ToolAnnotations(TypedDict, total=False):
    """Hints about a tool's behaviour (untrusted by clients unless they trust the server):
    `title`, `readOnlyHint`, `destructiveHint`, `idempotentHint`, `openWorldHint`."""

    title: str
    readOnlyHint: bool
    destructiveHint: bool
    idempotentHint: bool
    openWorldHint: bool


_ICONS: TypeAdapter[list[Icon]] = TypeAdapter(list[Icon])
_ANNOTATIONS: TypeAdapter[Annotations] = TypeAdapter(Annotations)
_TOOL_ANNOTATIONS: TypeAdapter[ToolAnnotations] = TypeAdapter(ToolAnnotations)

# A `_meta` key: an optional prefix of dot-separated labels and a slash, then a name.
_LABEL = r"[A-Za-z](?:[A-Za-z0-9-]*[A-Za-z0-9])?"
_META_KEY = re.compile(
    rf"(?:{_LABEL}(?:\.{_LABEL})*/)?(?:[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)?\Z"
)


def check_icons(icons: Sequence[Icon] | None, *, owner: str) -> tuple[JsonObject, ...]:
    """The icons as JSON objects; `ValueError` naming `owner` for a wrong shape."""
    if icons is None:
        return ()
    if isinstance(icons, (str, Mapping)):
        raise TypeError(f"{owner}: icons must be a list of {{'src': ...}} dicts")
    checked = _checked(_ICONS, list(icons), owner, "icons")
    return tuple(dict(icon) for icon in checked)


def check_annotations(annotations: Annotations | None, *, owner: str) -> JsonObject | None:
    """Content or resource annotations as a JSON object, or None."""
    if annotations is None:
        return None
    return dict(_checked(_ANNOTATIONS, annotations, owner, "annotations"))


def check_tool_annotations(annotations: ToolAnnotations | None, *, owner: str) -> JsonObject | None:
    """A tool's `ToolAnnotations` as a JSON object, or None."""
    if annotations is None:
        return None
    return dict(_checked(_TOOL_ANNOTATIONS, annotations, owner, "annotations"))


def check_meta(meta: Mapping[str, Any] | None, *, owner: str) -> JsonObject | None:
    """`_meta` as a JSON object (a copy), or None; its keys must follow MCP's `_meta` key
    rules and its values must be JSON."""
    if meta is None:
        return None
    if not isinstance(meta, Mapping):
        raise TypeError(f"{owner}: meta must be a dict, not {type(meta).__name__}")
    for key in meta:
        if not isinstance(key, str) or not _META_KEY.match(key):
            raise ValueError(
                f"{owner}: meta key {key!r} is not a valid _meta key "
                "(an optional 'com.example/' prefix, then letters, digits, '-', '_' or '.')"
            )
    try:
        copy: JsonObject = json.loads(json.dumps(dict(meta), allow_nan=False))
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{owner}: meta must hold JSON values only: {exc}") from None
    return copy


def _checked(adapter: TypeAdapter[Any], value: Any, owner: str, option: str) -> Any:
    try:
        return adapter.validate_python(value)
    except pydantic.ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in error['loc']) or option}: {error['msg']}"
            for error in exc.errors(include_url=False)
        )
        raise ValueError(f"{owner}: invalid {option}: {problems}") from None


@dataclass(frozen=True, slots=True)
class Extras:
    """The checked `title`, `icons`, `annotations` and `_meta` of one tool, resource or
    prompt, put into its listing entry by `put_into`."""

    title: str | None = None
    icons: tuple[JsonObject, ...] = ()
    annotations: JsonObject | None = None
    meta: JsonObject | None = None

    def put_into(self, entry: JsonObject) -> None:
        if self.title is not None:
            entry["title"] = self.title
        if self.icons:
            entry["icons"] = [dict(icon) for icon in self.icons]
        if self.annotations is not None:
            entry["annotations"] = dict(self.annotations)
        if self.meta is not None:
            entry["_meta"] = dict(self.meta)


NO_EXTRAS: Final = Extras()
"""No title, icons, annotations or `_meta`."""
