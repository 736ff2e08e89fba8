"""An image file checked before it is attached: whole, and of a size a picture can be.

A file's header names its type and size, and a model is sent what the file holds, so a file
cut short (a PNG truncated to 40 bytes, a bare header) or one claiming a size its bytes cannot
hold (a 68-byte PNG said to be 20000x20000) would be stored, budgeted as a full image and sent
with every later request of its slot. Each format is read enough to tell: a PNG's chunks
(their CRCs; its image data inflated and counted up to the rows its size needs, never kept),
a JPEG's markers, a GIF's blocks' end, a WebP's RIFF length. No imaging library is needed.
What a provider does with a large picture (scaling it down) is its request's business, not
this module's: here only sizes no picture has are refused.

Each refusal is one line (``ConfigError``) naming the attachment and saying what to do.
"""

from __future__ import annotations

import struct
import zlib

from .._errors import ConfigError
from .images import image_info

__all__ = ["MAX_PIXELS", "MAX_SIDE", "check_image_file", "is_svg"]

MAX_SIDE = 16_384  # pixels on a side: larger is no photograph or plot (and no model takes it)
MAX_PIXELS = 100_000_000  # pixels in all (a 10,000 x 10,000 picture)
_PNG = b"\x89PNG\r\n\x1a\n"
_CHANNELS = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}  # a PNG's colour type -> samples per pixel


class _Broken(ValueError):
    """Why a file is not a whole image."""


def check_image_file(raw: bytes, label: str) -> tuple[str, int, int]:
    """(media type, width, height) of a whole PNG, JPEG, GIF or WebP file of a plausible size;
    ``ConfigError`` in one line otherwise."""
    try:
        media_type, width, height = image_info(raw)
    except ConfigError:
        raise ConfigError(f"{label}: not a whole PNG, JPEG, GIF or WebP file (its header cannot be read)") from None
    kind = media_type.split("/")[1].upper()
    if width < 1 or height < 1:
        raise ConfigError(f"{label}: the {kind} file says it is {width}x{height} pixels: an empty image")
    if max(width, height) > MAX_SIDE or width * height > MAX_PIXELS:
        raise ConfigError(
            f"{label}: the {kind} file says it is {width:,}x{height:,} pixels, more than a picture can be "
            f"(at most {MAX_SIDE:,} on a side and {MAX_PIXELS // 1_000_000} megapixels); scale it down first"
        )
    try:
        _WHOLE[media_type](raw, width, height)
    except (_Broken, struct.error, IndexError, zlib.error) as exc:
        why = str(exc) if isinstance(exc, _Broken) else f"it cannot be read: {exc}"
        raise ConfigError(f"{label}: the {kind} file is not whole ({why}); attach the whole file") from None
    return media_type, width, height


def is_svg(raw: bytes | str) -> bool:
    """Whether bytes or text are an SVG drawing (its ``<svg`` element, maybe after an XML
    declaration, a doctype or comments)."""
    head = raw[:2048]
    if isinstance(head, bytes):
        head = head.decode("utf-8", "replace")
    head = head.lstrip("\ufeff \t\r\n").lower()
    return head.startswith(("<svg", "<?xml", "<!doctype svg", "<!--")) and "<svg" in head


# -- each format ------------------------------------------------------------------------------------


def _png(raw: bytes, width: int, height: int) -> None:
    """Every chunk whole (its length within the file, its CRC right), IHDR first, IDAT's data
    inflating to exactly the rows the size needs, and IEND last."""
    at, data, header = len(_PNG), zlib.decompressobj(), b""
    expected = inflated = 0
    seen_idat = False
    while True:
        if at + 8 > len(raw):
            raise _Broken("it ends before its IEND chunk")
        length, kind = struct.unpack(">I4s", raw[at : at + 8])
        end = at + 12 + length
        if end > len(raw):
            raise _Broken(f"its {kind.decode('latin-1')!r} chunk runs past the end of the file")
        body = raw[at + 8 : at + 8 + length]
        if zlib.crc32(kind + body) != struct.unpack(">I", raw[end - 4 : end])[0]:
            raise _Broken(f"its {kind.decode('latin-1')!r} chunk is damaged (its CRC does not match)")
        if at == len(_PNG):
            header = body
            expected = _png_bytes(header, width, height)
        elif kind == b"IDAT":
            seen_idat = True
            if inflated < expected:  # what comes after the rows the size needs is not read
                inflated += _inflate(data, body, expected - inflated)
        elif kind == b"IEND":
            break
        at = end
    if not seen_idat:
        raise _Broken("it holds no image data")
    if inflated < expected:
        inflated += len(data.flush(expected - inflated))
    if inflated < expected:
        raise _Broken(f"its image data holds {inflated:,} of the {expected:,} bytes its size needs")


def _png_bytes(header: bytes, width: int, height: int) -> int:
    """How many bytes a PNG's rows inflate to (each row a filter byte and its samples; an
    interlaced image's seven passes, each with its own rows)."""
    if len(header) != 13:
        raise _Broken("its IHDR chunk is not 13 bytes")
    depth, colour, interlaced = header[8], header[9], header[12]
    if colour not in _CHANNELS or depth not in (1, 2, 4, 8, 16):
        raise _Broken(f"its colour type {colour} or bit depth {depth} is not PNG's")
    bits = _CHANNELS[colour] * depth

    def rows(w: int, h: int) -> int:
        return 0 if w == 0 or h == 0 else h * (1 + (w * bits + 7) // 8)

    if not interlaced:
        return rows(width, height)
    passes = ((0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2), (0, 1, 1, 2))
    return sum(rows((width - x + dx - 1) // dx, (height - y + dy - 1) // dy) for x, y, dx, dy in passes)


def _inflate(stream: zlib._Decompress, chunk: bytes, room: int) -> int:
    """Feed ``chunk`` to the inflater, up to ``room`` more bytes (what the size still needs);
    the bytes it made, counted, not kept (a megabyte at a time)."""
    made, pending = 0, chunk
    while pending and made < room:
        out = stream.decompress(pending, min(1 << 20, room - made))
        made += len(out)
        pending = stream.unconsumed_tail
    return made


def _jpeg(raw: bytes, width: int, height: int) -> None:
    """A start of scan after the frame header, and the end-of-image marker after it."""
    scan = raw.find(b"\xff\xda", 2)
    if scan < 0:
        raise _Broken("it holds no image data (no start of scan)")
    if raw.rfind(b"\xff\xd9") < scan:
        raise _Broken("it ends before its end-of-image marker")


def _gif(raw: bytes, width: int, height: int) -> None:
    """An image descriptor, and the trailer byte at the end (zero padding after it allowed)."""
    if len(raw) < 14 or b"\x2c" not in raw[13:]:
        raise _Broken("it holds no image")
    if not raw.rstrip(b"\x00").endswith(b"\x3b"):
        raise _Broken("it ends before its trailer")


def _webp(raw: bytes, width: int, height: int) -> None:
    """The RIFF length the header gives, all there."""
    size = struct.unpack("<I", raw[4:8])[0]
    if len(raw) < size + 8:
        raise _Broken(f"it holds {len(raw) - 8:,} of the {size:,} bytes its header gives")


_WHOLE = {"image/png": _png, "image/jpeg": _jpeg, "image/gif": _gif, "image/webp": _webp}
