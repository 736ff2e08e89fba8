"""Writes turns into a session forever, until killed: the crash test's victim.

Each turn's messages carry "<turn tag> <i>/<n>" so a checker can tell a whole turn from a torn one.
"""

from __future__ import annotations

import random
import sys

from slotmagic import Message, Session, SlotExists


def main(db_path: str, seed: int) -> None:
    rng = random.Random(seed)
    session = Session.open("crash", db_path=db_path)
    slots = [s.id for s in session.list_slots()]
    print("ready", flush=True)
    step = 0
    while True:
        step += 1
        action = rng.random()
        slot = rng.choice(slots)
        if action < 0.05 and len(slots) < 12:
            new_id = f"s{seed}-{step}"
            try:
                session.derive_slot(new_id, parent=slot)
            except SlotExists:
                continue
            slots.append(new_id)
        elif action < 0.5:
            session.submit_turn(f"t{seed}-{step} question", slot=slot)
        else:
            n = rng.randint(1, 6)
            tag = f"t{seed}-{step}"
            session.append(
                [Message.user(f"{tag} {i}/{n} " + "x" * rng.randint(0, 3000)) for i in range(1, n + 1)],
                slot=slot,
                info={"tag": tag, "n": n},
            )


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
