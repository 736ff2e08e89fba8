"""What one turn costs the PostgreSQL server: the statements (and round trips) a kernel's store
sends for a turn on a session of its own, on a session shared with another kernel, and after
that kernel's turn on another slot of it or on the same slot. 50 kernels at 10 turns a second
share one server, so every statement a turn sends is paid for by all of them; these are the
numbers the store was brought down to, and the test fails if a change makes a turn send more.
Counted at the store's connection (what it sends), not timed."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from reflect_server import ReflectServer

from slotmagic import Session
from slotmagic._store.postgres import PostgresStore
from slotmagic._store.postgres_connection import _Connection
from slotmagic.widgets._live import LiveWidgets

MODEL = "openai:reflect"


@dataclass
class Sent:
    round_trips: int = 0
    statements: int = 0


@pytest.fixture
def sent_by(monkeypatch: pytest.MonkeyPatch) -> Callable[[Session, Callable[[], object]], Sent]:
    """What ``store`` sends while ``call()`` runs: a wrapper around its connection's calls (a
    script is as many statements as it holds, ``executemany`` one per row)."""
    counting: list[tuple[PostgresStore, Sent]] = []

    def wrap(name: str, size: Callable[[str, Any], int]) -> None:
        real = getattr(_Connection, name)

        def counted(self: _Connection, sql: str, parameters: Any = (), /) -> Any:
            if counting and self is counting[-1][0]._held:
                parameters = list(parameters) if name == "executemany" else parameters
                counting[-1][1].round_trips += 1
                counting[-1][1].statements += size(sql, parameters)
            return real(self, sql, parameters)

        monkeypatch.setattr(_Connection, name, counted)

    wrap("execute", lambda sql, parameters: 1)
    wrap("script", lambda sql, parameters: sql.count(";") + 1)
    wrap("executemany", lambda sql, parameters: len(parameters))

    def sent(session: Session, call: Callable[[], object]) -> Sent:
        store = session.store
        assert isinstance(store, PostgresStore)
        counting.append((store, Sent()))
        try:
            call()
        finally:
            found = counting.pop()[1]
        return found

    return sent


@pytest.fixture
def model() -> Iterator[ReflectServer]:
    with ReflectServer() as server:
        yield server


def test_a_turn_sends_no_more_statements_than_it_needs(
    postgres_url: str, model: ReflectServer, sent_by: Callable[[Session, Callable[[], object]], Sent]
) -> None:
    def opened(session_id: str, user: str) -> Session:
        return Session.open(session_id, db_path=postgres_url, model=MODEL, settings=model.settings(), user=user)

    with opened("solo", "ann") as ann, opened("team", "bob") as bob, opened("team", "cy") as cy:
        bob.create_slot("bob")
        cy.create_slot("cy")
        for session, slot in ((ann, "default"), (bob, "bob"), (cy, "cy"), (ann, "default"), (bob, "bob")):
            session.submit_turn("warming up", slot=slot)  # the provider, the caches, the calibration

        # Its own session: the change counter once for the turn's four reads (the slot, the
        # history, the generation, the active workflow: one consistent() block), then one write
        # transaction of two round trips (its opening; the two messages, the turn and the slot
        # row sent with its COMMIT) and the calibration's compare-and-set. The active workflow
        # is not read again.
        private = sent_by(ann, lambda: ann.submit_turn("alone"))
        assert private.statements <= 12 and private.round_trips <= 4, private

        # A shared session no one else wrote to since: the same.
        quiet = sent_by(bob, lambda: bob.submit_turn("nobody else wrote", slot="bob"))
        assert quiet.statements <= 12 and quiet.round_trips <= 4, quiet

        # After another member's turn on another slot of it: the session's rows (the current slot
        # and the slot rows in one statement, which also say whether each segment read is still
        # its slot's: no statement of its own). The active workflow and the segments' marks,
        # compactions and working context are kept: a turn writes none of them.
        cy.submit_turn("cy's turn", slot="cy")
        after_other = sent_by(bob, lambda: bob.submit_turn("after cy's turn", slot="bob"))
        assert after_other.statements <= 13 and after_other.round_trips <= 5, after_other

        # After another member's turn on the same slot: that turn's messages too.
        cy.submit_turn("cy's turn on bob's slot", slot="bob")
        same_slot = sent_by(bob, lambda: bob.submit_turn("after cy's turn here", slot="bob"))
        assert same_slot.statements <= 14 and same_slot.round_trips <= 6, same_slot

        # After another member pins a message: the marks, compactions and working context of
        # the session's segments (one statement), and its active workflow, are read again.
        cy.store.mark_message("team", "bob", 0, "pin")
        after_mark = sent_by(bob, lambda: bob.submit_turn("after cy's pin", slot="bob"))
        assert after_mark.statements <= 15 and after_mark.round_trips <= 7, after_mark
        assert bob.store.history("team", "bob").marks() == {0: "pin"}

        user_messages = [m.content for m in bob.messages("bob") if m.role == "user"]
        assert user_messages[-5:] == [
            "nobody else wrote",
            "after cy's turn",
            "cy's turn on bob's slot",
            "after cy's turn here",
            "after cy's pin",
        ]
        assert [m.content for m in ann.messages() if m.role == "user"][-1] == "alone"


class _Tree:
    """A live widget's reads at each refresh, as the tree's: the slot list, and the messages
    new since it last looked of each slot whose count moved."""

    def __init__(self, session: Session) -> None:
        self.session, self.known, self.closed = session, dict[str, int](), False
        self.seen: list[str] = []

    def refresh(self) -> None:
        for slot in self.session.list_slots():
            count = slot.meta.message_count
            if self.known.setdefault(slot.id, count) != count:
                history = self.session.store.history(self.session.session_id, slot.id)
                self.seen += [m.content for m in history.messages(self.known[slot.id]) if m.role == "user"]
                self.known[slot.id] = count

    def close(self) -> None:
        self.closed = True


def test_a_live_refresh_after_another_members_turn_reads_only_what_it_changed(
    postgres_url: str, model: ReflectServer, sent_by: Callable[[Session, Callable[[], object]], Sent]
) -> None:
    """50 kernels, 5 to a session: each turn refreshes the live widgets of 4 other kernels, so
    a refresh's statements count as much as a turn's. One refresh looks for others' writes once
    (not once per widget and read), reads the session's rows once, and their liveness costs
    nothing of its own."""

    def opened(session_id: str, user: str) -> Session:
        return Session.open(session_id, db_path=postgres_url, model=MODEL, settings=model.settings(), user=user)

    with opened("team", "bob") as bob, opened("team", "cy") as cy:
        bob.create_slot("bob")
        cy.create_slot("cy")
        for session, slot in ((bob, "bob"), (cy, "cy"), (bob, "bob"), (cy, "cy")):
            session.submit_turn("warming up", slot=slot)
        live = LiveWidgets()
        live.use(lambda: bob)
        trees = [_Tree(bob), _Tree(bob)]  # e.g. a tree and a preview, one kernel
        for tree in trees:
            live.add(tree)
        live.changed()

        # Another member's turn on a slot of its own: the change counter (and the sessions it
        # changed), the session's rows, and that slot's new messages, once for both widgets.
        cy.submit_turn("cy's turn", slot="cy")
        refresh = sent_by(bob, live.changed)
        assert refresh.statements <= 3 and refresh.round_trips <= 3, refresh
        assert [tree.seen for tree in trees] == [["cy's turn"], ["cy's turn"]]

        # A new slot derived there: the counter and the session's rows.
        cy.derive_slot("cy2", "cy")
        derived = sent_by(bob, live.changed)
        assert derived.statements <= 2 and derived.round_trips <= 2, derived
        assert all("cy2" in tree.known for tree in trees)

        # The rows read are those cy's writes changed: every other slot's row is the one kept,
        # and its Slot the same object (a tree of a hundred slots remakes one node).
        before = {slot.id: slot for slot in bob.list_slots()}
        cy.submit_turn("cy's second turn", slot="cy")
        sent_by(bob, live.changed)
        after = {slot.id: slot for slot in bob.list_slots()}
        assert after.keys() == before.keys()
        assert [name for name in after if after[name] is not before[name]] == ["cy"]
        assert after["cy"].meta.message_count == before["cy"].meta.message_count + 2

        # Nothing new: the counter only.
        idle = sent_by(bob, live.changed)
        assert idle.statements <= 1 and idle.round_trips <= 1, idle
