"""The state file: damaged, read-only, foreign and older files are refused untouched or opened
safely, paths are checked, files and folders are private, and recover() saves what it can.

Damage here is real: bytes of a page overwritten, or the file cut short, in a copy of a store
written through the Session.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import sqlite3
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import slotmagic
from slotmagic import ConfigError, Message, Session, SQLiteStore, StoreError
from slotmagic._store import opening, recovery
from slotmagic._store.migrations import APPLICATION_ID, MIGRATIONS, migrate


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def wal_bytes(path: Path) -> int:
    """The size of the file's WAL; a WAL removed by the last connection's close holds nothing."""
    try:
        return Path(f"{path}-wal").stat().st_size
    except FileNotFoundError:
        return 0


def one_line(exc: BaseException) -> str:
    text = str(exc)
    assert "\n" not in text and text, text
    return text


@pytest.fixture(scope="module")
def real_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store with two sessions, a derived slot and ~80 messages over many pages."""
    path = tmp_path_factory.mktemp("real") / "state.sqlite3"
    with Session.open("nb", db_path=path) as session:
        for i in range(30):
            session.submit_turn(f"question {i} " + "q" * 1500)
        session.derive_slot("branch", at=40)
        session.switch_slot("branch")
        for i in range(5):
            session.submit_turn(f"on the branch {i} " + "b" * 800)
        session.append([Message.user("a note " + "n" * 3000)], slot="default")
    with Session.open("other", db_path=path) as session:
        session.submit_turn("in another session")
    return path


