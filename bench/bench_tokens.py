"""Token counting benchmark: count a 1,500-character message, and load each encoding cold.

Counting is timed for an ASCII and a CJK message in each encoding, against a baseline run in
the same process on the same texts: ``len(encoding.encode(text))``, tiktoken with nothing of
ours around it. slotmagic counts with rs-bpe when the ``fast-count`` extra is installed (the
same counts, see ``slotmagic/tokens/_fast.py``), else with tiktoken; the header says which.
"first" counts a text never seen before (every sample is a different text);
"(best)" is the fastest sample of "first" (the least disturbed by other work on the machine);
"again" counts a text already counted (slotmagic remembers recent texts, and a history is
counted again at every turn). Samples of ours and of the baseline alternate, so a noisy machine
slows both alike.

Cold loads run in fresh interpreters: ours reads the gzipped rank file shipped in slotmagic,
checks its SHA-256 and builds the encoding; the baseline is tiktoken's own loader
(``load_tiktoken_bpe``) reading the same, already unpacked file with its cache turned off, and
building the same encoding: what tiktoken costs on a warm cache.

    python bench/bench_tokens.py            # figures
    python bench/bench_tokens.py --quick    # fewer samples
"""

from __future__ import annotations

import argparse
import gzip
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from slotmagic._core.messages import Message
from slotmagic.tokens import ENCODINGS, TokenCounter, get_encoding
from slotmagic.tokens._fast import FAST_VERSION, fast_counter

ROOT = Path(__file__).resolve().parent.parent

T = TypeVar("T")
CHARS = 1_500
TARGET_US = 100.0
MODELS = {"o200k_base": "openai:gpt-4o", "cl100k_base": "openai:gpt-4", "estimate": "anthropic:claude-sonnet-4-5"}
ASCII = (
    "The tenant paid a deposit of $1,500 when the lease began in March 2024. When she moved out, the "
    "landlord kept $1,250 for 'cleaning and repairs' without an itemised list, and did not answer two "
    "letters. Under most state laws a landlord must return the deposit, or explain each deduction in "
    "writing, within 14 to 30 days; normal wear and tear cannot be charged. "
)
CJK = (
    "房东扣留了我一千二百五十元的押金，理由是清洁和维修费用，"  # noqa: RUF001 (CJK punctuation is the point)
    "但没有提供任何明细。根据大多数地方的法律，房东必须在规定期限内退还押金。"  # noqa: RUF001
)


