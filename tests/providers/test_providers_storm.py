"""A provider storm: 100 turns through ``Session`` against a server that fails about a third of
them, in every documented way (see ``failures.py``), on both providers, through every way to run
a turn (``submit_turn``, ``asubmit_turn``, ``stream_turn``, ``astream_turn``), on two slots.

Each turn either completes, stored whole, or raises one ``SlotMagicError`` line and leaves the
slot, and every other slot, exactly as before. Timeouts are small so it runs in seconds.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from pathlib import Path

import pytest

from slotmagic import Message, Reply, Session
from slotmagic._errors import SlotMagicError
from slotmagic.providers import ProviderSettings

from .failures import FAILURES, RECOVERIES, success, timed_for
from .wire_server import WireServer, sse_response

TURNS = 100
RETRIES = 1
MODELS = {"openai": "openai:gpt-4o-mini", "anthropic": "anthropic:claude-haiku-4-5"}


def submit(session: Session, text: str, **options: object) -> Reply:
    return session.submit_turn(text, **options)  # type: ignore[arg-type]


def asubmit(session: Session, text: str, **options: object) -> Reply:
    return asyncio.run(session.asubmit_turn(text, **options))  # type: ignore[arg-type]


def stream(session: Session, text: str, **options: object) -> Reply:
    with session.stream_turn(text, **options) as turn:  # type: ignore[arg-type]
        "".join(turn)
    assert turn.reply is not None
    return turn.reply


def astream(session: Session, text: str, **options: object) -> Reply:
    async def run() -> Reply:
        turn = session.astream_turn(text, **options)  # type: ignore[arg-type]
        async for _piece in turn:
            pass
        assert turn.reply is not None
        return turn.reply

    return asyncio.run(run())


RUNNERS: list[Callable[..., Reply]] = [submit, asubmit, stream, astream]


@pytest.mark.slow
def test_a_provider_storm_leaves_every_slot_whole(wire: WireServer, db_path: Path) -> None:
    settings = ProviderSettings(
        openai_api_key="sk-test-storm",
        openai_base_url=wire.url + "/v1",
        anthropic_api_key="sk-ant-test-storm",
        anthropic_base_url=wire.url,
        connect_timeout=2.0,
        max_retries=RETRIES,
        backoff_base=0.001,
        max_reply_bytes=64 * 1024,
    )
    rng = random.Random(20240611)
    names = list(FAILURES)
    plan = ["fail"] * (TURNS // 3) + ["ok"] * (TURNS - TURNS // 3)
    rng.shuffle(plan)
    outcomes: dict[str, int] = {}
    with Session.open("storm", db_path=db_path, settings=settings) as session:
        session.submit_turn("seed the default slot", model="echo")
        session.derive_slot("side")
        for number, kind in enumerate(plan):
            protocol = rng.choice(list(MODELS))
            run = rng.choice(RUNNERS)
            slot = rng.choice(["default", "side"])
            text = f"question {number}"
            before = {s: session.messages(s) for s in ("default", "side")}
            turns_before = len(session.history.turns(slot))
            assert wire.pending() == 0  # every scripted response of the last turn was used

            if kind == "fail":
                name = names[len([k for k in plan[:number] if k == "fail"]) % len(names)]  # each mode in turn
                failure = FAILURES[name]
                session.settings = timed_for(settings, failure)
                wire.script(*failure.responses(protocol, "the server says no", RETRIES))
                with pytest.raises(SlotMagicError) as caught:
                    run(session, text, model=MODELS[protocol], slot=slot)
                error = caught.value
                assert isinstance(error, failure.error), (name, error)
                assert "\n" not in str(error) and str(error), name
                assert {s: session.messages(s) for s in before} == before, name  # exactly as before
                assert len(session.history.turns(slot)) == turns_before
                outcomes[name] = outcomes.get(name, 0) + 1
            else:
                answer = f"answer {number} " + "ü" * rng.randrange(0, 40)  # some multi-byte text
                session.settings = timed_for(settings)
                if rng.random() < 0.25:  # a failure that a retry recovers from
                    recovery = rng.choice(list(RECOVERIES))
                    wire.script(*RECOVERIES[recovery](protocol, "busy", answer))
                    outcomes[recovery] = outcomes.get(recovery, 0) + 1
                else:
                    wire.script(sse_response(success(protocol, answer)))
                    outcomes["success"] = outcomes.get("success", 0) + 1
                reply = run(session, text, model=MODELS[protocol], slot=slot)
                assert reply.text == answer
                expected = before[slot] + [Message.user(text), Message.assistant(answer)]
                assert session.messages(slot) == expected  # stored whole
                other = "side" if slot == "default" else "default"
                assert session.messages(other) == before[other]
                assert len(session.history.turns(slot)) == turns_before + 1

    assert set(FAILURES) <= set(outcomes) and all(outcomes[n] >= 2 for n in FAILURES), outcomes
    assert outcomes.get("success", 0) > 40 and sum(outcomes.values()) == TURNS
