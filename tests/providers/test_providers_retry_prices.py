"""The retry policy (which statuses, how long) and the prices (database, table, cached rates)."""

from __future__ import annotations

import subprocess
import sys
from email.utils import formatdate

import pytest

from slotmagic.providers import BUILTIN_PRICES, Usage, cost_of, price_of
from slotmagic.providers import _prices as prices_module
from slotmagic.providers._prices import cache_savings_of, model_price_of
from slotmagic.providers._retry import RetryPolicy, is_retryable, retry_after_seconds


@pytest.mark.parametrize(
    ("status", "retried"),
    [
        (429, True),
        (500, True),
        (502, True),
        (503, True),
        (529, True),
        (400, False),
        (401, False),
        (403, False),
        (404, False),
        (408, False),
        (422, False),
    ],
)
def test_only_429_and_5xx_are_retried(status: int, retried: bool) -> None:
    assert is_retryable(status) is retried
    assert (RetryPolicy().gives_up(status, 0) is None) is retried


def test_backoff_doubles_with_jitter_and_is_capped() -> None:
    policy = RetryPolicy(base=0.5, cap=4.0)
    low = [policy.delay(n, rand=lambda: 0.0) for n in range(6)]
    high = [policy.delay(n, rand=lambda: 1.0) for n in range(6)]
    assert low == [0.25, 0.5, 1.0, 2.0, 2.0, 2.0]
    assert high == [0.5, 1.0, 2.0, 4.0, 4.0, 4.0]
    assert len({policy.delay(1) for _ in range(20)}) > 1  # jitter: not every client in step


def test_retry_after_is_a_floor() -> None:
    policy = RetryPolicy(base=0.5)
    assert policy.delay(0, retry_after=7.0, rand=lambda: 1.0) == 7.0
    assert policy.delay(3, retry_after=0.1, rand=lambda: 1.0) == 4.0


def test_retries_are_bounded() -> None:
    policy = RetryPolicy(max_retries=2)
    assert policy.gives_up(503, 1) is None
    assert policy.gives_up(503, 2) == "gave up after 2 retries"
    assert RetryPolicy(max_retries=0).gives_up(503, 0) == "not retried (max_retries is 0)"


def test_a_retry_after_beyond_max_wait_is_not_waited_for() -> None:
    reason = RetryPolicy(max_wait=60).gives_up(429, 0, retry_after=3600)
    assert reason is not None and "3600 s" in reason


@pytest.mark.parametrize(
    ("headers", "seconds"),
    [
        ({"retry-after": "3"}, 3.0),
        ({"retry-after": "0.5"}, 0.5),
        ({"retry-after-ms": "250", "retry-after": "9"}, 0.25),  # OpenAI's header, more precise
        ({"retry-after": "-4"}, 0.0),
        ({"retry-after": "soon"}, None),
        ({}, None),
    ],
)
def test_retry_after_header_forms(headers: dict[str, str], seconds: float | None) -> None:
    assert retry_after_seconds(headers) == seconds


def test_retry_after_as_an_http_date() -> None:
    now = 1_700_000_000.0
    assert retry_after_seconds({"retry-after": formatdate(now + 30, usegmt=True)}, now=now) == 30.0
    assert retry_after_seconds({"retry-after": formatdate(now - 30, usegmt=True)}, now=now) == 0.0


def test_cost_from_the_database() -> None:
    usage = Usage(input_tokens=1_000_000, output_tokens=500_000)
    price = price_of("openai:gpt-4o-mini")
    assert price is not None
    assert cost_of("openai:gpt-4o-mini", usage) == pytest.approx(price[0] + price[1] / 2)


def test_dated_snapshots_cost_as_their_alias() -> None:
    assert price_of("anthropic:claude-sonnet-4-5-20250929") == price_of("anthropic:claude-sonnet-4-5")
    assert price_of("openai:gpt-4o-mini-2024-07-18") == price_of("openai:gpt-4o-mini")


def test_no_price_is_written_by_hand() -> None:
    # one rule, no table: every model's price comes from the database or the user
    assert dict(BUILTIN_PRICES) == {"ollama:*": (0.0, 0.0)}
    assert price_of("anthropic:claude-sonnet-4-6") is not None  # a model no table here ever named


def test_user_prices_extend_and_override_the_table() -> None:
    prices = {"openai:gpt-4o-mini": (1.0, 2.0), "openai:my-finetune": (3.0, 4.0), "openrouter-ish:*": (0, 0)}
    usage = Usage(input_tokens=2_000_000, output_tokens=1_000_000)
    assert cost_of("openai:gpt-4o-mini", usage, prices) == pytest.approx(4.0)
    assert cost_of("openai:my-finetune", usage, prices) == pytest.approx(10.0)
    assert cost_of("openrouter-ish:any/model", usage, prices) == 0.0


