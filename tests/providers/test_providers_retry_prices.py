"""The retry policy (which statuses, how long) and the price table."""

from __future__ import annotations

from email.utils import formatdate

import pytest

from slotmagic.providers import BUILTIN_PRICES, Usage, cost_of, price_of
from slotmagic.providers.retry import RetryPolicy, is_retryable, retry_after_seconds


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


def test_cost_from_the_builtin_table() -> None:
    usage = Usage(input_tokens=1_000_000, output_tokens=500_000)
    inp, out = BUILTIN_PRICES["openai:gpt-4o-mini"]
    assert cost_of("openai:gpt-4o-mini", usage) == pytest.approx(inp + out / 2)


def test_dated_snapshots_cost_as_their_alias() -> None:
    assert price_of("anthropic:claude-sonnet-4-5-20250929") == BUILTIN_PRICES["anthropic:claude-sonnet-4-5"]
    assert price_of("openai:gpt-4o-mini-2024-07-18") == BUILTIN_PRICES["openai:gpt-4o-mini"]


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
