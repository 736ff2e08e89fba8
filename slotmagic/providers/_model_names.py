"""Model-name patterns: the settings that name models by pattern (``openai_reasoning_models``,
``openai_responses_models``) and how a model string matches one."""

from __future__ import annotations

from fnmatch import fnmatchcase

from .._errors import ConfigError

__all__ = ["DEFAULT_OPENAI_REASONING_MODELS", "matches_model", "model_patterns"]

# OpenAI's reasoning models, by name: they take the system prompt as a "developer" message
# and max_completion_tokens, wherever they are served (api.openai.com, Azure, a proxy).
DEFAULT_OPENAI_REASONING_MODELS = "o1*,o3*,o4*,gpt-5*"


def model_patterns(value: str, source: str) -> tuple[str, ...]:
    """A comma-separated list of model-name patterns (``*`` and ``?`` as in file names), or
    ``none`` for no model; ConfigError naming ``source`` when it is neither."""
    text = value.strip()
    if text.lower() == "none":
        return ()
    patterns = tuple(p.strip() for p in text.split(","))
    if not text or not all(patterns) or any(any(c.isspace() for c in p) for p in patterns):
        raise ConfigError(
            f"{source} must be model-name patterns separated by commas, such as {DEFAULT_OPENAI_REASONING_MODELS!r} "
            f"or 'my-o3-deployment', or 'none', not {value!r}"
        )
    return patterns


def matches_model(model: str, patterns: tuple[str, ...]) -> bool:
    """Whether ``model`` (or its last ``/`` part: ``openai/o3`` on OpenRouter) matches a pattern,
    ignoring case."""
    name = model.strip().lower()
    short = name.rpartition("/")[2]
    return any(fnmatchcase(name, p.lower()) or fnmatchcase(short, p.lower()) for p in patterns)
