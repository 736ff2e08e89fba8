"""Image files are checked when they are attached: a file cut short, a bare header, damaged
data, or a size no picture has (a tiny PNG claiming 20000x20000) is one line naming the
attachment, and nothing is stored or sent; SVG is refused with a line saying to convert it.
Whole files of every format pass, whatever their mode, depth or interlacing."""

from __future__ import annotations

import io
import struct
import zlib
from pathlib import Path

import pytest
from PIL import Image as PILImage

from slotmagic import ConfigError, Session
from slotmagic._attach import attach
from slotmagic._core.image_check import check_image_file


def saved(image: PILImage.Image, fmt: str, **options: object) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format=fmt, **options)
    return buffer.getvalue()


def chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))


def png_claiming(width: int, height: int, rows: bytes = b"\x00\x00", interlaced: int = 0) -> bytes:
    """A small PNG whose header claims ``width`` x ``height`` (8-bit grey) over ``rows``."""
    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, interlaced)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")


ADAM7_ROWS = [1, 1, 2, 2, 2, 4, 4, 4, 4, 4, 4, 8, 8, 8, 8]  # the width of each row of each pass
PHOTO = PILImage.new("RGB", (64, 48), (200, 30, 30))
WHOLE = {
    "png": saved(PHOTO, "PNG"),
    "png-palette": saved(PHOTO.convert("P"), "PNG"),
    # Adam7's seven passes of an 8x8 picture: 1x1, 1x1, 2x1, 2x2, 4x2, 4x4, 8x4 pixels, each row
    # a filter byte and its pixels: 2 + 2 + 3 + 2*3 + 2*5 + 4*5 + 4*9 = 79 bytes
    "png-interlaced": png_claiming(8, 8, b"".join(b"\x00" + b"\x80" * w for w in ADAM7_ROWS), interlaced=1),
    "png-grey-16": saved(PHOTO.convert("I;16"), "PNG"),
    "png-1bit": saved(PHOTO.convert("1"), "PNG"),
    "png-rgba": saved(PHOTO.convert("RGBA"), "PNG"),
    "png-made-by-hand": png_claiming(1, 1, b"\x00\x7f"),
    "jpeg": saved(PHOTO, "JPEG"),
    "gif": saved(PHOTO, "GIF"),
    "webp": saved(PHOTO, "WEBP"),
}


@pytest.mark.parametrize("name", list(WHOLE))
def test_whole_files_pass(name: str) -> None:
    PILImage.open(io.BytesIO(WHOLE[name])).load()  # whole to an imaging library too
    media_type, width, height = check_image_file(WHOLE[name], name)
    assert media_type.startswith("image/") and width >= 1 and height >= 1


PNG = WHOLE["png"]
BROKEN = {
    "png cut to 40 bytes": (PNG[:40], "the PNG file is not whole"),
    "png bare signature and header": (PNG[:33], "the PNG file is not whole (it ends before its IEND chunk)"),
    "png without its last bytes": (PNG[:-5], "the PNG file is not whole"),
    "png with a damaged byte": (PNG[:50] + bytes([PNG[50] ^ 0xFF]) + PNG[51:], "(its CRC does not match)"),
    "png claiming 20000x20000": (png_claiming(20_000, 20_000), "20,000x20,000 pixels, more than a picture can be"),
    "png claiming 4000x3000 over 2 bytes": (png_claiming(4000, 3000), "its image data holds 2 of the 12,003,000"),
    "png claiming 0x5": (png_claiming(0, 5), "an empty image"),
    "jpeg cut short": (WHOLE["jpeg"][:-10], "ends before its end-of-image marker"),
    "jpeg bare header": (WHOLE["jpeg"][:200], "the JPEG file is not whole"),
    "gif cut short": (WHOLE["gif"][:-30], "the GIF file is not whole"),
    "webp cut short": (WHOLE["webp"][:-30], "the WEBP file is not whole"),
    "eight bytes of png": (PNG[:8], "its header cannot be read"),
}


@pytest.mark.parametrize("name", list(BROKEN))
def test_a_broken_or_absurd_file_is_one_line(name: str) -> None:
    raw, said = BROKEN[name]
    with pytest.raises(ConfigError) as refused:
        attach(raw, "pic")
    line = str(refused.value)
    assert line.startswith("pic: ") and said in line and "\n" not in line


def test_svg_is_refused_with_how_to_convert() -> None:
    svg = b'<?xml version="1.0"?>\n<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"></svg>'
    from IPython.display import SVG

    for value in (svg, SVG(data=svg)):
        with pytest.raises(ConfigError, match=r"^drawing: an SVG drawing; .*convert it first"):
            attach(value, "drawing")
    assert "<svg" in attach(svg.decode(), "source").text  # SVG text is the text it is


def test_nothing_is_stored_for_a_refused_image(tmp_path: Path) -> None:
    with Session.open("s", db_path=tmp_path / "s.db") as session:
        with pytest.raises(ConfigError, match="more than a picture can be"):
            session.submit_turn("What is it?", attachments={"pic": png_claiming(20_000, 20_000)})
        assert session.messages() == []
