"""The fast counter (rs-bpe, the ``fast-count`` extra; the test extra installs it) counts exactly
what tiktoken counts, and slotmagic counts the same with it and without it."""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slotmagic.tokens import ENCODINGS, TokenCounter
from slotmagic.tokens import _counter as counter_module
from slotmagic.tokens import _fast as fast_module
from slotmagic.tokens._fast import FAST_VERSION, fast_counter

KNOWN = json.loads((Path(__file__).parent / "known_token_ids.json").read_text(encoding="utf-8"))["samples"]
MODELS = {"o200k_base": "openai:gpt-4o", "cl100k_base": "openai:gpt-4"}
# Pieces of every kind the split patterns treat differently: scripts with and without spaces,
# marks, contractions, digits, runs of whitespace and line breaks, emoji sequences.
PIECES = [
    *"abc XYZ 0123456789 .,;:'\"!?()[]{}<>-_=+*/\\|@#$%^&~`",
    *"éüßñçøåœ",
    *"房东扣留了我押金，。、「」",  # noqa: RUF001 (CJK punctuation is the point)
    *"日本語のテキストカタカナ",
    *"한국어텍스트",
    *"привет мир",
    *"مرحبا",
    *["😀", "👍🏽", "🇫🇷", "\u200d", "\u0301", "\u00a0", "\u3000", "'s", "'ll", "'RE", "\r\n", "  \n", "\n \n", "\t"],
]


@pytest.fixture(params=sorted(MODELS))
def encoding(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def reference(encoding: str) -> Callable[[str], int]:
    return counter_module.tiktoken_counter(encoding)


def fast(encoding: str) -> Callable[[str], int]:
    found = fast_counter(encoding)
    assert found is not None, f"rs-bpe {FAST_VERSION} is not installed: pip install -e '.[test]'"
    return found


def test_the_fast_counter_covers_every_shipped_encoding() -> None:
    assert all(fast_counter(name) is not None for name in ENCODINGS)
    assert fast_counter("p50k_base") is None  # one it does not know: tiktoken counts it


@pytest.mark.parametrize("sample", sorted(KNOWN))
def test_known_samples_count_the_same(encoding: str, sample: str) -> None:
    text = KNOWN[sample]["text"]
    assert fast(encoding)(text) == reference(encoding)(text) == len(KNOWN[sample][encoding])


def test_random_text_of_every_script_counts_the_same(encoding: str) -> None:
    rng = random.Random(encoding)
    ours, theirs = fast(encoding), reference(encoding)
    for _ in range(20_000):
        text = "".join(rng.choice(PIECES) for _ in range(rng.randint(0, 60)))
        assert ours(text) == theirs(text), repr(text)
    for _ in range(50):  # long messages: pieces thousands of bytes long
        text = "".join(rng.choice(PIECES) for _ in range(2_000))
        assert ours(text) == theirs(text)


@settings(max_examples=1_500, deadline=None)
@given(text=st.text(st.characters(exclude_categories=["Cs"]), max_size=200))
def test_any_text_counts_the_same(text: str) -> None:
    for encoding in MODELS:
        assert fast(encoding)(text) == reference(encoding)(text)


@pytest.fixture
def without_fast_counter(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(counter_module, "fast_counter", lambda encoding: None)
    counter_module._text_counter.cache_clear()
    yield
    counter_module._text_counter.cache_clear()


def test_counts_are_the_same_with_and_without_it(encoding: str, without_fast_counter: None) -> None:
    texts = [KNOWN[s]["text"] for s in sorted(KNOWN)]
    slow = [TokenCounter(MODELS[encoding], encoding).count_text(t) for t in texts]
    counter_module._text_counter.cache_clear()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(counter_module, "fast_counter", fast_counter)
        quick = [TokenCounter(MODELS[encoding], encoding).count_text(t) for t in texts]
    assert quick == slow == [len(KNOWN[s][encoding]) for s in sorted(KNOWN)]


def test_another_rs_bpe_version_is_not_trusted() -> None:
    # Only the version compared with tiktoken counts; any other leaves counting to tiktoken.
    fast_counter.cache_clear()
    try:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(fast_module, "version", lambda name: "0.2.0")
            assert fast_counter("o200k_base") is None
    finally:
        fast_counter.cache_clear()
    assert fast_counter("o200k_base") is not None