def texts(seed: str, count: int) -> list[str]:
    """``count`` different texts of CHARS characters (each starts differently, so none is cached)."""
    body = (seed * (CHARS // len(seed) + 2))[:CHARS]
    return [f"{i:06d} {body}"[:CHARS] for i in range(count)]


def per_call_us(fn: Callable[[T], int], items: list[T]) -> float:
    started = time.perf_counter()
    for item in items:
        fn(item)
    return (time.perf_counter() - started) / len(items) * 1e6


def bench_counts(samples: int, per_sample: int) -> list[tuple[str, str, float, float, float, float, int]]:
    rows = []
    for encoding, model in MODELS.items():
        counter = TokenCounter.for_model(model)
        raw = get_encoding(encoding).encode if encoding != "estimate" else None
        for label, seed in (("ASCII", ASCII), ("CJK", CJK)):
            pool = texts(seed, samples * per_sample * 2 + 10)
            messages = [Message.user(t) for t in pool]
            counter.count_message(messages[-1])  # warm up
            ours_first, base, ours_again = [], [], []
            for s in range(samples):
                chunk = messages[s * per_sample : (s + 1) * per_sample]
                ours_first.append(per_call_us(counter.count_message, chunk))
                if raw is not None:
                    other = pool[(samples + s) * per_sample : (samples + s + 1) * per_sample]
                    base.append(per_call_us(lambda t, encode=raw: len(encode(t)), other))
                ours_again.append(per_call_us(counter.count_message, chunk))
            tokens = counter.count_message(messages[0])
            rows.append(
                (
                    encoding,
                    label,
                    statistics.median(ours_first),
                    min(ours_first),
                    statistics.median(base) if base else float("nan"),
                    statistics.median(ours_again),
                    tokens,
                )
            )
    return rows


_OURS = """
import time, sys
t0 = time.perf_counter()
import tiktoken
t1 = time.perf_counter()
from slotmagic.tokens._encodings import get_encoding
t2 = time.perf_counter()
get_encoding(sys.argv[1])
t3 = time.perf_counter()
print(t1 - t0, t3 - t2)
"""

_BASELINE = """
import time, sys
t0 = time.perf_counter()
import tiktoken
from tiktoken.load import load_tiktoken_bpe
t1 = time.perf_counter()
from slotmagic.tokens._encodings import ENCODINGS
spec = ENCODINGS[sys.argv[1]]
t2 = time.perf_counter()
ranks = load_tiktoken_bpe(sys.argv[2], expected_hash=spec.sha256)
tiktoken.Encoding(spec.name, pat_str=spec.pattern, mergeable_ranks=ranks, special_tokens=dict(spec.special_tokens))
t3 = time.perf_counter()
print(t1 - t0, t3 - t2)
"""


_FAST = """
import time, sys
from slotmagic.tokens._fast import fast_counter
t0 = time.perf_counter()
assert fast_counter(sys.argv[1]) is not None
print(time.perf_counter() - t0)
"""


def bench_fast_cold_load(runs: int) -> dict[str, float]:
    """rs-bpe building each encoding in a fresh interpreter (its ranks are compiled in)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out: dict[str, float] = {}
    for name in ENCODINGS:
        times = [
            float(subprocess.run([sys.executable, "-c", _FAST, name], capture_output=True, text=True, env=env,
                                 check=True).stdout)
            for _ in range(runs)
        ]  # fmt: skip
        out[name] = statistics.median(times)
    return out


def bench_cold_load(runs: int) -> list[tuple[str, float, float, float]]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TIKTOKEN_CACHE_DIR": ""}  # "" turns tiktoken's cache off
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        for name, spec in ENCODINGS.items():
            plain = Path(scratch) / name
            plain.write_bytes(gzip.decompress((ROOT / "slotmagic" / "tokens" / "data" / spec.filename).read_bytes()))
            ours, base, imports = [], [], []
            for _ in range(runs):
                out = subprocess.run(
                    [sys.executable, "-c", _OURS, name], capture_output=True, text=True, env=env, check=True
                )
                imported, loaded = map(float, out.stdout.split())
                ours.append(loaded)
                imports.append(imported)
                out = subprocess.run(
                    [sys.executable, "-c", _BASELINE, name, str(plain)],
                    capture_output=True,
                    text=True,
                    env=env,
                    check=True,
                )
                base.append(float(out.stdout.split()[1]))
            rows.append((name, statistics.median(ours), statistics.median(base), statistics.median(imports)))
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer samples")
    args = parser.parse_args()
    samples, per_sample, runs = (5, 50, 2) if args.quick else (15, 100, 5)

    fast = fast_counter("o200k_base") is not None
    counted_by = f"rs-bpe {FAST_VERSION} (the fast-count extra)" if fast else "tiktoken (no fast-count extra installed)"
    print(f"count one {CHARS:,}-character message (median of {samples} samples of {per_sample} messages)")
    print(f"exact counts by {counted_by}; baseline: tiktoken alone\n")
    columns = ("first", "(best)", "baseline", "ratio", "again")
    header = f"{'encoding':<12} {'text':<6} {'tokens':>7} " + " ".join(f"{c:>9}" for c in columns)
    print(header)
    print("-" * len(header))
    rows = bench_counts(samples, per_sample)
    for encoding, label, first, best, base, again, tokens in rows:
        ratio = f"{first / base:.2f}x" if base == base else "-"
        base_text = f"{base:.1f} us" if base == base else "-"
        print(
            f"{encoding:<12} {label:<6} {tokens:>7,} {first:>6.1f} us {best:>6.1f} us "
            f"{base_text:>9} {ratio:>6} {again:>5.2f} us"
        )

    print(f"\ncold load of each encoding (fresh interpreter, median of {runs} runs)\n")
    header = f"{'encoding':<12} {'ours':>8} {'tiktoken loader':>16} {'ratio':>6} {'import tiktoken':>16}"
    print(header)
    print("-" * len(header))
    for name, ours, base, imported in bench_cold_load(runs):
        print(
            f"{name:<12} {ours * 1e3:>5.0f} ms {base * 1e3:>13.0f} ms {ours / base:>5.2f}x {imported * 1e3:>13.0f} ms"
        )

    if fast:
        built = ", ".join(f"{name} {t * 1e3:.0f} ms" for name, t in bench_fast_cold_load(runs).items())
        print(f"\nrs-bpe cold (fresh interpreter, what counting loads with the extra): {built}")

    print(f"\ntarget: counting a {CHARS:,}-character message <= {TARGET_US:.0f} us")
    for encoding, label, first, _, _, again, _ in rows:
        for kind, value in (("first", first), ("again", again)):
            print(f"  {'ok  ' if value <= TARGET_US else 'over'} {encoding:<12} {label:<6} {kind:<6} {value:8.1f} us")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
