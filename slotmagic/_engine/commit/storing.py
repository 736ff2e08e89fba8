"""Storing a complete turn, in one transaction, on the history its request was made from.

When the slot moved on meanwhile (another thread, process or kernel stored a turn on it), the
turn goes to a new sibling branch forked at the point it was made from, and its info says so;
an edited cell's turn goes to a sibling forked before the turn it edits, and a fan-out's model
column to a branch named after its model. A fork exists only with its turn, even after a crash.
"""

from __future__ import annotations

from collections.abc import Container, Sequence

from ..._core.messages import Message
from ..._core.records import ForkRef, TurnInfo, TurnRecord
from ..._core.schema import ResponseSchema
from ..._core.slots import DeriveStrategy, SlotMode, SlotSource
from ..._core.usage import Usage
from ..._errors import ConfigError, SlotMoved, SlotNotFound, TurnNotStored
from ..._namespace import Namespace
from ..._store.base import History, Store, Tip
from ..plan.cell_turn import fork_name
from ..plan.pending import PendingTurn
from ..run.loop import steps_of
from ..run.reply import Reply
from ..run.structured import read_reply


class TurnWriter:
    """Writes the turns of one session to its store."""

    def __init__(self, store: Store, session_id: str, namespace: Namespace) -> None:
        self.store = store
        self.session_id = session_id
        self.namespace = namespace

    def write(
        self, turn: PendingTurn, messages: list[Message], info: TurnInfo, shelved: Sequence[Message], reply: str
    ) -> tuple[str, TurnRecord, TurnInfo]:
        """Store ``messages`` (the user's, the tool rounds', the reply) with the compaction made
        for the turn and the results ``shelved`` kept aside; the slot it went to, its record and
        its info. ``TurnNotStored`` (carrying the ``reply`` text) when its slot is gone. Run
        again from its start when the store's connection is lost before it commits."""
        return self.store.retried(lambda: self._write(turn, messages, info, shelved, reply))

    def _write(
        self, turn: PendingTurn, messages: list[Message], info: TurnInfo, shelved: Sequence[Message], reply: str
    ) -> tuple[str, TurnRecord, TurnInfo]:
        store, session_id = self.store, self.session_id
        try:
            with store.atomic():  # a fork exists only with its turn, even after a crash
                self.namespace.keep_stored(shelved)  # gc elsewhere may have taken them meanwhile
                for attached in turn.options.attachments if turn.options is not None else ():
                    for tool, content in attached.kept:
                        self.namespace.keep(tool, content)
                slot = turn.slot
                if turn.fork_before is not None:
                    slot = self.fork(turn.slot, turn.fork_before.start)
                    info = info.replace(forked_from=ForkRef(turn.slot, turn.fork_before.number, "edit"))
                    record = self._append(slot, turn, messages, info, None)
                    if turn.follow:
                        store.set_current_slot(session_id, slot)
                elif turn.branch is not None:  # forked where the request was made: nothing can move it
                    slot = self.fork(turn.slot, turn.base.length, turn.branch, model=turn.model)
                    record = self._append(slot, turn, messages, info, None)
                else:
                    try:
                        record = self._append(slot, turn, messages, info, turn.base)
                    except SlotMoved:
                        if store.tip(session_id, slot).key != turn.base.key:
                            raise  # not the same slot any more: a new one took its name
                        slot = self.fork(turn.slot, turn.base.length)
                        info = info.replace(forked_from=ForkRef(turn.slot, None, "moved"))
                        record = self._append(slot, turn, messages, info, None)
        except SlotMoved:  # its name holds another history now: the turn undone, or the slot made anew
            raise TurnNotStored(turn.slot, reply, "was undone, or deleted and made again,") from None
        except SlotNotFound:
            raise TurnNotStored(turn.slot, reply) from None
        return slot, record, info

    def _append(
        self, slot: str, turn: PendingTurn, messages: list[Message], info: TurnInfo, base: Tip | None
    ) -> TurnRecord:
        if turn.compaction is not None:
            self.store.add_compaction(self.session_id, slot, turn.compaction, base=base)
        return self.store.append_turn(self.session_id, slot, messages, info, base=base, writable=base is not None)

    def fork(self, parent_id: str, at: int, name: str | None = None, *, model: str | None = None) -> str:
        """Derive the sibling a turn runs on (``name``, or ``<name>.2`` … when it is taken);
        it behaves like the branch it forks, and with ``model`` (a fan-out's model branch)
        its later turns use that model."""
        parent = self.store.slot(self.session_id, parent_id)
        strategy = (
            DeriveStrategy.focused_on(parent.config.focused)
            if parent.mode is SlotMode.FOCUSED
            else DeriveStrategy.full()
        )
        taken = _SlotNames(self.store, self.session_id)  # asked name by name: not every slot read
        name = name if name is not None and name not in taken else fork_name(name or parent.id, taken)
        config = parent.config.replace(source=SlotSource.derived(parent.id, strategy))
        if model is not None:
            config = config.replace(model=model)
        self.store.derive_slot(self.session_id, name, parent.id, config, at)
        return name

    def stored_reply(
        self, slot: str, record: TurnRecord, model: str, source: History | None = None,
        schema: ResponseSchema | None = None,
    ) -> Reply:  # fmt: skip
        """The reply a stored turn ended with, as a ``Reply`` marked ``replayed`` (read from
        ``source`` when the slot no longer holds it: a turn undone), read against ``schema``;
        ``model`` when its record names none."""
        history = source if source is not None else self.store.history(self.session_id, slot)
        produced = history.messages(record.start, record.end)
        message = next((m for m in reversed(produced) if m.role == "assistant"), None)
        steps = steps_of(self.namespace.expand(produced))  # a result kept aside shows whole, as it did live
        if message is None:
            raise ConfigError(f"turn {record.number} of slot {slot!r} has no reply to show")
        info = record.info
        parsed, problem = read_reply(message.content, schema)
        notes = () if source is None else (f"this turn was undone on slot {slot}: %slot redo brings it back",)
        return Reply(
            message.content, message, info.usage or Usage(), info.model or model, slot, record.number,
            info.finish_reason, info.cost, info, replayed=True, steps=steps,
            notes=(*notes, problem) if problem else notes, parsed=parsed,
        )  # fmt: skip


class _SlotNames(Container[str]):
    """The names of a session's live slots, each asked of the store when looked up."""

    def __init__(self, store: Store, session_id: str) -> None:
        self._store, self._session_id = store, session_id

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self._store.has_slot(self._session_id, name)
