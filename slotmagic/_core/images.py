"""Images in messages: the image part of a message's structured content.

A message's ``content`` stays its text; an :class:`Image` sits at a character offset in it
(``at``), so the message reads as text, image, text … in order (:func:`parts`), and
everything that reads text (search, compaction, diff) keeps working on ``content``. The bytes
are kept base64-encoded, as every provider sends them, with the pixel size read from the
file's header (no imaging library needed), which the image-token rules are computed from.
"""

from __future__ import annotations

import base64
import binascii
import math
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .._errors import ConfigError

MEDIA_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")
MAX_IMAGE_BYTES = 20 * 1024 * 1024  # the largest any provider takes (OpenAI: 20 MB; Anthropic less)
_LONG_EDGE, _MAX_TOKENS = 1568, 1600


def anthropic_image_tokens(width: int, height: int) -> int:
    """Anthropic's rule, and the estimate for models without a rule of their own: width x
    height / 750, after scaling to at most 1,568 px on the long edge and about 1,600 tokens
    (the size Anthropic resizes larger images to)."""
    scale = min(1.0, _LONG_EDGE / max(width, height), math.sqrt(_MAX_TOKENS * 750 / (width * height)))
    return math.ceil(width * scale * height * scale / 750)


@dataclass(frozen=True, slots=True)
class Image:
    """An image in a message: ``data`` is base64, ``at`` how many characters of the message's
    content come before it, ``label`` what it was attached as (``fig``, ``Out[7]``)."""

    media_type: str
    data: str
    width: int
    height: int
    at: int = 0
    label: str = ""

    def __post_init__(self) -> None:
        if self.media_type not in MEDIA_TYPES:
            raise ConfigError(f"images must be one of {', '.join(MEDIA_TYPES)}, not {self.media_type!r:.40}")
        if self.width < 1 or self.height < 1:
            raise ConfigError(f"an image needs a size of at least 1x1 pixels, not {self.width}x{self.height}")

    @classmethod
    def from_bytes(cls, raw: bytes, *, label: str = "", at: int = 0) -> Image:
        """An image from a PNG, JPEG, GIF or WebP file's bytes (type and size read from them)."""
        if not isinstance(raw, (bytes, bytearray)) or not raw:
            raise ConfigError("an image needs the bytes of a PNG, JPEG, GIF or WebP file")
        if len(raw) > MAX_IMAGE_BYTES:
            raise ConfigError(f"{label or 'the image'} is {len(raw):,} bytes; providers take images up to 20 MB")
        media_type, width, height = image_info(bytes(raw))
        return cls(media_type, base64.b64encode(raw).decode("ascii"), width, height, at, label)

    @property
    def raw(self) -> bytes:
        return base64.b64decode(self.data)

    @property
    def size(self) -> int:
        """The file's size in bytes."""
        return len(self.data) * 3 // 4 - self.data[-2:].count("=")

    @property
    def digest(self) -> str:
        """A short content hash: two attachments of the same picture are the same."""
        import hashlib  # here: every kernel imports this module, few attach a picture

        return hashlib.sha256(self.data.encode("ascii")).hexdigest()[:16]

    @property
    def suffix(self) -> str:
        return {"image/jpeg": ".jpg"}.get(self.media_type, "." + self.media_type.split("/")[1])

    def data_url(self) -> str:
        return f"data:{self.media_type};base64,{self.data}"

    def describe(self) -> str:
        """``image/png 640x480, 12,345 bytes``."""
        return f"{self.media_type} {self.width}x{self.height}, {self.size:,} bytes"

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"media_type": self.media_type, "data": self.data}
        out.update(width=self.width, height=self.height, at=self.at)
        if self.label:
            out["label"] = self.label
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Image:
        return cls(
            str(data["media_type"]), str(data["data"]), int(data["width"]), int(data["height"]),
            int(data.get("at") or 0), str(data.get("label") or ""),
        )  # fmt: skip


@dataclass(frozen=True, slots=True)
class TextPart:
    """A text part of a message's structured content."""

    text: str


Part = TextPart | Image


def parts(content: str, images: Sequence[Image]) -> list[Part]:
    """The message's content in order: text and images (empty text between them left out)."""
    out: list[Part] = []
    at = 0
    for image in sorted(images, key=lambda i: i.at):
        cut = min(max(image.at, at), len(content))
        if content[at:cut]:
            out.append(TextPart(content[at:cut]))
        out.append(image)
        at = cut
    if content[at:] or not out:
        out.append(TextPart(content[at:]))
    return out


def from_parts(items: Sequence[Part | str]) -> tuple[str, tuple[Image, ...]]:
    """(content, images) of parts in order: the text joined as is, each image placed at the
    length of the text before it."""
    text: list[str] = []
    images: list[Image] = []
    length = 0
    for item in items:
        if isinstance(item, str):
            item = TextPart(item)
        if isinstance(item, TextPart):
            text.append(item.text)
            length += len(item.text)
        elif isinstance(item, Image):
            images.append(Image(item.media_type, item.data, item.width, item.height, length, item.label))
        else:
            raise ConfigError(f"a message's parts are text and Image values, not {type(item).__name__}")
    return "".join(text), tuple(images)


def check_images(images: object) -> tuple[Image, ...]:
    if isinstance(images, list):
        images = tuple(images)
    if not isinstance(images, tuple) or not all(isinstance(i, Image) for i in images):
        raise ConfigError(f"images must be a list of Image values, not {images!r:.60}")
    return images


# -- reading a file's header ----------------------------------------------------------------------


def image_info(raw: bytes) -> tuple[str, int, int]:
    """(media type, width, height) of a PNG, JPEG, GIF or WebP file; ConfigError otherwise."""
    try:
        if raw.startswith(b"\x89PNG\r\n\x1a\n") and raw[12:16] == b"IHDR":
            width, height = struct.unpack(">II", raw[16:24])
            return "image/png", width, height
        if raw.startswith(b"GIF8"):
            width, height = struct.unpack("<HH", raw[6:10])
            return "image/gif", width, height
        if raw.startswith(b"\xff\xd8"):
            return ("image/jpeg", *_jpeg_size(raw))
        if raw.startswith(b"RIFF") and raw[8:12] == b"WEBP":
            return ("image/webp", *_webp_size(raw))
    except (struct.error, IndexError, ValueError, binascii.Error):
        pass
    raise ConfigError("not an image slotmagic can send: PNG, JPEG, GIF and WebP files are taken")


def _jpeg_size(raw: bytes) -> tuple[int, int]:
    i = 2
    while i + 9 < len(raw):
        if raw[i] != 0xFF:
            raise ValueError("not a JPEG marker")
        marker = raw[i + 1]
        if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7:
            i += 2
            continue
        length = struct.unpack(">H", raw[i + 2 : i + 4])[0]
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):  # a start of frame
            height, width = struct.unpack(">HH", raw[i + 5 : i + 9])
            return width, height
        i += 2 + length
    raise ValueError("no frame header")


def _webp_size(raw: bytes) -> tuple[int, int]:
    chunk = raw[12:16]
    if chunk == b"VP8X":
        return 1 + int.from_bytes(raw[24:27], "little"), 1 + int.from_bytes(raw[27:30], "little")
    if chunk == b"VP8L":
        bits = int.from_bytes(raw[21:25], "little")
        return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
    if chunk == b"VP8 ":
        width, height = struct.unpack("<HH", raw[26:30])
        return width & 0x3FFF, height & 0x3FFF
    raise ValueError("unknown WebP chunk")
