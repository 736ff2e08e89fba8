"""An image's tokens, by its provider's published rule (see :mod:`slotmagic._core.vision`
for which rule a model uses and the sources).

Checked against the providers' own worked examples in ``tests/test_images.py``: OpenAI's
1024x1024 → 765 and 2048x4096 → 1,105 tokens (tiles, gpt-4o), 1024x1024 → 1,024 and
1800x2400 → 1,452 patches; Anthropic's 200x200 → 54, 1000x1000 → 1,334 and 1092x1092 →
1,590 tokens.
"""

from __future__ import annotations

import math

from .._core.images import Image, anthropic_image_tokens
from .._core.vision import ImageRule, image_rule, takes_images

__all__ = ["anthropic_image_tokens", "image_tokens", "openai_patch_tokens", "openai_tile_tokens"]

_TILE, _FIT, _SHORT = 512, 2048, 768
_PATCH, _MAX_PATCHES = 32, 1536


def openai_tile_tokens(width: int, height: int, base: int = 85, per_tile: int = 170) -> int:
    """High detail: fit within 2048x2048, then the shortest side down to 768, then ``base``
    plus ``per_tile`` for each 512 px tile it covers."""
    scale = min(1.0, _FIT / max(width, height))
    w, h = width * scale, height * scale
    if min(w, h) > _SHORT:
        scale = _SHORT / min(w, h)
        w, h = w * scale, h * scale
    return base + per_tile * math.ceil(w / _TILE) * math.ceil(h / _TILE)


def openai_patch_tokens(width: int, height: int, multiplier: float = 1.0) -> int:
    """32 px patches to cover the image, scaled down to at most 1,536 of them, times the
    model's multiplier."""
    patches = math.ceil(width / _PATCH) * math.ceil(height / _PATCH)
    if patches > _MAX_PATCHES:
        shrink = math.sqrt(_PATCH * _PATCH * _MAX_PATCHES / (width * height))
        w, h = width * shrink / _PATCH, height * shrink / _PATCH
        shrink *= min(math.floor(w) / w, math.floor(h) / h)
        patches = math.ceil(width * shrink / _PATCH) * math.ceil(height * shrink / _PATCH)
    return math.ceil(min(patches, _MAX_PATCHES) * multiplier)


def rule_tokens(rule: ImageRule, width: int, height: int) -> int:
    if rule.kind == "tiles":
        return openai_tile_tokens(width, height, rule.base, rule.per_tile)
    if rule.kind == "patches":
        return openai_patch_tokens(width, height, rule.multiplier)
    return anthropic_image_tokens(width, height)


def image_tokens(model: str | None, image: Image) -> int:
    """What ``image`` costs ``model`` (None: the estimate); 0 for a model that takes no images
    (it is sent a note instead, counted with the text)."""
    if model is None:
        return anthropic_image_tokens(image.width, image.height)
    if not takes_images(model):
        return 0
    return rule_tokens(image_rule(model), image.width, image.height)
