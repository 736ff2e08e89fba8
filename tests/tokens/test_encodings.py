"""The shipped rank files: the published bytes, tiktoken's own pattern and special tokens, counts
that agree with an independent tokenizer, and no network or cache directory ever used."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import tiktoken_ext.openai_public as openai_public

from slotmagic.tokens import ENCODINGS, RankFileError, TokenCounter, get_encoding
from slotmagic.tokens._encodings import EncodingSpec, load_ranks

HERE = Path(__file__).parent
KNOWN = json.loads((HERE / "known_token_ids.json").read_text(encoding="utf-8"))["samples"]


@pytest.mark.parametrize("name", sorted(ENCODINGS))
def test_shipped_rank_files_are_the_published_ones(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = ENCODINGS[name]
    ranks = load_ranks(spec)  # raises unless the file's SHA-256 is the published one
    # tiktoken's own constructor pins the same hash and builds the same encoding from the file
    seen: dict[str, Any] = {}

    def fake_load(url: str, expected_hash: str | None = None) -> dict[bytes, int]:
        seen["url"], seen["hash"] = url, expected_hash
        return ranks

    monkeypatch.setattr(openai_public, "load_tiktoken_bpe", fake_load)
    theirs = getattr(openai_public, name)()
    assert seen["hash"] == spec.sha256
    assert seen["url"].endswith(f"/{name}.tiktoken")
    assert theirs["pat_str"] == spec.pattern
    assert theirs["special_tokens"] == dict(spec.special_tokens)
    assert theirs["mergeable_ranks"] == ranks


def test_a_rank_file_that_is_not_the_published_one_is_refused() -> None:
    good = ENCODINGS["cl100k_base"]
    tampered = EncodingSpec(good.name, good.filename, "0" * 64, good.pattern, good.special_tokens, good.n_ranks)
    with pytest.raises(RankFileError, match="SHA-256"):
        load_ranks(tampered)
    missing = EncodingSpec("nope", "nope.tiktoken.gz", good.sha256, good.pattern, good.special_tokens, 1)
    with pytest.raises(RankFileError, match="reinstall slotmagic"):
        load_ranks(missing)


@pytest.mark.parametrize("name", sorted(ENCODINGS))
@pytest.mark.parametrize("sample", sorted(KNOWN))
def test_token_ids_agree_with_an_independent_tokenizer(name: str, sample: str) -> None:
    # ids from bpe-openai (a Rust implementation that does not use tiktoken): ASCII, code,
    # CJK, emoji (ZWJ sequences, flags), JSON tool arguments, special-token look-alikes
    expected = KNOWN[sample][name]
    assert get_encoding(name).encode_ordinary(KNOWN[sample]["text"]) == expected
    model = "openai:gpt-4o" if name == "o200k_base" else "openai:gpt-4"
    assert TokenCounter.for_model(model).count_text(KNOWN[sample]["text"]) == len(expected)


def test_known_counts_quoted_by_openai() -> None:
    # "hello world": the tiktoken README's example, [15339, 1917] in cl100k_base
    assert get_encoding("cl100k_base").encode("hello world") == [15339, 1917]
    assert TokenCounter.for_model("openai:gpt-4o").count_text("") == 0


def test_encodings_load_offline_without_writing_anywhere(tmp_path: Path) -> None:
    # A fresh interpreter with sockets disabled and tiktoken's cache pointed at an empty
    # directory: both encodings load and count, nothing is fetched or written.
    cache = tmp_path / "tiktoken-cache"
    cache.mkdir()
    code = (
        "import socket\n"
        "def refuse(*a, **k): raise OSError('network used')\n"
        "socket.socket.connect = refuse; socket.create_connection = refuse; socket.getaddrinfo = refuse\n"
        "from slotmagic.tokens import TokenCounter, get_encoding\n"
        "print(TokenCounter.for_model('openai:gpt-4o').count_text('hello world'),"
        " TokenCounter.for_model('openai:gpt-4').count_text('hello world'),"
        " *(len(get_encoding(e).encode('hello world')) for e in ('o200k_base', 'cl100k_base')))\n"
    )
    env = {"TIKTOKEN_CACHE_DIR": str(cache), "DATA_GYM_CACHE_DIR": str(cache), "HOME": str(tmp_path / "home")}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env={**_base_env(), **env}, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["2", "2", "2", "2"]  # counted (rs-bpe when installed), and tiktoken's
    assert list(cache.iterdir()) == []
    assert not (tmp_path / "home").exists()


def test_importing_slotmagic_tokens_does_not_load_tiktoken() -> None:
    code = "import sys, slotmagic.tokens; print('tiktoken' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def _base_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k in ("PATH", "PYTHONPATH", "LANG", "LC_ALL", "SYSTEMROOT")}
