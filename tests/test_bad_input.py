"""Bad input is one line, never a traceback, and never stored.

One test per case listed in issue 8 ("bad input that gets a raw traceback or stores bad data"),
then property-based tests (hypothesis) over slot ids, message content and magic lines.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from IPython.core.error import UsageError

from slotmagic import (
    ConfigError,
    ContextBudget,
    FocusedConfig,
    InvalidSlotId,
    Message,
    Session,
    SlotConfig,
    SlotMagicError,
    ToolCall,
)
from slotmagic._core.slots import validate_slot_id
from slotmagic._errors import OverBudget
from slotmagic._magics.parsing import at_least


@pytest.fixture
def db_path(store_target: str) -> str:
    """The tests on a session run on a SQLite file and on a PostgreSQL schema."""
    return store_target


@pytest.fixture
def session(db_path: Path) -> Iterator[Session]:
    with Session.open("bad", db_path=db_path) as opened:
        opened.submit_turn("first")
        opened.submit_turn("second")
        opened.create_slot("a")
        yield opened


def refused(call: Callable[[], object], kind: type[SlotMagicError] = ConfigError, match: str | None = None) -> str:
    with pytest.raises(kind, match=match) as caught:
        call()
    text = str(caught.value)
    assert text and "\n" not in text, text
    return text


def stored(session: Session) -> dict[str, Any]:
    """Everything the store holds for the session, to compare before and after."""
    return {s.id: (s.config, [m.to_dict() for m in session.messages(s.id)]) for s in session.list_slots()}


# -- the cases listed in the issue -----------------------------------------------------------------


def test_fork_points_must_be_whole_turn_boundaries(session: Session) -> None:
    before = stored(session)
    refused(lambda: session.derive_slot("x", parent="default", at=2.5), match="whole number")
    assert "such as 0 or 2" in refused(lambda: session.derive_slot("x", parent="default", at=1), match="inside a turn")
    refused(lambda: session.derive_slot("x", parent="default", at="3"), match="whole number")
    refused(lambda: session.derive_slot("x", parent="default", at=9), match="use 0 to 4")
    assert stored(session) == before
    assert session.derive_slot("x", parent="default", at=2).meta.message_count == 2


@pytest.mark.parametrize(
    "where",
    ["turn", "append", "preset", "system", "info", "slot system", "summary", "tool call", "name"],
)
def test_a_lone_surrogate_is_one_line_anywhere(session: Session, where: str) -> None:
    bad = "hi \ud800"
    calls: dict[str, Callable[[], object]] = {
        "turn": lambda: session.submit_turn(bad),
        "append": lambda: session.append([Message.user(bad)]),
        "preset": lambda: session.create_slot("s", messages=[Message.user(bad)]),
        "system": lambda: session.submit_turn("hi", system=bad),
        "info": lambda: session.append([Message.user("x")], info={"note": bad}),
        "slot system": lambda: session.configure_slot("a", system=bad),
        "summary": lambda: FocusedConfig(summary_override=bad),
        "tool call": lambda: ToolCall("id", "name", bad),
        "name": lambda: Message.tool("call-1", "result", name=bad),
    }
    before = stored(session)
    assert "lone surrogate" in refused(calls[where]) or where == "info"
    assert stored(session) == before


def test_a_lone_surrogate_in_a_turn_cell_is_one_line(ip: Any) -> None:
    with pytest.raises(UsageError, match="lone surrogate"):
        ip.run_cell_magic("turn", "", "hi \ud800")


@pytest.mark.parametrize(
    ("name", "call", "match"),
    [
        ("Session.open(model=5)", lambda s: Session.open("x", db_path=":memory:", model=5), "model must be a string"),
        ("submit_turn(params=5)", lambda s: s.submit_turn("x", params=5), "params must be a dict"),
        ("submit_turn(info=5)", lambda s: s.submit_turn("x", info=5), "info must be a dict"),
        ("append(info=5)", lambda s: s.append([Message.user("x")], info=5), "info must be a dict"),
        ("submit_turn(cell_id=[1])", lambda s: s.submit_turn("x", cell_id=[1]), "cell_id must be a string"),
        ("create_slot(config='full')", lambda s: s.create_slot("c", config="full"), "SlotConfig"),
        ("create_slot(messages='abc')", lambda s: s.create_slot("c", messages="abc"), "list of Message"),
        ("Message.user(None)", lambda s: Message.user(None), "must be a string"),
        ("Message.user(5)", lambda s: Message.user(5), "must be a string"),
        ("Message('bogus', 'x')", lambda s: Message("bogus", "x"), "unknown message role"),  # type: ignore[arg-type]
        ("Message('tool', 'x')", lambda s: Message("tool", "x"), "tool_call_id"),
        ("Message tool_calls", lambda s: Message("assistant", "x", tool_calls=[1]), "ToolCall"),  # type: ignore[list-item]
        ("ToolCall(1, 2)", lambda s: ToolCall(1, 2), "must be a string"),  # type: ignore[arg-type]
        ("derive_slot(at='3')", lambda s: s.derive_slot("c", at="3"), "whole number"),
        ("rename_slot(None, 'x')", lambda s: s.rename_slot(None, "x"), "invalid slot id"),
        ("export(5)", lambda s: s.history.export(5), "file path"),
        ("export('a\\x00b.md')", lambda s: s.history.export("notes\x00.md"), "cannot export to 'notes\\\\x00.md'"),
        ("Session.open(store='x')", lambda s: Session.open("x", store="x"), "store must be a slotmagic store"),
        ("Session(5, 'x')", lambda s: Session(5, "x"), "store must be a slotmagic store"),  # type: ignore[arg-type]
        (
            "Session.open(db_path, store)",
            lambda s: Session.open("x", db_path=":memory:", store=s.store),
            "a db_path or a store, not both",
        ),
        ("ContextBudget(history=-1)", lambda s: ContextBudget(history=-1), ">= 0"),
        ("FocusedConfig(summary_override=5)", lambda s: FocusedConfig(summary_override=5), "must be a string"),
        ("FocusedConfig(keep_system='no')", lambda s: FocusedConfig(keep_system="no"), "True or False"),
        ("FocusedConfig(recent_messages=True)", lambda s: FocusedConfig(recent_messages=True), "whole number"),
        ("SlotConfig(system=5)", lambda s: SlotConfig(system=5), "must be a string"),
        ("SlotConfig(focused=5)", lambda s: SlotConfig(focused=5), "FocusedConfig"),
        ("SlotConfig(budget={})", lambda s: SlotConfig(budget={}), "ContextBudget"),
        ("temperature=nan", lambda s: s.submit_turn("x", temperature=float("nan")), "finite"),
        ("temperature=inf", lambda s: s.submit_turn("x", temperature=math.inf), "finite"),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_wrong_types_and_values_are_one_line_and_store_nothing(
    session: Session, name: str, call: Callable[[Session], object], match: str
) -> None:
    before = stored(session)
    text = refused(lambda: call(session), SlotMagicError, match)
    assert "Traceback" not in text
    assert stored(session) == before


@pytest.mark.parametrize(
    "change",
    [{"system": 5}, {"focused": 5}, {"budget": 5}, {"compact": "no"}, {"mode": "bogus"}, {"source": "x"}],
    ids=str,
)
def test_a_poisoned_slot_config_is_never_stored(session: Session, change: dict[str, Any]) -> None:
    before = stored(session)
    refused(lambda: session.configure_slot("a", **change))
    assert stored(session) == before
    assert session.submit_turn("still works", slot="a").slot == "a"


def test_a_config_stored_before_it_was_checked_still_reads(session: Session) -> None:
    """Files written by an earlier slotmagic may hold a system prompt of 5: read as none."""
    store: Any = session.store
    key = store.tip("bad", "a").key
    (config,) = store._db.execute("SELECT config FROM slots WHERE id = ?", (key,)).fetchone()
    poisoned = json.loads(config)
    poisoned["system"] = 5
    poisoned.setdefault("focused", {})["summary_override"] = 7
    store._db.execute("UPDATE slots SET config = ? WHERE id = ?", (json.dumps(poisoned), key))
    store._forget()
    store._data_version = store._version = None  # read the rows again (SQLite's and PostgreSQL's marks)
    slot = session.slot("a")
    assert slot.config.system is None and slot.config.focused.summary_override is None
    session.submit_turn("works", slot="a")


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "NaN", "1e999"])
def test_the_turn_line_refuses_numbers_that_are_not_finite(ip: Any, value: str) -> None:
    with pytest.raises(UsageError, match="expected a finite number") as caught:
        ip.run_cell_magic("turn", f"--temperature={value}", "hello")
    assert "\n" not in str(caught.value)
    with pytest.raises(Exception, match="finite"):
        at_least(0, float)(value)


@pytest.mark.parametrize(
    ("variable", "value"),
    [("SLOTMAGIC_READ_TIMEOUT", "abc"), ("SLOTMAGIC_MAX_RETRIES", "x"), ("SLOTMAGIC_STREAM_THROTTLE", "x")],
)
def test_bad_environment_settings_stop_the_load_in_one_line(
    ip: Any, monkeypatch: pytest.MonkeyPatch, variable: str, value: str
) -> None:
    import slotmagic

    slotmagic.unload_ipython_extension(ip)
    monkeypatch.setenv(variable, value)
    with pytest.raises(UsageError, match=variable) as caught:
        slotmagic.load_ipython_extension(ip)
    assert "\n" not in str(caught.value)
    monkeypatch.delenv(variable)
    slotmagic.load_ipython_extension(ip)


# -- properties ---------------------------------------------------------------------------------------

# Text as users paste it: any code point, lone surrogates and NUL included.
ANY_TEXT = st.text(st.characters(codec=None, exclude_categories=()), max_size=200)


@given(st.one_of(ANY_TEXT, st.integers(), st.none(), st.binary(max_size=8)))
def test_slot_ids_are_valid_or_one_line(value: object) -> None:
    try:
        assert validate_slot_id(value) == value
    except InvalidSlotId as exc:
        assert "\n" not in str(exc)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(slot_id=ANY_TEXT)
def test_any_slot_id_creates_a_slot_or_is_refused_in_one_line(session: Session, slot_id: str) -> None:
    before = [s.id for s in session.list_slots()]
    try:
        made = session.create_slot(slot_id, exist_ok=True)
    except InvalidSlotId as exc:
        assert "\n" not in str(exc) and [s.id for s in session.list_slots()] == before
        return
    assert made.id == slot_id and session.slot(slot_id).id == slot_id


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    content=st.one_of(ANY_TEXT, st.text(alphabet="\x00\n\r\t ab\u00e9\u4e2d\U0001f600", max_size=300)),
    role=st.sampled_from(["user", "assistant", "system"]),
)
def test_any_message_content_is_stored_exactly_or_refused_in_one_line(
    session: Session, db_path: Path, content: str, role: str
) -> None:
    try:
        message = Message(role, content)  # type: ignore[arg-type]
    except ConfigError as exc:
        assert "lone surrogate" in str(exc) and "\n" not in str(exc)
        return
    record = session.append([message], slot="a")
    assert session.messages("a")[record.start].content == content
    reopened = Session.open("bad", db_path=db_path)
    assert reopened.messages("a")[record.start].content == content
    reopened.close()


def test_huge_text_is_stored_exactly(session: Session, db_path: Path) -> None:
    text = ("0123456789abcdef\x00é中😀" * 300_000)[:5_000_000]
    session.append([Message.user(text)], slot="a")
    with Session.open("bad", db_path=db_path) as reopened:
        assert reopened.messages("a")[-1].content == text
    with pytest.raises(OverBudget, match=r"^the new message alone needs [\d,]+ tokens but slot 'a' has room for"):
        session.submit_turn(text, slot="a")  # far past echo's window: refused before any call
    session.options.context_windows = {"echo": 10_000_000}
    reply = session.submit_turn(text, slot="a")
    assert reply.text.endswith(text[-50:])
    assert session.messages("a")[-2].content == text


# Magic lines: words drawn from each command's real flags and values, mangled with quotes.
WORDS = [
    "list", "create", "switch", "derive", "delete", "show", "preview", "rename", "diff", "session", "help",
    "--mode", "full", "focused", "readonly", "bogus", "--recent", "3", "-1", "2.5", "nan", "--keep-system",
    "--no-keep-system", "--summary", "--system", "--no-switch", "--from", "--focused", "--force", "--last",
    "--help", "-h", "a", "default", "b.1", "x y", "é", "--", "-", "--slot", "--model", "echo", "nope:x",
    "--temperature", "inf", "--max-tokens", "0", "--no-stream", "--rerun", "--id", "\\", "=", "--mode=full",
]  # fmt: skip
QUOTED = st.one_of(
    st.sampled_from(WORDS),
    st.sampled_from(WORDS).map(lambda w: f'"{w}'),
    st.sampled_from(WORDS).map(lambda w: f"'{w}'"),
    st.text(st.characters(codec="utf-8", exclude_characters="\n\r"), max_size=6),
)
LINES = st.lists(QUOTED, max_size=6).map(" ".join)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(line=LINES)
def test_any_slot_line_is_a_usage_error_or_works(ip: Any, line: str, capsys: pytest.CaptureFixture[str]) -> None:
    assume("session" not in line.split()[:1])  # attaching elsewhere is a success, but moves the next lines
    try:
        ip.run_line_magic("slot", line)
    except UsageError as exc:
        assert str(exc) and "\n" not in str(exc).strip(), str(exc)
    capsys.readouterr()


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(line=LINES, body=st.one_of(st.just("hello"), ANY_TEXT))
def test_any_turn_line_and_body_is_a_usage_error_or_a_reply(
    ip: Any, line: str, body: str, capsys: pytest.CaptureFixture[str]
) -> None:
    try:
        ip.run_cell_magic("turn", line, body)
    except UsageError as exc:
        assert str(exc) and "\n" not in str(exc).strip(), str(exc)
    capsys.readouterr()


@pytest.mark.parametrize(
    ("call", "what"),
    [
        (lambda s: s.delete_slot("a", force="yes"), "force"),
        (lambda s: s.delete_slot("a", missing_ok=1), "missing_ok"),
        (lambda s: s.create_slot("b", exist_ok=5), "exist_ok"),
        (lambda s: s.derive_slot("c", exist_ok="no"), "exist_ok"),
    ],
)
def test_flags_must_be_true_or_false(session: Session, call: Any, what: str) -> None:
    with pytest.raises(ConfigError, match=f"^{what} must be True or False"):
        call(session)
    assert {s.id for s in session.list_slots()} == {"default", "a"}


def test_export_to_a_folder_that_does_not_exist_is_refused_and_makes_none(ip: Any, tmp_path: Path) -> None:
    """A typo in a folder's name made that folder (and its parents) and wrote the file there."""
    missing = tmp_path / "no" / "such" / "dir"
    ip.run_cell("%%turn\nhello")
    with pytest.raises(UsageError) as refused:
        ip.run_line_magic("slot", f"export --to {missing / 'x.md'}")
    assert (
        str(refused.value)
        == f"cannot export to {missing / 'x.md'}: there is no folder {missing}; make it first, or name another"
    )
    assert not (tmp_path / "no").exists()
    ip.run_line_magic("slot", f"export --to {tmp_path / 'x.md'}")  # an existing folder: written
    assert (tmp_path / "x.md").read_text().startswith("#")