@pytest.fixture
def store_copy(real_store: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "state.sqlite3"
    shutil.copy(real_store, copy)
    return copy


def pages_of(path: Path, table: str, kind: str = "leaf") -> list[int]:
    with contextlib.closing(sqlite3.connect(path)) as db:
        return [p for (p,) in db.execute("SELECT pageno FROM dbstat WHERE name = ? AND pagetype = ?", (table, kind))]


def overwrite_page(path: Path, page: int) -> None:
    size = 4096
    with open(path, "r+b") as f:
        f.seek((page - 1) * size + (100 if page == 1 else 0))
        f.write(b"\xde\xad\xbe\xef" * 256)


def histories(path: Path, session_id: str) -> dict[str, list[tuple[str, str]]]:
    with Session.open(session_id, db_path=path) as session:
        return {s.id: [(m.role, m.content) for m in session.messages(s.id)] for s in session.list_slots()}


def check_whole(path: Path) -> None:
    """The file passes SQLite's check and every slot's counters and turns match its rows."""
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert db.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID
        session_ids = [s for (s,) in db.execute("SELECT id FROM sessions")]
    for session_id in session_ids:
        with Session.open(session_id, db_path=path) as session:
            for slot in session.list_slots():
                messages = session.messages(slot.id)
                turns = session.history.turns(slot.id)
                assert slot.meta.message_count == len(messages) == sum(t.count for t in turns), slot.id
                assert slot.meta.total_tokens == sum(m.tokens for m in messages)
                for turn in turns:
                    if turn.info.kind == "turn":
                        roles = [m.role for m in messages[turn.start : turn.end]]
                        assert roles[0] == "user" and roles[-1] == "assistant", roles  # tool rounds between


# -- damaged files --------------------------------------------------------------------------------


@pytest.mark.parametrize("where", ["schema", "slots", "messages", "messages-index", "turns", "last"])
def test_a_damaged_page_is_refused_at_open_without_a_write(store_copy: Path, where: str) -> None:
    table = {"schema": None, "last": None, "messages-index": "sqlite_autoindex_messages_1"}.get(where, where)
    if where == "schema":
        page = 1
    elif where == "last":
        page = store_copy.stat().st_size // 4096
    else:
        found = pages_of(store_copy, str(table)) or pages_of(store_copy, str(table), "internal")
        page = found[len(found) // 2]
    overwrite_page(store_copy, page)
    before = digest(store_copy)
    with pytest.raises(StoreError) as caught:
        Session.open("nb", db_path=store_copy)
    message = one_line(caught.value)
    assert f"the state file {store_copy} is damaged" in message
    assert f"slotmagic.recover('{store_copy}', replace=True)" in message
    assert digest(store_copy) == before
    assert wal_bytes(store_copy) == 0


def test_a_truncated_file_is_refused_without_a_write(store_copy: Path) -> None:
    with open(store_copy, "r+b") as f:
        f.truncate(store_copy.stat().st_size // 2)
    before = digest(store_copy)
    with pytest.raises(StoreError, match="is damaged") as caught:
        Session.open("nb", db_path=store_copy)
    one_line(caught.value)
    assert digest(store_copy) == before


def checks_at_open(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The integrity checks every SQLite connection made from now on runs."""
    seen: list[str] = []
    connect = sqlite3.connect

    def tracing(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        db = connect(*args, **kwargs)
        db.set_trace_callback(lambda sql: seen.append(sql) if "quick_check" in sql else None)
        return db

    monkeypatch.setattr(sqlite3, "connect", tracing)
    return seen


def test_a_file_found_whole_is_not_checked_again_until_it_changes(
    store_copy: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    time.sleep(2 * opening.SETTLED_NS / 1e9)  # a check begun this soon after a change counts for nothing
    checks = checks_at_open(monkeypatch)
    with Session.open("nb", db_path=store_copy) as session:
        assert len(checks) == 1  # checked, through the connection the store keeps
        expected = session.messages()
    with Session.open("nb", db_path=store_copy) as session:
        assert len(checks) == 1 and session.messages() == expected  # unchanged since: not again
        session.submit_turn("a change")
    time.sleep(2 * opening.SETTLED_NS / 1e9)
    with Session.open("nb", db_path=store_copy):
        assert len(checks) == 1  # written since, and closed whole by the store that wrote it: not again
    opening._FOUND_WHOLE.clear()  # as a new process finds it: the record on disk says so too
    with Session.open("nb", db_path=store_copy):
        assert len(checks) == 1
    # Damage written in place, the size unchanged, after it was known whole: refused.
    overwrite_page(store_copy, pages_of(store_copy, "messages")[1])
    before = digest(store_copy)
    with pytest.raises(StoreError, match="is damaged"):
        Session.open("nb", db_path=store_copy)
    assert len(checks) == 2 and digest(store_copy) == before and wal_bytes(store_copy) == 0


def test_a_file_changed_within_a_clock_tick_of_its_check_is_checked_again(
    store_copy: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """File times come from a clock that may tick every 10 ms: a change that soon after the
    one before can keep the same times, so a check begun that soon is not taken as lasting."""
    monkeypatch.setattr(opening, "SETTLED_NS", 10**12)  # every change counts as that soon
    checks = checks_at_open(monkeypatch)
    for _ in range(3):
        Session.open("nb", db_path=store_copy).close()
    assert len(checks) == 3


def test_damage_found_by_a_read_stops_every_write(store_copy: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Past the size checked whole at open (here: as if the file were larger), damage is found
    by the read that meets it; from then on nothing is written, and reads elsewhere work."""
    monkeypatch.setattr(opening, "FULL_CHECK_BYTES", 0)
    leaves = pages_of(store_copy, "messages")
    overwrite_page(store_copy, leaves[len(leaves) // 3])
    before = digest(store_copy)
    session = Session.open("nb", db_path=store_copy)
    other = Session.open("other", store=session.store)
    with pytest.raises(StoreError, match="is damaged") as caught:
        session.messages("default")
    one_line(caught.value)
    assert session.store.damaged  # type: ignore[attr-defined]
    assert other.messages()[0].content == "in another session"  # other pages read fine
    with pytest.raises(StoreError, match="slotmagic will not write to it"):
        other.submit_turn("one more")
    with pytest.raises(StoreError, match="slotmagic will not write to it"):
        session.create_slot("new")
    with pytest.raises(StoreError, match="slotmagic will not write to it"):
        session.append([Message.user("x")], slot="branch")
    session.close()
    assert digest(store_copy) == before


def test_damage_in_a_file_with_committed_turns_in_its_wal_is_not_checkpointed_into_it(
    store_copy: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Closing a damaged store would move the WAL's turns into the file: it does not."""
    monkeypatch.setattr(opening, "FULL_CHECK_BYTES", 0)
    leaves = pages_of(store_copy, "messages")
    overwrite_page(store_copy, leaves[0])
    before = digest(store_copy)
    session = Session.open("nb", db_path=store_copy)
    other = Session.open("other", store=session.store)
    other.submit_turn("stored in the WAL")  # before the damage is known
    with pytest.raises(StoreError, match="is damaged"):
        session.messages("default")
    session.close()
    assert digest(store_copy) == before
    wal = Path(f"{store_copy}-wal")
    assert wal.stat().st_size > 0  # the turn waits in the WAL, for recover() to read


def test_recover_saves_every_readable_turn_and_says_what_was_lost(store_copy: Path) -> None:
    expected_other = histories(store_copy, "other")
    expected = histories(store_copy, "nb")
    leaves = pages_of(store_copy, "messages")
    overwrite_page(store_copy, leaves[len(leaves) // 2])
    before = digest(store_copy)
    report = slotmagic.recover(store_copy)
    assert digest(store_copy) == before  # the damaged file is only read
    target = Path(report.target)
    assert target == store_copy.with_name("state.recovered.sqlite3")
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert not report.complete and report.lost_turns >= 1 and report.lost_messages >= 2
    assert report.sessions == 2 and report.slots == 3
    text = one_line(Exception(str(report)))
    assert f"recovered {store_copy} into {target}" in text and "lost" in text
    check_whole(target)
    assert histories(target, "other") == expected_other
    recovered = histories(target, "nb")
    for slot, messages in recovered.items():
        # What is kept is the old history with whole turns left out, in order.
        old = iter(expected[slot])
        assert all(message in old for message in messages), slot
    kept = sum(len(m) for m in recovered.values())
    assert kept >= sum(len(m) for m in expected.values()) - 2 * report.lost_messages - 20
    with Session.open("nb", db_path=target) as session:  # and it takes turns again
        session.submit_turn("after recovery")
        assert session.messages()[-2].content == "after recovery"


def test_recover_with_replace_puts_the_recovered_file_in_place(store_copy: Path) -> None:
    expected = histories(store_copy, "nb")
    overwrite_page(store_copy, pages_of(store_copy, "sqlite_autoindex_messages_1")[0])  # an index only
    with pytest.raises(StoreError, match="is damaged"):
        Session.open("nb", db_path=store_copy)
    report = slotmagic.recover(store_copy, replace=True)
    assert report.complete, str(report)
    assert report.target == str(store_copy) and report.moved_to == f"{store_copy}.damaged"
    assert Path(f"{store_copy}.damaged").exists()
    assert histories(store_copy, "nb") == expected  # every row was readable through the table
    check_whole(store_copy)


def test_recover_a_truncated_file(store_copy: Path) -> None:
    with open(store_copy, "r+b") as f:
        f.truncate(store_copy.stat().st_size * 2 // 3)
    report = slotmagic.recover(store_copy, store_copy.with_name("saved.sqlite3"))
    assert report.target == str(store_copy.with_name("saved.sqlite3"))
    assert report.sessions == 2 and report.messages > 0
    check_whole(Path(report.target))


def queries_on_the_damaged_file(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every statement recover() runs on the file it reads, as it runs it."""
    seen: list[str] = []

    def counted(path: str, timeout: float) -> sqlite3.Connection:
        db = opening.connect_readonly(path, timeout)
        db.set_trace_callback(seen.append)
        return db

    monkeypatch.setattr(recovery, "connect_readonly", counted)
    return seen


@pytest.mark.parametrize("kept", [0.3, 0.5, 2 / 3, 0.8, 0.95])
def test_recover_reads_a_cut_file_in_a_bounded_number_of_queries(
    store_copy: Path, monkeypatch: pytest.MonkeyPatch, kept: float
) -> None:
    # A page past the end of a cut file can read as rows of another place, out of rowid order
    # (a reader trusting them went round in circles); the turns_cached index moves the turns'
    # pages to the cut part.
    with sqlite3.connect(store_copy) as db:
        assert db.execute("SELECT 1 FROM sqlite_master WHERE name = 'turns_cached'").fetchone()
    pages = store_copy.stat().st_size // 4096
    with open(store_copy, "r+b") as f:
        f.truncate(int(store_copy.stat().st_size * kept))
    seen = queries_on_the_damaged_file(monkeypatch)
    report = slotmagic.recover(store_copy, store_copy.with_name("saved.sqlite3"))
    tables = len([q for q in seen if q.startswith("PRAGMA table_info")])
    assert len(seen) <= 20 + tables * (recovery.PROBES_PER_STRETCH * (pages + 2) + 1)  # the bound, by design
    assert len(seen) < 1_000  # and what it takes here (~250)
    assert report.sessions == 2 and report.unreadable and not report.complete
    check_whole(Path(report.target))


def test_recover_stops_reading_a_table_whose_queries_ran_out_and_counts_the_rest_as_lost(
    store_copy: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    expected = histories(store_copy, "nb")
    with open(store_copy, "r+b") as f:
        f.truncate(store_copy.stat().st_size * 9 // 10)
    pages = store_copy.stat().st_size // 4096
    # A query a page and a row a query: the ~80 messages need more queries than the file has pages.
    monkeypatch.setattr(recovery, "PROBES_PER_STRETCH", 1)
    monkeypatch.setattr(recovery, "_BATCH", 1)
    seen = queries_on_the_damaged_file(monkeypatch)
    report = slotmagic.recover(store_copy, store_copy.with_name("saved.sqlite3"))
    assert len([q for q in seen if "FROM messages WHERE rowid" in q]) == pages + 3
    assert report.sessions == 2 and 0 < report.messages < 80
    assert report.unreadable["messages"] >= 1 and not report.complete
    assert "unreadable" in one_line(Exception(str(report)))
    check_whole(Path(report.target))
    recovered = histories(Path(report.target), "nb")
    for slot, messages in recovered.items():
        old = iter(expected[slot])
        assert all(message in old for message in messages), slot


def test_recover_reads_turns_still_in_the_wal(store_copy: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(opening, "FULL_CHECK_BYTES", 0)
    overwrite_page(store_copy, pages_of(store_copy, "messages")[0])
    session = Session.open("nb", db_path=store_copy)
    Session.open("other", store=session.store).submit_turn("only in the WAL")
    with pytest.raises(StoreError):
        session.messages("default")
    session.close()
    report = slotmagic.recover(store_copy)
    with Session.open("other", db_path=report.target) as recovered:
        assert recovered.messages()[-2].content == "only in the WAL"


def test_recover_refuses_what_it_cannot_do(store_copy: Path, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no state file"):
        slotmagic.recover(tmp_path / "missing.sqlite3")
    with pytest.raises(ConfigError, match="already exists"):
        slotmagic.recover(store_copy, store_copy)
    overwrite_page(store_copy, 1)
    with pytest.raises(StoreError, match=r"nothing in .* can be read") as caught:
        slotmagic.recover(store_copy)
    one_line(caught.value)
    assert not store_copy.with_name("state.recovered.sqlite3").exists()


def test_recover_an_intact_file_copies_it_whole(store_copy: Path) -> None:
    report = slotmagic.recover(store_copy)
    assert report.complete and "nothing was lost" in str(report)
    assert histories(Path(report.target), "nb") == histories(store_copy, "nb")


def stateful_session(path: Path) -> dict[str, Any]:
    """A session holding everything beside its histories: a large tool result, pins and an
    exclusion, a compaction, working context on two slots, a workflow, a calibration."""
    lease = "".join(f"row {i:05d} of the lease, with its clauses\n" for i in range(8_000))
    with Session.open("nb", db_path=path, model="echo") as session:

        def fetch_lease() -> str:
            """The whole lease."""
            return lease

        session.tools.add(fetch_lease)
        session.submit_turn("Read the lease.\ncall fetch_lease")
        for i in range(6):
            session.submit_turn(f"question {i} " + "q" * 1500)
        session.history.pin(0)
        session.history.exclude(5)
        session.context.add_goal("get the deposit back")
        session.context.decide("court or letter", "letter first", "cheaper")
        session.compactions.compact(keep=4)
        session.workflows.define("claim", "letter -> court")
        session.derive_slot("branch")
        session.context.add_goal("try mediation", slot="branch")
        session.store.update_meta("calibration", lambda _: json.dumps({"anthropic:claude-sonnet-4-5": [1.2]}))
        return {
            "views": {slot: session.view(slot) for slot in ("default", "branch")},
            "expanded": session.messages(expand=True),
            "marks": session.history.marks(),
            "compactions": session.compactions(),
            "context": {slot: str(session.context(slot)) for slot in ("default", "branch")},
            "workflow": session.workflows.get(),
            "calibration": session.store.meta("calibration"),
        }


def test_recover_carries_what_a_session_holds_beside_its_histories(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite3"
    before = stateful_session(path)
    assert lease_in(before["expanded"]) and before["marks"] and before["compactions"]
    report = slotmagic.recover(path)
    assert report.complete, str(report)
    with Session.open("nb", db_path=report.target, model="echo") as recovered:
        assert {slot: recovered.view(slot) for slot in ("default", "branch")} == before["views"]
        assert recovered.messages(expand=True) == before["expanded"]  # the large result, whole
        assert recovered.history.marks() == before["marks"]
        assert recovered.compactions() == before["compactions"]
        assert {slot: str(recovered.context(slot)) for slot in ("default", "branch")} == before["context"]
        assert recovered.workflows.get() == before["workflow"]
        assert recovered.store.meta("calibration") == before["calibration"]
        recovered.submit_turn("and it goes on")


def test_recover_drops_state_that_no_longer_fits_a_cut_history_and_says_so(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite3"
    stateful_session(path)
    with Session.open("other", db_path=path, model="echo") as other:
        other.submit_turn("elsewhere")
        other.history.pin(1)
    leaves = pages_of(path, "messages")
    overwrite_page(path, leaves[len(leaves) // 2])  # the middle of the nb session's turns
    report = slotmagic.recover(path)
    assert report.lost_turns >= 1 and not report.complete
    assert report.dropped.get("marks", 0) >= 2 and report.dropped.get("compactions") == 1
    assert "not kept: 1 compaction, " in str(report) and "pins or exclusions" in str(report)
    check_whole(Path(report.target))
    with Session.open("nb", db_path=report.target, model="echo") as recovered:
        assert recovered.history.marks() == {} and recovered.compactions() == []  # would point elsewhere now
        assert recovered.workflows.get().name == "claim"  # per session: kept
        # A plain full view again: the workflow block, then every message kept.
        assert [m for m in recovered.view() if m.role != "system"] == recovered.messages()
    with Session.open("other", db_path=report.target, model="echo") as other:
        assert other.history.marks() == {1: "pin"}  # an intact history keeps its pins


def lease_in(messages: list[Message]) -> bool:
    return any(m.content.startswith("row 00000 of the lease") for m in messages)


# -- read-only files ---------------------------------------------------------------------------------

READONLY_CHILD = """
import json, logging, os, sys
from slotmagic import Session, StoreError
logging.basicConfig(level=logging.WARNING, format="%(message)s")
path = sys.argv[1]
with Session.open("warm-up", db_path=":memory:") as warm:  # lazy imports, before they are out of reach
    warm.submit_turn("hi")
if os.geteuid() == 0:  # root writes whatever the permissions say: be someone else
    os.setgid(65534)
    os.setuid(65534)
out = {}
session = Session.open("nb", db_path=path)
out["readonly"] = session.store.readonly
out["messages"] = len(session.messages())
out["branch"] = session.messages("branch")[-2].content[:15]
out["search"] = [h.slot for h in session.history.search("branch 4")][:1]
for name, write in [("turn", lambda: session.submit_turn("x")), ("derive", lambda: session.derive_slot("y")),
                    ("switch", lambda: session.switch_slot("branch")), ("undo", lambda: session.history.undo("branch")),
                    ("pin", lambda: session.history.pin(0)), ("gc", lambda: session.history.gc())]:
    try:
        write()
        out[name] = "written"
    except StoreError as exc:
        out[name] = str(exc)
session.close()
try:
    Session.open("a-new-session", db_path=path)
    out["new_session"] = "opened"
except StoreError as exc:
    out["new_session"] = str(exc)
print(json.dumps(out))
"""


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A folder another user can enter: the read-only tests run as 'nobody' when run as root
    (root writes whatever the permissions say)."""
    folder = Path(tempfile.mkdtemp(prefix="slotmagic-ro-"))
    folder.chmod(0o755)
    yield folder
    for path in folder.rglob("*"):
        path.chmod(0o700 if path.is_dir() else 0o600)
    shutil.rmtree(folder)


def run_unprivileged(code: str, *args: str) -> dict[str, Any]:
    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    result["stderr"] = done.stderr
    return result


def give_away(path: Path) -> None:
    if os.geteuid() == 0:
        os.chown(path, 65534, 65534)


@pytest.mark.parametrize("what", ["file", "folder"])
def test_a_read_only_store_opens_for_reading_and_refuses_writes_in_one_line(
    real_store: Path, shared_dir: Path, what: str
) -> None:
    folder = shared_dir / "store"
    folder.mkdir()
    path = folder / "state.sqlite3"
    shutil.copy(real_store, path)
    give_away(path)
    if what == "file":
        give_away(folder)
        path.chmod(0o400)
    else:
        path.chmod(0o600)
        folder.chmod(0o555)
    before = digest(path)
    out = run_unprivileged(READONLY_CHILD, str(path))
    reason = "the file is not writable" if what == "file" else "its folder is not writable"
    expected = (
        f"the state file {path} is read-only ({reason}): slots can be read but nothing can be stored; "
        "make it writable (chmod u+w on the file and its folder) or point SLOTMAGIC_DB at a copy"
    )
    assert out["readonly"] is True
    assert out["messages"] == 50 and out["branch"] == "on the branch 4"
    assert out["turn"] == out["derive"] == out["switch"] == expected
    assert out["undo"] == out["pin"] == out["gc"] == expected and out["search"] == ["branch"]
    assert out["new_session"] == expected
    assert out["stderr"].count("is read-only") == 2  # said once per opening
    assert digest(path) == before
    assert sorted(p.name for p in folder.iterdir())[0] == "state.sqlite3"


# -- paths ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("", "db_path is empty"),
        ("   ", "db_path is empty"),
        (5, "not int"),
        (b"state.sqlite3", "not bytes"),
        ("a\x00b", "NUL"),
        ("bad\udcff.sqlite3", "lone surrogate"),
        (".", "is a folder"),
    ],
)
def test_bad_paths_are_refused_and_create_nothing(
    value: object, expected: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    for opener in (lambda: Session.open("x", db_path=value), lambda: SQLiteStore(value)):  # type: ignore[arg-type]
        with pytest.raises(ConfigError, match=expected) as caught:
            opener()
        one_line(caught.value)
    assert list(tmp_path.iterdir()) == []


def test_bad_paths_from_the_magics_are_one_line(ip: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from IPython.core.error import UsageError

    import slotmagic as package

    ip.run_cell("%config SlotMagic.db_path = 5")  # refused by the setting itself, kept as it was
    assert ip.config.SlotMagic.get("db_path") in (None, "")
    ip.run_cell("%config SlotMagic.db_path = '   '")
    with pytest.raises(UsageError, match="db_path is empty"):
        ip.run_cell("%slot")
    ip.run_cell(f"%config SlotMagic.db_path = {str(tmp_path)!r}")
    with pytest.raises(UsageError, match="is a folder"):
        ip.run_cell("%slot")
    ip.run_cell("%config SlotMagic.db_path = ''")  # empty: the default again
    ip.run_cell("%slot")
    package.unload_ipython_extension(ip)
    ip.config.pop("SlotMagic", None)
    monkeypatch.setenv("SLOTMAGIC_DB", str(tmp_path))
    with pytest.raises(UsageError, match="is a folder") as caught:
        package.load_ipython_extension(ip)
    one_line(caught.value)
    monkeypatch.setenv("SLOTMAGIC_DB", str(tmp_path / "ok.sqlite3"))
    package.load_ipython_extension(ip)


# -- whose file it is ---------------------------------------------------------------------------------------


def test_someone_elses_database_is_refused_untouched(tmp_path: Path) -> None:
    path = tmp_path / "notes.db"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE notes (body TEXT)")
        db.execute("INSERT INTO notes VALUES ('mine')")
    db.close()
    before = digest(path)
    with pytest.raises(StoreError) as caught:
        Session.open("x", db_path=path)
    assert one_line(caught.value) == (
        f"{path} is not a slotmagic store (it holds other tables: notes); slotmagic leaves it untouched: "
        "point SLOTMAGIC_DB (or db_path) at another file"
    )
    assert digest(path) == before
    with sqlite3.connect(path) as db:
        assert [n for (n,) in db.execute("SELECT name FROM sqlite_master")] == ["notes"]
    db.close()


def test_a_database_marked_as_another_applications_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "other.sqlite3"
    db = sqlite3.connect(path)
    db.execute("PRAGMA application_id = 1234")
    db.close()
    before = digest(path)
    with pytest.raises(StoreError, match=r"application_id 0x4d2\); slotmagic leaves it untouched"):
        SQLiteStore(path)
    assert digest(path) == before


def test_a_slotmagic_file_with_extra_tables_is_refused_only_without_the_mark(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite3"
    SQLiteStore(path).close()
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE mine (x)")  # the mark says whose it is; extra tables are allowed
    db.close()
    SQLiteStore(path).close()
    with sqlite3.connect(path) as db:
        db.execute("PRAGMA application_id = 0")
    db.close()
    with pytest.raises(StoreError, match=r"holds other tables: mine\)"):
        SQLiteStore(path)


def test_new_and_empty_files_are_marked(tmp_path: Path) -> None:
    empty = tmp_path / "empty.sqlite3"
    empty.touch()
    for path in (tmp_path / "new.sqlite3", empty):
        SQLiteStore(path).close()
        with sqlite3.connect(path) as db:
            assert db.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID
        db.close()


# -- several processes making one new file at once ----------------------------------------------


def test_a_new_file_another_process_is_making_is_waited_for(tmp_path: Path) -> None:
    """While another process writes a new file's first page (turning it to WAL), SQLite
    answers "locked" at once instead of waiting: opening failed with "stayed locked by another
    process for 10 s" after 0.00 s."""
    import threading

    path = tmp_path / "new.sqlite3"
    path.touch()
    other = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    other.execute("BEGIN IMMEDIATE")  # as that process holds it while it writes page 1
    committing = threading.Event()

    def commit() -> None:
        committing.set()
        other.execute("COMMIT")

    release = threading.Timer(0.5, commit)
    release.start()
    SQLiteStore(path).close()
    assert committing.is_set()  # it waited for the other process
    release.join()
    other.close()
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    db.close()


def test_a_file_read_while_another_process_makes_it_is_not_taken_for_someone_elses(tmp_path: Path) -> None:
    """Its mark, version and tables are read as of one moment: read between two commits of the
    process making it, the file looked like another application's ("it holds other tables")."""
    path = tmp_path / "new.sqlite3"
    maker = sqlite3.connect(path, isolation_level=None)
    maker.execute("PRAGMA journal_mode = WAL")

    class MadeMeanwhile(sqlite3.Connection):
        def execute(self, sql: str, *args: Any) -> sqlite3.Cursor:
            cursor = super().execute(sql, *args)
            if "user_version" in sql:
                migrate(maker)  # the other process commits the whole store right now
            return cursor

    reader = opening.connect_readonly(str(path), 1.0, MadeMeanwhile)
    try:
        assert opening.identify(reader, str(path)).empty  # as it was when the reading began
        assert opening.identify(reader, str(path)).version == len(MIGRATIONS)  # and now: slotmagic's
    finally:
        reader.close()
        maker.close()


def write_old_store(path: Path, version: int) -> None:
    """A file as slotmagic wrote it at schema ``version``, before files were marked."""
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode = WAL")
    migrate(db, MIGRATIONS[:version])
    db.execute("PRAGMA application_id = 0")
    db.execute("INSERT INTO sessions (id, current_slot, created_at) VALUES ('nb', 1, 0)")
    db.execute(
        "INSERT INTO slots (id, session_id, name, length, tokens, turns, config, created_at)"
        " VALUES (1, 'nb', 'default', 2, 10, 1, '{}', 0)"
    )
    db.execute("INSERT INTO messages VALUES (1, 0, 1, 'user', 'hi', 5, NULL, 0)")
    db.execute("INSERT INTO messages VALUES (1, 1, 1, 'assistant', 'hello', 5, NULL, 0)")
    db.execute("""INSERT INTO turns VALUES (1, 1, 0, 2, '{"kind": "turn"}', 0)""")
    db.close()
    for name in (f"{path}.v{version}.bak", f"{path}.v{version}-2.bak"):
        Path(name).unlink(missing_ok=True)  # what writing it at an older version left


def test_an_older_schema_is_backed_up_before_it_is_migrated(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite3"
    write_old_store(path, 1)
    with Session.open("nb", db_path=path) as session:
        assert [m.content for m in session.messages()] == ["hi", "hello"]
        session.submit_turn("after the upgrade")
    backup = tmp_path / "state.sqlite3.v1.bak"
    assert stat.S_IMODE(backup.stat().st_mode) == 0o600
    with sqlite3.connect(backup) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == 1
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert [c for (c,) in db.execute("SELECT content FROM messages ORDER BY seq")] == ["hi", "hello"]
        assert db.execute("SELECT name FROM sqlite_master WHERE name = 'turns_by_cell'").fetchone() is None
    db.close()
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS)
        assert db.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID
    db.close()
    Session.open("nb", db_path=path).close()  # already current: no second backup
    assert sorted(p.name for p in tmp_path.glob("*.bak")) == ["state.sqlite3.v1.bak"]


def test_a_current_file_from_before_the_mark_is_marked_without_a_backup(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite3"
    write_old_store(path, len(MIGRATIONS))
    with Session.open("nb", db_path=path) as session:
        assert len(session.messages()) == 2
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID
    db.close()
    assert list(tmp_path.glob("*.bak")) == []


def test_a_newer_schema_is_refused_untouched(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite3"
    SQLiteStore(path).close()
    with sqlite3.connect(path) as db:
        db.execute(f"PRAGMA user_version = {len(MIGRATIONS) + 1}")
    db.close()
    before = digest(path)
    with pytest.raises(StoreError, match="upgrade slotmagic") as caught:
        Session.open("nb", db_path=path)
    one_line(caught.value)
    assert digest(path) == before and list(tmp_path.glob("*.bak")) == []


# -- permissions ------------------------------------------------------------------------------------------------


def test_folders_and_files_slotmagic_creates_are_private(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b" / "c" / "state.sqlite3"
    with Session.open("p", db_path=path) as session:
        session.submit_turn("secret plans")
        for name in ("", "-wal", "-shm"):
            assert stat.S_IMODE(Path(f"{path}{name}").stat().st_mode) == 0o600, name
        for folder in (tmp_path / "a", tmp_path / "a" / "b", tmp_path / "a" / "b" / "c"):
            assert stat.S_IMODE(folder.stat().st_mode) == 0o700, folder


def test_reopening_a_whole_file_runs_few_statements(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Session.open is what a notebook pays on every restart: a file in WAL mode is not put in
    # WAL mode again, and the session's row is read with its slots, not once more beside them.
    path = tmp_path / "state.sqlite3"
    with Session.open("s", db_path=path) as session:
        session.append([Message.user("q"), Message.assistant("a")])
    with Session.open("s", db_path=path):
        pass  # the file is now known whole to this process: no integrity check below
    seen: list[str] = []
    connect = SQLiteStore._connect

    def traced(self: SQLiteStore, target: str) -> Any:
        db = connect(self, target)
        db.set_trace_callback(seen.append)
        return db

    monkeypatch.setattr(SQLiteStore, "_connect", traced)
    with Session.open("s", db_path=path) as session:
        assert [m.content for m in session.messages()] == ["q", "a"]
    statements = [" ".join(s.split()) for s in seen if not s.startswith("--")]
    assert not any("journal_mode =" in s for s in statements), statements
    assert sum("current_slot" in s for s in statements) == 2, statements  # does it exist; with its slots
    assert len(statements) <= 8, statements


def opened_statements(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The statements the stores opened from now on run, comments left out."""
    seen: list[str] = []
    connect = SQLiteStore._connect

    def traced(self: SQLiteStore, target: str) -> Any:
        db = connect(self, target)
        db.set_trace_callback(lambda sql: None if sql.startswith("--") else seen.append(" ".join(sql.split())))
        return db

    monkeypatch.setattr(SQLiteStore, "_connect", traced)
    return seen


def test_reopening_a_file_unchanged_since_it_was_found_whole_does_not_read_whose_it_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Its mark, schema version and journal mode are as they were when the store that wrote it
    # last closed it, having found it whole: the statement that reads them (and compiles three
    # pragma tables) is not run, nor the check, in this process or another.
    path = tmp_path / "state.sqlite3"
    with Session.open("s", db_path=path) as session:
        session.append([Message.user("q"), Message.assistant("a")])
    time.sleep(2 * opening.SETTLED_NS / 1e9)  # its times settled: remembered as whole
    statements = opened_statements(monkeypatch)
    for forgotten in (False, True):
        if forgotten:
            opening._FOUND_WHOLE.clear()  # as another process: the record on disk
        statements.clear()
        with Session.open("s", db_path=path) as session:
            assert [m.content for m in session.messages()] == ["q", "a"]
        assert not any("application_id" in s or "quick_check" in s for s in statements), statements
        assert len(statements) <= 6, statements


def test_a_file_changed_since_it_was_found_whole_is_read_again(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite3"
    Session.open("s", db_path=path).close()
    time.sleep(2 * opening.SETTLED_NS / 1e9)
    Session.open("s", db_path=path).close()  # found whole: kept
    with sqlite3.connect(path) as db:  # in place, the size unchanged
        db.execute(f"PRAGMA user_version = {len(MIGRATIONS) + 1}")
    db.close()
    with pytest.raises(StoreError, match="upgrade slotmagic"):
        Session.open("s", db_path=path)
    with sqlite3.connect(path) as db:
        db.execute(f"PRAGMA user_version = {len(MIGRATIONS)}")
        db.execute("PRAGMA application_id = 1234")
    db.close()
    with pytest.raises(StoreError, match="not a slotmagic store"):
        Session.open("s", db_path=path)
