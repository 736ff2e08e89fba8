"""Calibration: per-model ratios of reported to estimated tokens, robust and kept as plain data."""

from __future__ import annotations

import json
import random

from slotmagic._core.messages import Message
from slotmagic._core.request import ChatRequest
from slotmagic.tokens import Calibration, TokenCounter
from slotmagic.tokens._calibration import FACTOR_BOUNDS, WINDOW

CLAUDE = "anthropic:claude-sonnet-4-5"


def test_no_observation_means_no_scaling() -> None:
    calibration = Calibration()
    assert calibration.factor(CLAUDE) == 1.0
    assert calibration.apply(CLAUDE, 1234) == 1234
    assert calibration.observations(CLAUDE) == 0


def test_converges_to_the_true_ratio_from_noisy_observations() -> None:
    # A tokenizer that yields 1.18x our estimate, seen through noisy turns of varied size,
    # with a few wild ones (an image, a server-side prompt) mixed in.
    rng = random.Random(7)
    calibration = Calibration()
    for turn in range(40):
        estimated = rng.randint(200, 20_000)
        reported = round(estimated * 1.18 * rng.uniform(0.97, 1.03))
        if turn % 9 == 4:
            reported = estimated * 3  # an outlier within the accepted bounds
        calibration.observe(CLAUDE, estimated, reported)
    assert abs(calibration.factor(CLAUDE) - 1.18) < 0.02
    assert calibration.observations(CLAUDE) == WINDOW
    assert abs(calibration.apply(CLAUDE, 10_000) - 11_800) < 200


def test_one_observation_is_enough_to_start() -> None:
    calibration = Calibration()
    assert calibration.observe(CLAUDE, 1_000, 1_150) == 1.15
    assert calibration.apply(CLAUDE, 100) == 115


def test_models_are_calibrated_apart() -> None:
    calibration = Calibration()
    calibration.observe(CLAUDE, 1_000, 1_200)
    calibration.observe("ollama:llama3.2", 1_000, 900)
    assert calibration.factor(CLAUDE) == 1.2
    assert calibration.factor("ollama:llama3.2") == 0.9
    assert calibration.models == ("anthropic:claude-sonnet-4-5", "ollama:llama3.2")


def test_nonsense_is_ignored_and_the_factor_is_clamped() -> None:
    calibration = Calibration()
    for estimated, reported in [(0, 100), (100, 0), (-5, 10), (100, 1_000), (1_000, 10)]:
        calibration.observe(CLAUDE, estimated, reported)
    assert calibration.observations(CLAUDE) == 0
    calibration.observe(CLAUDE, 1_000, 3_500)  # accepted, but the factor stays within bounds
    assert calibration.factor(CLAUDE) == FACTOR_BOUNDS[1]
    calibration = Calibration()
    calibration.observe(CLAUDE, 1_000, 300)
    assert calibration.factor(CLAUDE) == FACTOR_BOUNDS[0]


def test_large_requests_weigh_more_than_tiny_ones() -> None:
    calibration = Calibration()
    for _ in range(5):
        calibration.observe(CLAUDE, 20, 40)  # one-liners, dominated by fixed overheads
    calibration.observe(CLAUDE, 8_000, 9_200)
    assert calibration.factor(CLAUDE) == 1.15


def test_survives_a_restart_as_plain_data() -> None:
    calibration = Calibration()
    for estimated in (500, 1_500, 5_000):
        calibration.observe(CLAUDE, estimated, round(estimated * 1.21))
    data = json.loads(json.dumps(calibration.to_dict()))  # what a store would keep
    restored = Calibration.from_dict(data)
    assert restored.factor(CLAUDE) == calibration.factor(CLAUDE)
    assert restored.to_dict() == calibration.to_dict()
    assert Calibration.from_dict(None).models == ()
    broken = {"models": {CLAUDE: [[1.2, 100], ["x", 1], [99.0, 5], [1.1], "junk"], 7: [[1.0, 1]], "m": "junk"}}
    assert Calibration.from_dict(broken).to_dict() == {"format": 1, "models": {CLAUDE: [[1.2, 100]]}}


def test_the_engine_loop_estimate_observe_apply() -> None:
    # What the turn engine does: estimate the request, send it, observe the reported usage.
    counter = TokenCounter.for_model(CLAUDE)
    calibration = Calibration()
    request = ChatRequest(
        "claude-sonnet-4-5", (Message.system("Be precise."), Message.user("Summarise the lease. " * 50))
    )
    estimated = counter.count_request(request)
    calibration.observe(CLAUDE, estimated, round(estimated * 1.12))
    assert counter.calibrated(estimated, calibration) == round(estimated * 1.12)
