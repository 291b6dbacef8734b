"""The field checks and JSON helpers the content types share, and reading a file with
its MIME type."""

from __future__ import annotations

import base64
import mimetypes
import os
import re
from pathlib import Path
from typing import Any, Final

from mcp_asgi.protocol.jsonrpc import JsonObject
from mcp_asgi.server.metadata import check_annotations, check_meta

_URI: Final = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*:\S*\Z")

# The usual types by file suffix, before the system's table (mimetypes), which differs
# between hosts (audio/wav or audio/x-wav).
_TYPES_BY_SUFFIX: Final = {
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".gif": "image/gif",
    ".webp": "image/webp",
    ".svg": "image/svg+xml",
    ".bmp": "image/bmp",
    ".ico": "image/x-icon",
    ".avif": "image/avif",
    ".wav": "audio/wav",
    ".mp3": "audio/mpeg",
    ".ogg": "audio/ogg",
    ".oga": "audio/ogg",
    ".opus": "audio/opus",
    ".flac": "audio/flac",
    ".aac": "audio/aac",
    ".m4a": "audio/mp4",
    ".weba": "audio/webm",
    ".json": "application/json",
    ".pdf": "application/pdf",
    ".txt": "text/plain",
    ".md": "text/markdown",
    ".csv": "text/csv",
    ".html": "text/html",
}


def kind(value: Any) -> str:
    """What a value is, for an error message: `a dict`, `an int`, `None`."""
    if value is None:
        return "None"
    name = type(value).__name__
    return f"{'an' if name[0].lower() in 'aeiou' else 'a'} {name}"


def need_str(owner: object, name: str, value: Any) -> None:
    if not isinstance(value, str):
        raise TypeError(f"{type(owner).__name__}.{name} must be a str, not {kind(value)}")


def need_optional_str(owner: object, name: str, value: Any) -> None:
    if value is not None:
        need_str(owner, name, value)


def need_bytes(owner: object, name: str, value: Any) -> None:
    """`value` must be bytes (a bytearray or memoryview is copied into bytes)."""
    if not isinstance(value, (bytes, bytearray, memoryview)):
        hint = " (the raw bytes, not base64 text)" if isinstance(value, str) else ""
        raise TypeError(f"{type(owner).__name__}.{name} must be bytes, not {kind(value)}{hint}")
    if not isinstance(value, bytes):
        object.__setattr__(owner, name, bytes(value))


def need_uri(owner: object, uri: Any) -> None:
    need_str(owner, "uri", uri)
    if not _URI.match(uri):
        raise ValueError(
            f"{type(owner).__name__}.uri {uri!r} is not a URI with a scheme, e.g. 'file:///x'"
        )


def need_media_type(owner: object, mime_type: Any, family: str) -> None:
    need_str(owner, "mime_type", mime_type)
    if not mime_type.startswith(f"{family}/"):
        raise ValueError(
            f"{type(owner).__name__}.mime_type must be an {family}/... type, not {mime_type!r}"
        )


def check_extras(block: Any) -> None:
    """The block's `annotations` and `meta`, if any, have their MCP shapes."""
    owner = type(block).__name__
    check_annotations(block.annotations, owner=owner)
    check_meta(block.meta, owner=owner)


def with_extras(block: Any, entry: JsonObject) -> JsonObject:
    """`entry` with the block's `annotations` and `_meta`, if it has them."""
    owner = type(block).__name__
    annotations = check_annotations(getattr(block, "annotations", None), owner=owner)
    if annotations is not None:
        entry["annotations"] = annotations
    meta = check_meta(block.meta, owner=owner)
    if meta is not None:
        entry["_meta"] = meta
    return entry


def base64_text(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def guess_type(path: Path) -> str | None:
    """The MIME type a file's suffix suggests, or None."""
    return _TYPES_BY_SUFFIX.get(path.suffix.lower()) or mimetypes.guess_type(path.name)[0]


def read_media(
    path: str | os.PathLike[str], mime_type: str | None, family: str
) -> tuple[bytes, str]:
    """A file's bytes and its `family/...` type: `mime_type`, or guessed from its suffix."""
    file = Path(path)
    if mime_type is None:
        mime_type = guess_type(file)
        if mime_type is None or not mime_type.startswith(f"{family}/"):
            raise ValueError(
                f"cannot tell the {family} type of {file.name!r} from its suffix: "
                f"give mime_type='{family}/...'"
            )
    return file.read_bytes(), mime_type
