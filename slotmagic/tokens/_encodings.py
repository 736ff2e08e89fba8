"""OpenAI's BPE encodings, loaded from rank files shipped inside slotmagic: no network, no cache dir.

tiktoken would download ``o200k_base.tiktoken`` and ``cl100k_base.tiktoken`` from OpenAI's blob
store on first use and cache them under ``$TIKTOKEN_CACHE_DIR`` (or the system temp dir). That
fails offline and on locked-down JupyterHubs, so slotmagic ships both files gzipped in
``slotmagic/tokens/data/`` (2.5 MB together), checks each one's SHA-256 against the value
tiktoken itself pins for the published file, and builds ``tiktoken.Encoding`` from them with the
same split pattern and special tokens as ``tiktoken_ext.openai_public``. Nothing is written
anywhere.

Loading parses ~200k (o200k) or ~100k (cl100k) ranks once per process (a few hundred
milliseconds, see ``bench/bench_tokens.py``); the encodings are then kept for the life of the
process.
"""

from __future__ import annotations

import binascii
import threading
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING

from .._errors import SlotMagicError

if TYPE_CHECKING:
    import tiktoken

__all__ = ["ENCODINGS", "EncodingSpec", "RankFileError", "get_encoding", "load_ranks"]

_ENDOFTEXT = "<|endoftext|>"
_FIM_PREFIX = "<|fim_prefix|>"
_FIM_MIDDLE = "<|fim_middle|>"
_FIM_SUFFIX = "<|fim_suffix|>"
_ENDOFPROMPT = "<|endofprompt|>"

# The split patterns, exactly as tiktoken_ext.openai_public defines them (a test compares them).
_CL100K_PATTERN = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|"""
    r"""\s+(?!\S)|\s"""
)
_O200K_PATTERN = "|".join(
    [
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    ]
)


class RankFileError(SlotMagicError):
    """A shipped rank file is missing or not the published file (a broken install)."""


@dataclass(frozen=True, slots=True)
class EncodingSpec:
    """One encoding: where its ranks are, the SHA-256 of the published rank file (as pinned in
    tiktoken_ext.openai_public), and what tiktoken needs besides the ranks."""

    name: str
    filename: str
    sha256: str
    pattern: str
    special_tokens: MappingProxyType[str, int]
    n_ranks: int


ENCODINGS: MappingProxyType[str, EncodingSpec] = MappingProxyType(
    {
        "o200k_base": EncodingSpec(
            "o200k_base",
            "o200k_base.tiktoken.gz",
            "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
            _O200K_PATTERN,
            MappingProxyType({_ENDOFTEXT: 199999, _ENDOFPROMPT: 200018}),
            199998,
        ),
        "cl100k_base": EncodingSpec(
            "cl100k_base",
            "cl100k_base.tiktoken.gz",
            "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
            _CL100K_PATTERN,
            MappingProxyType(
                {
                    _ENDOFTEXT: 100257,
                    _FIM_PREFIX: 100258,
                    _FIM_MIDDLE: 100259,
                    _FIM_SUFFIX: 100260,
                    _ENDOFPROMPT: 100276,
                }
            ),
            100256,
        ),
    }
)

_lock = threading.Lock()
_loaded: dict[str, tiktoken.Encoding] = {}


def load_ranks(spec: EncodingSpec) -> dict[bytes, int]:
    """The mergeable ranks of ``spec``, read from the shipped file and checked against its SHA-256."""
    import hashlib
    from importlib import resources  # both here: only a count of exact tokens reads a rank file

    try:
        packed = resources.files(__package__).joinpath("data").joinpath(spec.filename).read_bytes()
        import gzip

        text = gzip.decompress(packed)
    except (OSError, EOFError) as error:
        raise RankFileError(
            f"the {spec.name} rank file shipped with slotmagic is missing or unreadable ({error}); reinstall slotmagic"
        ) from error
    digest = hashlib.sha256(text).hexdigest()
    if digest != spec.sha256:
        raise RankFileError(
            f"the {spec.name} rank file shipped with slotmagic has SHA-256 {digest}, not the published "
            f"{spec.sha256}; reinstall slotmagic"
        )
    # Each line is "<base64 token> <rank>": split once, then pair tokens with ranks.
    fields = text.split()
    ranks = dict(zip(map(binascii.a2b_base64, fields[0::2]), map(int, fields[1::2]), strict=True))
    if len(ranks) != spec.n_ranks:
        raise RankFileError(f"the {spec.name} rank file holds {len(ranks)} ranks, expected {spec.n_ranks}")
    return ranks


def get_encoding(name: str) -> tiktoken.Encoding:
    """The ``tiktoken.Encoding`` called ``name`` (``o200k_base`` or ``cl100k_base``), built once."""
    encoding = _loaded.get(name)
    if encoding is not None:
        return encoding
    spec = ENCODINGS.get(name)
    if spec is None:
        raise KeyError(f"no shipped encoding {name!r}; known: {', '.join(ENCODINGS)}")
    import tiktoken

    with _lock:  # two threads asking at once load the file once
        encoding = _loaded.get(name)
        if encoding is None:
            encoding = tiktoken.Encoding(
                spec.name,
                pat_str=spec.pattern,
                mergeable_ranks=load_ranks(spec),
                special_tokens=dict(spec.special_tokens),
            )
            _loaded[name] = encoding
    return encoding
