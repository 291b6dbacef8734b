"""The content blocks of a tool result or a prompt message: text, image, audio, a link to a
resource, a resource's contents embedded."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeAlias

from typing_extensions import Self

from mcp_asgi.protocol.jsonrpc import JsonObject
from mcp_asgi.server.content._fields import (
    base64_text,
    check_extras,
    kind,
    need_bytes,
    need_media_type,
    need_optional_str,
    need_str,
    need_uri,
    read_media,
    with_extras,
)
from mcp_asgi.server.content.resources import BlobResource, TextResource
from mcp_asgi.server.metadata import Annotations, Icon, check_icons


@dataclass(frozen=True, slots=True)
class TextContent:
    """A text block: `TextContent("It is sunny.")`. A tool may return a plain `str` for
    one text block; `TextContent` adds `annotations` and `meta`."""

    text: str
    """The text."""
    annotations: Annotations | None = field(default=None, kw_only=True)
    """Hints for the client: `audience`, `priority` (0 to 1), `lastModified`."""
    meta: Mapping[str, Any] | None = field(default=None, kw_only=True)
    """The block's `_meta`."""

    def __post_init__(self) -> None:
        need_str(self, "text", self.text)
        check_extras(self)

    def to_json(self) -> JsonObject:
        """MCP's `TextContent` object."""
        return with_extras(self, {"type": "text", "text": self.text})


@dataclass(frozen=True, slots=True)
class _Media:
    """Bytes with a MIME type of one kind (`_KIND`): what `Image` and `Audio` share."""

    _KIND: ClassVar[str] = ""

    data: bytes
    """The bytes themselves (raw, not base64: they are encoded when sent)."""
    mime_type: str
    """The MIME type, of the block's kind: `image/png`, `audio/wav`, ..."""
    annotations: Annotations | None = field(default=None, kw_only=True)
    """Hints for the client: `audience`, `priority` (0 to 1), `lastModified`."""
    meta: Mapping[str, Any] | None = field(default=None, kw_only=True)
    """The block's `_meta`."""

    def __post_init__(self) -> None:
        need_bytes(self, "data", self.data)
        need_media_type(self, self.mime_type, self._KIND)
        check_extras(self)

    @classmethod
    def from_file(
        cls,
        path: str | os.PathLike[str],
        *,
        mime_type: str | None = None,
        annotations: Annotations | None = None,
        meta: Mapping[str, Any] | None = None,
    ) -> Self:
        """The contents of the file at `path`, the type guessed from its suffix (`.png`,
        `.jpg`, `.webp`, `.svg`, ... for an image; `.wav`, `.mp3`, `.ogg`, `.flac`, ... for
        audio) unless `mime_type` is given."""
        data, mime = read_media(path, mime_type, cls._KIND)
        return cls(data, mime, annotations=annotations, meta=meta)

    def to_json(self) -> JsonObject:
        """MCP's `ImageContent` or `AudioContent` object (`data` base64-encoded)."""
        entry = {"type": self._KIND, "data": base64_text(self.data), "mimeType": self.mime_type}
        return with_extras(self, entry)


@dataclass(frozen=True, slots=True)
class Image(_Media):
    """An image block from the image's bytes and an `image/...` MIME type:
    `Image(png_bytes, "image/png")`, or `Image.from_file("chart.png")`."""

    _KIND: ClassVar[str] = "image"


@dataclass(frozen=True, slots=True)
class Audio(_Media):
    """An audio block from the audio's bytes and an `audio/...` MIME type:
    `Audio(wav_bytes, "audio/wav")`, or `Audio.from_file("hello.wav")`."""

    _KIND: ClassVar[str] = "audio"


@dataclass(frozen=True, slots=True)
class ResourceLink:
    """A link to a resource the client may read with `resources/read`, without its
    contents: `ResourceLink("file:///logs/today.txt", "today.txt", mime_type="text/plain")`.
    """

    uri: str
    """The resource's URI (with a scheme)."""
    name: str
    """Its name."""
    title: str | None = field(default=None, kw_only=True)
    """A human-readable name."""
    description: str | None = field(default=None, kw_only=True)
    """What it is."""
    mime_type: str | None = field(default=None, kw_only=True)
    """Its MIME type, if known."""
    size: int | None = field(default=None, kw_only=True)
    """Its size in bytes (before any encoding), if known."""
    icons: Sequence[Icon] | None = field(default=None, kw_only=True)
    """Icons a client may show: `[{"src": "https://...", "mimeType": "image/png"}]`."""
    annotations: Annotations | None = field(default=None, kw_only=True)
    """Hints for the client: `audience`, `priority` (0 to 1), `lastModified`."""
    meta: Mapping[str, Any] | None = field(default=None, kw_only=True)
    """The link's `_meta`."""

    def __post_init__(self) -> None:
        need_uri(self, self.uri)
        need_str(self, "name", self.name)
        for name in ("title", "description", "mime_type"):
            need_optional_str(self, name, getattr(self, name))
        size = self.size
        if size is not None and (type(size) is not int or size < 0):
            raise ValueError(f"ResourceLink.size must be a whole number ≥ 0, not {size!r}")
        check_icons(self.icons, owner="ResourceLink")
        check_extras(self)

    def to_json(self) -> JsonObject:
        """MCP's `ResourceLink` object."""
        entry: JsonObject = {"type": "resource_link", "uri": self.uri, "name": self.name}
        for key, value in (
            ("title", self.title),
            ("description", self.description),
            ("mimeType", self.mime_type),
            ("size", self.size),
        ):
            if value is not None:
                entry[key] = value
        icons = check_icons(self.icons, owner="ResourceLink")
        if icons:
            entry["icons"] = list(icons)
        return with_extras(self, entry)


@dataclass(frozen=True, slots=True)
class EmbeddedResource:
    """A resource's contents inside a tool result or a prompt message:
    `EmbeddedResource(TextResource("a,b", uri="file:///data.csv", mime_type="text/csv"))`.
    """

    resource: TextResource | BlobResource
    """The contents; their `uri` is required here."""
    annotations: Annotations | None = field(default=None, kw_only=True)
    """Hints for the client: `audience`, `priority` (0 to 1), `lastModified`."""
    meta: Mapping[str, Any] | None = field(default=None, kw_only=True)
    """The block's `_meta`."""

    def __post_init__(self) -> None:
        if not isinstance(self.resource, (TextResource, BlobResource)):
            raise TypeError(
                "EmbeddedResource.resource must be a TextResource or a BlobResource, "
                f"not {kind(self.resource)}"
            )
        if self.resource.uri is None:
            raise ValueError(
                f"EmbeddedResource needs the uri of its contents: "
                f"{type(self.resource).__name__}(..., uri='scheme://...')"
            )
        check_extras(self)

    def to_json(self) -> JsonObject:
        """MCP's `EmbeddedResource` object."""
        return with_extras(self, {"type": "resource", "resource": self.resource.to_json()})


ContentBlock: TypeAlias = TextContent | Image | Audio | ResourceLink | EmbeddedResource
"""Any content block: `TextContent | Image | Audio | ResourceLink | EmbeddedResource`."""

BLOCK_TYPES = (TextContent, Image, Audio, ResourceLink, EmbeddedResource)
"""The classes of `ContentBlock`, for `isinstance`."""
