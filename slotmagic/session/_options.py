"""``session.options``: how a session's turns run (tool rounds, prompt cache, compaction, fan-out).

Each setting is the one of the same name in ``%config SlotMagic``; the notebook's workspace
follows those traitlets, and a script sets them here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .._core.checks import check_flag, check_whole
from .._engine.run.fanout import MAX_CONCURRENCY
from .._engine.run.turn import AUTO_COMPACT, TurnEngine
from .._errors import ConfigError
from ..tools._variables import READ_VARIABLE, read_variable_tool
from ._checks import check_model, check_windows


class Options:
    """The settings of one session's turns, checked when set."""

    def __init__(self, engine: TurnEngine) -> None:
        self._engine = engine
        self._max_concurrency = MAX_CONCURRENCY

    def __repr__(self) -> str:
        names = ("max_tool_rounds", "prompt_cache", "namespace_threshold", "auto_compact", "compaction_model")
        shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in (*names, "max_concurrency"))
        return f"<Options {shown}>"

    @property
    def max_tool_rounds(self) -> int:
        """How many rounds of tool calls a turn may take before it stops (8)."""
        return self._engine.max_tool_rounds

    @max_tool_rounds.setter
    def max_tool_rounds(self, value: int) -> None:
        self._engine.max_tool_rounds = check_whole(value, "max_tool_rounds", minimum=1)

    @property
    def prompt_cache(self) -> bool:
        """Mark each request's stable prefix for the provider's prompt cache (Anthropic's
        ``cache_control``; OpenAI caches a repeated prefix by itself). On by default."""
        return bool(self._engine.prompt_cache)

    @prompt_cache.setter
    def prompt_cache(self, value: bool) -> None:
        self._engine.prompt_cache = check_flag(value, "prompt_cache")

    @property
    def namespace_threshold(self) -> int:
        """Tool results larger than this many bytes are kept aside (2,048 by default)."""
        return self._engine.namespace.threshold

    @namespace_threshold.setter
    def namespace_threshold(self, value: int) -> None:
        self._engine.namespace.threshold = check_whole(value, "namespace_threshold", minimum=1)

    @property
    def context_windows(self) -> dict[str, int]:
        """Context windows that win over the model data (genai-prices, an Ollama server): ``{"openai:my-model":
        32768, "ollama:*": 8192}``; budgets of slots without their own follow them."""
        return dict(self._engine.context_windows)

    @context_windows.setter
    def context_windows(self, value: Mapping[str, int]) -> None:
        self._engine.context_windows = check_windows(value)

    @property
    def auto_compact(self) -> str:
        """What a turn past the compaction threshold does: "on" compacts first, "ask" stops with
        the numbers and the commands to review the summary (``CompactionNeeded``), "off" refuses."""
        return self._engine.auto_compact

    @auto_compact.setter
    def auto_compact(self, value: str) -> None:
        if value not in AUTO_COMPACT:
            raise ConfigError(f"auto_compact must be one of {', '.join(AUTO_COMPACT)}, not {value!r:.60}")
        self._engine.auto_compact = value

    @property
    def compaction_model(self) -> str | None:
        """The model that writes compaction summaries; None: the turn's own model."""
        return self._engine.compaction_model

    @compaction_model.setter
    def compaction_model(self, value: str | None) -> None:
        self._engine.compaction_model = None if not value else check_model(value)

    @property
    def max_concurrency(self) -> int:
        """How many requests of a fan-out are in flight at once (4)."""
        return self._max_concurrency

    @max_concurrency.setter
    def max_concurrency(self, value: int) -> None:
        self._max_concurrency = check_whole(value, "max_concurrency", minimum=1)

    def allow_variables(self, namespace: Mapping[str, Any] | None) -> None:
        """Let the opt-in ``read_variable`` tool read ``namespace`` (a kernel's ``user_ns``;
        None: no namespace). It is offered only to a turn with ``read_variables=True`` or whose
        tools (or its slot's) name it; it never evaluates code."""
        if namespace is None:
            self._engine.optional_tools.pop(READ_VARIABLE, None)
        else:
            self._engine.optional_tools[READ_VARIABLE] = read_variable_tool(namespace)