def test_unknown_models_have_no_cost_and_local_ones_are_free() -> None:
    usage = Usage(input_tokens=10, output_tokens=10)
    assert cost_of("openai:some-new-model", usage) is None
    assert cost_of("ollama:llama3.2", usage) == 0.0
    assert cost_of("echo", usage) is None  # a test model, not a free one


# -- the price database (genai-prices), cached rates, fallbacks -----------------------------------


def test_known_models_are_priced_from_the_database() -> None:
    found = model_price_of("openai:gpt-4o")
    assert found is not None and found.source.startswith("genai-prices")
    assert (found.input, found.output) == price_of("openai:gpt-4o")
    assert found.cached_input is not None and found.cached_input < found.input
    snapshot = model_price_of("anthropic:claude-sonnet-4-5-20250929")
    assert snapshot is not None and snapshot.source.startswith("genai-prices")
    assert (snapshot.input, snapshot.output) == price_of("anthropic:claude-sonnet-4-5")


def test_cached_input_is_charged_at_the_cached_rate() -> None:
    price = model_price_of("openai:gpt-4o-mini")
    assert price is not None and price.cached_input is not None
    usage = Usage(input_tokens=10_000, output_tokens=1_000, cached_tokens=8_000)
    expected = (2_000 * price.input + 8_000 * price.cached_input + 1_000 * price.output) / 1e6
    assert cost_of("openai:gpt-4o-mini", usage) == pytest.approx(expected)
    saved = cache_savings_of("openai:gpt-4o-mini", usage)
    assert saved == pytest.approx(8_000 * (price.input - price.cached_input) / 1e6)
    assert cache_savings_of("openai:gpt-4o-mini", Usage(10_000, 1_000)) == 0.0
    assert cache_savings_of("openai:some-new-model", usage) is None


def test_anthropic_cache_reads_and_long_context_tiers() -> None:
    price = model_price_of("anthropic:claude-sonnet-4-5")
    assert price is not None and price.cached_input is not None
    small = Usage(input_tokens=10_000, output_tokens=0, cached_tokens=6_000)
    assert cost_of("anthropic:claude-sonnet-4-5", small) == pytest.approx(
        (4_000 * price.input + 6_000 * price.cached_input) / 1e6
    )
    # past 200k input tokens Sonnet 4.5 costs more per token; the database knows it
    long = Usage(input_tokens=300_000, output_tokens=0)
    cost = cost_of("anthropic:claude-sonnet-4-5", long)
    assert cost is not None and cost > 300_000 * price.input / 1e6


def test_user_prices_win_over_the_database_but_wildcards_do_not() -> None:
    usage = Usage(input_tokens=1_000_000, output_tokens=0, cached_tokens=500_000)
    mine = {"openai:gpt-4o": (1.0, 2.0), "openai:*": (9.0, 9.0)}
    found = model_price_of("openai:gpt-4o", mine)
    assert found is not None and found.source == "settings" and found.cached_input is None
    assert cost_of("openai:gpt-4o", usage, mine) == pytest.approx(1.0)  # a settings price has no cached rate
    assert model_price_of("openai:gpt-4.1", mine).source.startswith("genai-prices")  # type: ignore[union-attr]
    assert price_of("openai:some-new-model", mine) == (9.0, 9.0)


def test_without_the_database_only_the_rules_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(prices_module, "_genai_prices", lambda: None)
    prices_module._database_price.cache_clear()
    try:
        assert model_price_of("openai:gpt-4o-mini-2024-07-18") is None  # no price written here
        usage = Usage(input_tokens=1_000_000, output_tokens=0, cached_tokens=1_000_000)
        assert cost_of("ollama:llama3.2", usage) == 0.0
        assert cost_of("openai:some-new-model", usage) is None
        assert model_price_of("ollama:qwen3").source == "built-in rule"  # type: ignore[union-attr]
    finally:
        prices_module._database_price.cache_clear()


def test_prices_never_touch_the_network() -> None:
    code = (
        "import socket, threading\n"
        "def refuse(*a, **k): raise OSError('network used')\n"
        "socket.socket.connect = refuse; socket.create_connection = refuse; socket.getaddrinfo = refuse\n"
        "from slotmagic.providers import Usage, cost_of\n"
        "from slotmagic.providers._prices import model_price_of\n"
        "print(model_price_of('openai:gpt-4o').source.split()[0],"
        " cost_of('anthropic:claude-haiku-4-5', Usage(10, 10)) > 0,"
        " sorted(t.name for t in threading.enumerate()))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["genai-prices", "True", "['MainThread']"]  # no auto-update thread
