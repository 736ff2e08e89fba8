"""The crash test's victims: writers that stream turns and append until killed.

Run as ``crash_writer.py DB URL``, this is a fork server: it imports slotmagic once, then for
each round number read on stdin forks a writer, waits for it to die (the test SIGKILLs it)
and prints ``dead ROUND``. So each round costs a fork, not a Python start.

A writer streams turns from the OpenAI-compatible server at URL (the real HTTP provider
path, so a kill lands mid-stream too), appends tagged messages and derives slots, and prints
what it committed, written straight to the pipe before it goes on:

    ready ROUND              the session is open
    streaming TAG            a reply has started streaming
    stored TAG SLOT          a turn or an append is committed
    derived SLOT             a slot was derived

Each stored turn's user message is "TAG question" (its reply says what it was sent); each
appended message is "TAG i/n ...", and the append's info carries {"tag", "n"}.
"""

from __future__ import annotations

import os
import random
import sys

from slotmagic import Message, ProviderSettings, Session, SlotExists


def say(line: str) -> None:
    os.write(1, (line + "\n").encode())  # unbuffered: what is printed was committed


def write_forever(db_path: str, url: str, round_: int) -> None:
    rng = random.Random(round_)
    settings = ProviderSettings(openai_base_url=url, read_timeout=30, connect_timeout=5)
    session = Session.open("crash", db_path=db_path, model="openai:reflect", settings=settings)
    # No compaction here: every reply must name the whole history it was made from.
    session.options.context_windows = {"openai:reflect": 100_000_000}
    slots = [s.id for s in session.list_slots()]
    say(f"ready {round_}")
    step = 0
    while True:
        step += 1
        action = rng.random()
        slot = rng.choice(slots)
        tag = f"t{round_}-{step}"
        if action < 0.08 and len(slots) < 12:
            new_id = f"s{round_}-{step}"
            try:
                session.derive_slot(new_id, parent=slot)
            except SlotExists:
                continue
            slots.append(new_id)
            say(f"derived {new_id}")
        elif action < 0.6:
            stream = session.stream_turn(f"{tag} question", slot=slot)
            first = True
            for _ in stream:
                if first:
                    say(f"streaming {tag}")
                    first = False
            assert stream.reply is not None
            say(f"stored {tag} {stream.reply.slot}")
        else:
            n = rng.randint(1, 6)
            session.append(
                [Message.user(f"{tag} {i}/{n} " + "x" * rng.randint(0, 3000)) for i in range(1, n + 1)],
                slot=slot,
                info={"tag": tag, "n": n},
            )
            say(f"stored {tag} {slot}")


def serve(db_path: str, url: str) -> None:
    # Import everything a writer needs before forking: a turn on a throwaway store.
    settings = ProviderSettings(openai_base_url=url, read_timeout=30, connect_timeout=5)
    with Session.open("warm", db_path=":memory:", model="openai:reflect", settings=settings) as warm:
        for _ in warm.stream_turn("warm up"):
            pass
    say("serving")
    for line in sys.stdin:
        round_ = int(line)
        pid = os.fork()
        if pid == 0:
            try:
                write_forever(db_path, url, round_)
            finally:
                os._exit(1)  # a writer never stops by itself: this is a failure
        _, status = os.waitpid(pid, 0)
        say(f"dead {round_} {status}")


if __name__ == "__main__":
    serve(sys.argv[1], sys.argv[2])
