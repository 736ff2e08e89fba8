"""Images within each provider's documented limits, fitted when a request is made.

The limits, by wire format (what a request to that API may carry):

- Anthropic, https://docs.anthropic.com/en/docs/build-with-claude/vision ("Evaluate image
  size", "FAQ"): at most 8,000 px on either side; at most 2,000 px on either side when the
  request holds more than 20 images; at most 5 MB per image; at most 100 images per request.
- OpenAI, https://platform.openai.com/docs/guides/images-vision ("Image input requirements"):
  at most 50 MB of images in one request and 500 images; 20 MB per image (what slotmagic takes
  at all). The API scales large images itself (to 2,048 px, then 768 px on the short side), so
  pixels are not limited here.

An image over a pixel or byte limit is downscaled, its aspect kept (:func:`fitted`), as late
as the request is made: the stored image stays whole, the request, its preview and its budget
show the image as it is sent (a view step, ``_engine/steps/image_limits.py``). Downscaling
needs Pillow (``pip install pillow``; matplotlib brings it); without it, and for a request over
the count limit, the turn is refused in one line before anything is sent (:func:`refusal`).
"""

from __future__ import annotations

import base64
import io
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import lru_cache

from .._core.images import Image

__all__ = ["IMAGE_LIMITS", "ImageLimits", "fitted", "image_limits", "refusal", "target"]

_MB = 1024 * 1024


@dataclass(frozen=True, slots=True)
class ImageLimits:
    """What one request to an API may carry in images (None: no limit of that kind)."""

    side: int | None  # px on either side
    bytes: int | None  # per image (its base64 form, as sent)
    many: tuple[int, int] | None  # (more than this many images, then at most this many px a side)
    count: int | None  # images per request
    total: int | None  # bytes of images per request
    source: str


IMAGE_LIMITS: dict[str, ImageLimits] = {
    "anthropic": ImageLimits(
        8_000, 5 * _MB, (20, 2_000), 100, None, "https://docs.anthropic.com/en/docs/build-with-claude/vision"
    ),
    "openai": ImageLimits(None, 20 * _MB, None, 500, 50 * _MB, "https://platform.openai.com/docs/guides/images-vision"),
}


def image_limits(wire: str | None) -> ImageLimits | None:
    """The limits of a request in ``wire``'s format (None: none known, such as Ollama's)."""
    return IMAGE_LIMITS.get(wire) if wire is not None else None


def target(limits: ImageLimits, count: int) -> tuple[int | None, int | None]:
    """(px a side, bytes) each image of a request holding ``count`` images may take."""
    side = limits.side
    if limits.many is not None and count > limits.many[0]:
        side = limits.many[1] if side is None else min(side, limits.many[1])
    size = limits.bytes
    if limits.total is not None and count:
        share = limits.total // count
        size = share if size is None else min(size, share)
    return side, size


def _over(image: Image, side: int | None, size: int | None) -> bool:
    return (side is not None and max(image.width, image.height) > side) or (size is not None and len(image.data) > size)


def fitted(image: Image, side: int | None, size: int | None) -> Image | None:
    """``image`` downscaled (aspect kept) to at most ``side`` px a side and ``size`` bytes as
    sent; itself when it fits; None when it cannot be (Pillow missing, or a file it cannot read)."""
    if not _over(image, side, size):
        return image
    return _fit(image, side, size)


@lru_cache(maxsize=64)  # a request is made several times a turn (and for every preview): resampled once
def _fit(image: Image, side: int | None, size: int | None) -> Image | None:
    try:
        from PIL import Image as Pillow
    except ImportError:
        return None
    try:
        with Pillow.open(io.BytesIO(image.raw)) as opened:
            opened.seek(0)  # an animated GIF: its first frame
            picture = opened.convert("RGBA" if opened.mode in ("RGBA", "LA", "P") else "RGB")
    except Exception:  # a file Pillow cannot read: the request is refused with the limit's line
        return None
    width, height = picture.size
    scale = 1.0 if side is None else min(1.0, side / max(width, height))
    media = image.media_type if image.media_type in ("image/png", "image/jpeg", "image/webp") else "image/png"
    for _ in range(12):
        w, h = max(1, math.floor(width * scale)), max(1, math.floor(height * scale))
        data = _encoded(
            picture.resize((w, h), Pillow.Resampling.LANCZOS) if (w, h) != (width, height) else picture, media
        )
        if size is None or len(data) <= size:
            return replace(image, media_type=media, data=data, width=w, height=h)
        scale *= min(0.9, math.sqrt(size / len(data)) * 0.95)  # bytes go about with the pixels
    return None


def _encoded(picture: object, media: str) -> str:
    out = io.BytesIO()
    fmt = {"image/png": "PNG", "image/jpeg": "JPEG", "image/webp": "WEBP"}[media]
    if fmt == "JPEG" and getattr(picture, "mode", "RGB") != "RGB":
        picture = picture.convert("RGB")  # type: ignore[attr-defined]
    picture.save(out, fmt, **({"optimize": True} if fmt == "PNG" else {"quality": 85}))  # type: ignore[attr-defined]
    return base64.b64encode(out.getvalue()).decode("ascii")


def refusal(images: Sequence[Image], wire: str | None, model: str) -> str | None:
    """The line refusing a request that carries ``images`` to ``model`` (None: it may go): more
    images than the API takes, or one still over a limit (it could not be downscaled)."""
    limits = image_limits(wire)
    if limits is None or not images:
        return None
    if limits.count is not None and len(images) > limits.count:
        return (
            f"this request would carry {len(images):,} images; {model} takes at most {limits.count:,} in one request "
            f"({limits.source}): derive a focused slot, or exclude older messages with images "
            "(%slot exclude); nothing was sent"
        )
    side, size = target(limits, len(images))
    for image in images:
        if _over(image, side, size):
            what = image.label or "an image"
            most = ", ".join(
                s for s in (f"{side:,} px a side" if side else "", f"{size / _MB:.3g} MB" if size else "") if s
            )
            return (
                f"{what} ({image.width}x{image.height}, {len(image.data):,} bytes as sent) is over what {model} takes "
                f"in this request ({most}; {limits.source}) and could not be downscaled: install pillow "
                "(pip install pillow) to have slotmagic downscale it, or attach a smaller one; nothing was sent"
            )
    return None
