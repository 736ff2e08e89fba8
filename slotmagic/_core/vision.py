"""Which models take images, and by which rule each provider counts an image's tokens.

Model facts, decided by the model's name alone (pure, so that counting, below the providers in
the layers, can use them; windows come from :mod:`slotmagic.providers._catalog`): a model named
here as taking no images has an image refused in one line before anything is sent. An
``openai:`` or ``ollama:`` model whose name says nothing either way (a server's own model) is
an Ollama text model when it is ``ollama:`` and is let through when it is ``openai:`` (the
server answers for itself).

The token rules (:mod:`slotmagic.tokens._images` computes them):

- OpenAI, https://platform.openai.com/docs/guides/images-vision#calculating-costs: *tiles*
  (gpt-4o, gpt-4.1, gpt-4.5, gpt-5, o1, o3: a base plus a cost per 512 px tile after scaling)
  and *patches* (gpt-4.1-mini/nano, gpt-5-mini/nano, o4-mini: 32 px patches, at most 1,536,
  times a multiplier);
- Anthropic, https://docs.anthropic.com/en/docs/build-with-claude/vision: width x height / 750
  after scaling to at most 1,568 px on the long edge and about 1,600 tokens;
- everything else (Ollama, echo): Anthropic's rule, as an estimate.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["OPENAI_DEFAULT_RULE", "ImageRule", "image_rule", "no_images_reason", "takes_images"]

RuleKind = Literal["tiles", "patches", "pixels"]


@dataclass(frozen=True, slots=True)
class ImageRule:
    kind: RuleKind
    base: int = 0  # tiles: tokens every image costs
    per_tile: int = 0  # tiles: tokens per 512 px tile
    multiplier: float = 1.0  # patches: what a patch is billed as


_PIXELS = ImageRule("pixels")
# Longest prefix first. Sources: the OpenAI page above ("Calculating costs", its two tables).
_OPENAI_RULES: tuple[tuple[str, ImageRule], ...] = (
    ("gpt-4.1-mini", ImageRule("patches", multiplier=1.62)),
    ("gpt-4.1-nano", ImageRule("patches", multiplier=2.46)),
    ("gpt-5-mini", ImageRule("patches", multiplier=1.62)),
    ("gpt-5-nano", ImageRule("patches", multiplier=2.46)),
    ("o4-mini", ImageRule("patches", multiplier=1.72)),
    ("gpt-4o-mini", ImageRule("tiles", 2833, 5667)),
    ("gpt-5", ImageRule("tiles", 70, 140)),
    ("o1", ImageRule("tiles", 75, 150)),
    ("o3", ImageRule("tiles", 75, 150)),
    ("computer-use", ImageRule("tiles", 65, 129)),
)
OPENAI_DEFAULT_RULE = ImageRule("tiles", 85, 170)  # gpt-4o, gpt-4.1, gpt-4.5, gpt-4-turbo

# Names that take no images: OpenAI's text-only models, Anthropic's models before Claude 3.
_OPENAI_TEXT_ONLY = ("gpt-3.5", "o1-mini", "o1-preview", "o3-mini", "text-", "davinci", "babbage")
_OPENAI_GPT4_TEXT = ("gpt-4", "gpt-4-0314", "gpt-4-0613", "gpt-4-32k")
_ANTHROPIC_TEXT_ONLY = ("claude-2", "claude-instant", "claude-1")
# Ollama's vision models (https://ollama.com/search?c=vision), by name.
_OLLAMA_VISION = (
    "llava", "bakllava", "llama3.2-vision", "llama4", "gemma3", "qwen2.5vl", "qwen2-vl", "qwen3-vl", "minicpm-v",
    "moondream", "granite3.2-vision", "mistral-small3.1", "mistral-small3.2", "llava-llama3", "llava-phi3",
)  # fmt: skip
_OLLAMA_TEXT_SIZES = ("gemma3:1b", "gemma3:270m")


def _split(model: str) -> tuple[str, str]:
    provider, sep, name = model.partition(":")
    if not sep:
        return model, ""
    return provider, name.lower().removeprefix("openai/")


def no_images_reason(model: str) -> str | None:
    """Why ``model`` cannot be sent an image, or None when it takes them."""
    provider, name = _split(model)
    if provider == "openai" and (name.startswith(_OPENAI_TEXT_ONLY) or name in _OPENAI_GPT4_TEXT):
        return f"{model} takes no images"
    elif provider == "anthropic" and name.startswith(_ANTHROPIC_TEXT_ONLY):
        return f"{model} takes no images (Claude 3 and later do)"
    elif provider == "ollama" and (not name.startswith(_OLLAMA_VISION) or name.startswith(_OLLAMA_TEXT_SIZES)):
        return f"{model} is not one of Ollama's vision models (llava, llama3.2-vision, gemma3, qwen2.5vl, …)"
    return None


def takes_images(model: str) -> bool:
    return no_images_reason(model) is None


def image_rule(model: str) -> ImageRule:
    """How ``model``'s provider counts an image's tokens."""
    provider, name = _split(model)
    if provider != "openai":
        return _PIXELS
    for prefix, rule in _OPENAI_RULES:
        if name.startswith(prefix):
            return rule
    return OPENAI_DEFAULT_RULE
