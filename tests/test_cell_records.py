"""The replay rule for every magic, through a real IPython shell with the cell ids JupyterLab
sends: Run All, "restart" (the extension loaded again, as a new kernel would), Run All again.
Commands that change the session replay what they printed and change nothing; read-only
commands show the session as of their cell while Run All retraces the first run, and the
session now when run by hand; an edited cell acts anew."""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from IPython.core.error import UsageError

import slotmagic
from slotmagic import Session
from slotmagic.providers._echo import EchoProvider

Cell = tuple[str, str]  # (cell id, source)


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Every request the echo model is asked (a turn, a compaction's summary, a merge's)."""
    asked: list[int] = []
    stream, astream = EchoProvider.stream, EchoProvider.astream

    def counted(self: EchoProvider, request: Any) -> Iterator[Any]:
        asked.append(1)
        return stream(self, request)

    def acounted(self: EchoProvider, request: Any) -> Any:
        asked.append(1)
        return astream(self, request)

    monkeypatch.setattr(EchoProvider, "stream", counted)
    monkeypatch.setattr(EchoProvider, "astream", acounted)
    return asked


def session(ip: Any) -> Session:
    from slotmagic._magics import SlotMagic

    magic = next(c for c in ip.configurables if isinstance(c, SlotMagic))
    return magic.session()


def run_all(ip: Any, cells: Sequence[Cell], capsys: pytest.CaptureFixture[str]) -> list[str]:
    """Each cell's output, run in order with its cell id."""
    out = []
    for cell_id, source in cells:
        capsys.readouterr()
        ip.run_cell(source, cell_id=cell_id)
        out.append(capsys.readouterr().out)
    return out


def restart(ip: Any) -> None:
    """What a new kernel is to slotmagic: the extension loaded afresh, nothing counted yet
    (the session id stays: the notebook's)."""
    slotmagic.unload_ipython_extension(ip)
    if hasattr(ip, "_slotmagic_cell_identity"):
        delattr(ip, "_slotmagic_cell_identity")
    slotmagic.load_ipython_extension(ip)


def digest(ip: Any) -> str:
    """Everything stored for the session, timestamps left out."""
    dump = session(ip).store.dump_session(session(ip).session_id)  # type: ignore[attr-defined]
    tables = {
        name: [tuple(v for v in row if not (isinstance(v, float) and v > 1e9)) for row in rows]
        for name, rows in dump.tables.items()
    }
    slots = [tuple(v for v in row if not (isinstance(v, float) and v > 1e9)) for row in dump.slots]
    return repr((dump.current, slots, sorted(tables.items())))


def check_run_all_again(ip: Any, cells: Sequence[Cell], capsys: pytest.CaptureFixture[str], calls: list[int]) -> None:
    first = run_all(ip, cells, capsys)
    stored, asked = digest(ip), len(calls)
    again = run_all(ip, cells, capsys)  # Run All in the same kernel
    restart(ip)
    third = run_all(ip, cells, capsys)  # Restart Kernel and Run All
    assert digest(ip) == stored
    assert len(calls) == asked
    assert same(again) == same(first) and same(third) == same(first)


def same(outputs: list[str]) -> list[str]:
    """Outputs as a reader compares them: a replayed reply says so in its footer."""
    replayed = "replayed from the store, no model call · "
    undone = "[this turn was undone on slot default: %slot redo brings it back]\n"
    return [o.replace(replayed, "").replace(undone, "") for o in outputs]


FILL = [(f"t{n}", f"%%turn\nQuestion {n} about clause {n} of the lease and the deposit.") for n in range(6)]


def test_compact_runs_once(ip: Any, capsys: pytest.CaptureFixture[str], calls: list[int]) -> None:
    cells = [
        ("c0", "%slot create lease --budget 600"),
        *FILL,
        ("c1", "%slot compact --keep 4"),
        ("c2", "%slot compact --keep 2 --preview"),
        ("c3", '%slot compact --apply --summary "Clauses 0-5: $1,200 back in 30 days."'),
    ]
    check_run_all_again(ip, cells, capsys, calls)
    compactions = session(ip).compactions("lease")
    assert len(compactions) == 2 and compactions[-1].text == "Clauses 0-5: $1,200 back in 30 days."


def test_compact_preview_and_apply_call_the_model_once(
    ip: Any, capsys: pytest.CaptureFixture[str], calls: list[int]
) -> None:
    cells = [*FILL, ("c1", "%slot compact --keep 2 --preview"), ("c2", "%slot compact --apply")]
    run_all(ip, cells, capsys)
    asked = len(calls)
    restart(ip)
    run_all(ip, cells, capsys)
    assert len(calls) == asked and len(session(ip).compactions()) == 1


def test_ctx_events_are_added_once(ip: Any, capsys: pytest.CaptureFixture[str], calls: list[int]) -> None:
    cells = [
        ("x0", "%ctx goal add Get the $1,200 deposit back\n%ctx step intake --note the dates"),
        ("x1", "%%turn\nMy landlord kept my deposit."),
        ("x2", "%ctx decide Court or a letter --as A letter first\n%ctx ask Do I have the report?"),
        ("x3", "%ctx resolve q1 --answer Yes"),
        ("x4", "%ctx show"),
    ]
    check_run_all_again(ip, cells, capsys, calls)
    assert len(session(ip).context.history()) == 5
    assert session(ip).context().goals[0].text == "Get the $1,200 deposit back"


def test_workflow_moves_are_not_undone_by_run_all(
    ip: Any, capsys: pytest.CaptureFixture[str], calls: list[int]
) -> None:
    cells = [
        ("w0", "%%workflow claim\nintake -> evidence\nevidence -> letter"),
        ("w1", "%workflow status intake in_progress"),
        ("w2", "%slot preview"),
        ("w3", "%workflow status intake done\n%workflow current evidence\n%workflow status evidence in_progress"),
        ("w4", "%workflow status evidence done\n%workflow current letter"),
        ("w5", "%workflow show"),
    ]
    first = run_all(ip, cells, capsys)
    restart(ip)
    stored = digest(ip)
    seen = []
    for cell_id, source in cells:  # at no point does the workflow go back
        capsys.readouterr()
        ip.run_cell(source, cell_id=cell_id)
        seen.append(capsys.readouterr().out)
        workflow = session(ip).workflows.active()
        assert workflow is not None and workflow.node("evidence").status == "done"
    assert seen == first and digest(ip) == stored
    assert "1 of 3 done" not in seen[2] or "1 of 3 done" in first[2]


def test_merge_pin_undo_derive_rename_delete_replay(
    ip: Any, capsys: pytest.CaptureFixture[str], calls: list[int]
) -> None:
    cells = [
        ("m0", "%%turn\nWhat is a deposit?"),
        ("m1", "%%turn\nAnd a lease?"),
        ("m2", "%%turn\nAnd pets?"),
        ("m3", "%slot undo"),
        ("m4", "%slot derive research"),
        ("m5", "%%turn\nWhat does the statute say?"),
        ("m6", "%slot switch default\n%slot merge research\n%slot pin 1\n%slot exclude 2"),
        ("m7", "%slot derive scratch\n%slot rename scratch notes\n%slot create other\n%slot delete other"),
        ("m8", "%slot switch default\n%slot list"),
    ]
    check_run_all_again(ip, cells, capsys, calls)
    s = session(ip)
    assert [t.info.kind for t in s.history.turns("default")][-1] == "merge"
    assert sorted(x.id for x in s.list_slots()) == ["default", "notes", "research"]
    assert len(s.history.undo_steps()) == 1


def test_fan_out_replays_every_column(ip: Any, capsys: pytest.CaptureFixture[str], calls: list[int]) -> None:
    cells = [
        ("f0", "%%turn\nWhat is a deposit?"),
        ("f1", "%slot derive a\n%slot derive b --from default"),
        ("f2", "%%turn --slots a,b\nCompare the two."),
    ]
    run_all(ip, cells, capsys)
    asked, stored = len(calls), digest(ip)
    restart(ip)
    run_all(ip, cells, capsys)
    assert len(calls) == asked and digest(ip) == stored


def test_a_read_shows_the_session_as_of_its_cell_on_run_all_and_now_by_hand(
    ip: Any, capsys: pytest.CaptureFixture[str], calls: list[int]
) -> None:
    cells = [
        ("s0", "%slot"),
        ("s1", "%%turn\nWhat is a deposit?"),
        ("s2", "%slot list"),
        ("s3", "%slot derive b"),
        ("s4", "%%turn\nAnd a lease?"),
    ]
    first = run_all(ip, cells, capsys)
    assert "0 turns" in first[0] and "*  default" in first[2]
    restart(ip)
    again = run_all(ip, cells, capsys)
    assert again[0] == first[0]  # "default, 0 turns", not the state the notebook ended in
    assert again[2] == first[2]  # one slot, default current
    capsys.readouterr()
    ip.run_cell("%slot list", cell_id="s2")  # by hand, later: the session now
    now = capsys.readouterr().out
    assert "*  b" in now and now != first[2]


def test_run_all_twice_in_one_kernel_reads_a_branch_deleted_later_as_of_its_cell(
    ip: Any, capsys: pytest.CaptureFixture[str], calls: list[int]
) -> None:
    cells = [
        ("d0", "%%turn\nWhat is a deposit?"),
        ("d1", "%slot derive side --no-switch\n%slot show side"),
        ("d2", "%slot delete side --force"),
        ("d3", "%slot list"),
    ]
    first = run_all(ip, cells, capsys)
    stored, asked = digest(ip), len(calls)
    again = run_all(ip, cells, capsys)  # the same kernel: "side" is gone, its cell still reads
    assert same(again) == same(first) and digest(ip) == stored and len(calls) == asked


def test_an_edited_cell_acts_anew(ip: Any, capsys: pytest.CaptureFixture[str], calls: list[int]) -> None:
    run_all(ip, [*FILL, ("c1", "%slot compact --keep 4")], capsys)
    assert len(session(ip).compactions()) == 1
    run_all(ip, [("c1", "%slot compact --keep 2")], capsys)  # the cell was edited
    assert len(session(ip).compactions()) == 2


def test_the_same_line_twice_in_a_cell_runs_twice(ip: Any, capsys: pytest.CaptureFixture[str]) -> None:
    cells = [("u0", "%%turn\nOne"), ("u1", "%%turn\nTwo"), ("u2", "%slot undo\n%slot undo")]
    run_all(ip, cells, capsys)
    assert session(ip).history.turns() == []
    restart(ip)
    run_all(ip, cells, capsys)
    assert session(ip).history.turns() == [] and len(session(ip).history.undo_steps()) == 2


def test_id_names_any_magic_across_cells(ip: Any, capsys: pytest.CaptureFixture[str]) -> None:
    run_all(ip, [("t1", "%%turn\nOne"), ("t2", "%%turn\nTwo"), ("t3", "%%turn\nThree")], capsys)
    first = run_all(ip, [("a", "%slot undo --id my-undo")], capsys)
    again = run_all(ip, [("b", "%slot undo --id my-undo")], capsys)  # the line moved to another cell
    assert again == first and len(session(ip).history.turns()) == 2
    run_all(ip, [("c", "%slot undo")], capsys)  # another identity: it undoes
    assert len(session(ip).history.turns()) == 1


def test_dollar_signs_in_magic_lines_are_taken_literally(ip: Any) -> None:
    ip.user_ns["1"] = "ONE"
    ip.run_cell('%slot create pricing --system "It costs $1,200 {x}"', cell_id="p")
    assert session(ip).slot("pricing").config.system == "It costs $1,200 {x}"
    ip.run_cell("%workflow --help")  # no expansion either; help prints and changes nothing


def test_outside_a_kernel_without_cell_ids_every_run_acts(ip: Any) -> None:
    for text in ("One", "Two", "Three"):
        ip.run_cell(f"%%turn\n{text}")
    ip.run_cell("%slot undo")
    ip.run_cell("%slot undo")
    assert len(session(ip).history.turns()) == 1


# -- headless: no cell ids (nbclient), the notebook named -----------------------------------


@pytest.fixture
def headless(ip: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """A kernel whose front end sends no cell ids."""
    monkeypatch.setattr(ip, "kernel", object(), raising=False)
    monkeypatch.delenv("SLOTMAGIC_NOTEBOOK", raising=False)
    monkeypatch.delenv("JPY_SESSION_NAME", raising=False)
    return ip


def execute(ip: Any, sources: Sequence[str], notebook: str) -> None:
    restart(ip)
    ip.run_cell(f'%config SlotMagic.notebook = "{notebook}"')
    for source in sources:
        ip.run_cell(source)


def test_headless_runs_replay_by_the_notebook_name(headless: Any, calls: list[int]) -> None:
    sources = ["%%turn\nOne", "%slot compact --keep 1", "%ctx goal add Keep it short", "%%turn\nTwo"]
    execute(headless, sources, "a.ipynb")
    stored, asked = digest(headless), len(calls)
    execute(headless, sources, "a.ipynb")
    assert digest(headless) == stored and len(calls) == asked


def test_two_notebooks_on_one_session_never_fork_each_other(headless: Any, calls: list[int]) -> None:
    a = [f"%%turn\nNotebook A, question {n}." for n in range(6)]
    execute(headless, a, "a.ipynb")
    execute(headless, ["%%turn\nNotebook B asks something else.", "%%turn\nAnd more."], "b.ipynb")
    s = session(headless)
    assert [x.id for x in s.list_slots()] == ["default"]
    assert len(s.history.turns()) == 8  # B went on after A's six turns


def test_a_positional_edit_far_back_is_refused_with_what_to_do(headless: Any) -> None:
    execute(headless, [f"%%turn\nNotebook A, question {n}." for n in range(6)], "same.ipynb")
    before = digest(headless)
    with pytest.raises(UsageError) as raised:
        execute(headless, ["%%turn\nSomething else entirely."], "same.ipynb")  # unnamed notebook B, say
    message = str(raised.value)
    assert "\n" not in message and "SlotMagic.notebook" in message and "%%turn --id" in message
    assert digest(headless) == before


def test_a_recovered_store_replays_the_notebook_as_the_first_run_did(
    ip: Any, capsys: pytest.CaptureFixture[str], calls: list[int]
) -> None:
    """A damaged file recovered in place (``recover(replace=True)``) keeps the cells' records:
    Restart Kernel + Run All replays them, as it would have before the damage."""
    cells = [
        ("c0", "%slot create lease"),
        *FILL[:3],
        ("c1", "%ctx goal add Get the deposit back"),
        ("c2", "%slot rename lease tenancy"),
        ("c3", "%slot list"),
    ]
    first = run_all(ip, cells, capsys)
    stored, asked = digest(ip), len(calls)
    slotmagic.unload_ipython_extension(ip)  # the kernel ends; its file is recovered before the next
    report = slotmagic.recover(os.environ["SLOTMAGIC_DB"], replace=True)
    assert report.complete, str(report)
    delattr(ip, "_slotmagic_cell_identity")
    slotmagic.load_ipython_extension(ip)
    again = run_all(ip, cells, capsys)
    assert same(again) == same(first)
    assert len(calls) == asked and digest(ip) == stored


def test_a_replayed_turn_names_its_slot_as_the_cell_did(
    ip: Any, capsys: pytest.CaptureFixture[str], calls: list[int]
) -> None:
    """The slot renamed later in the notebook: Run All replays the turn's footer as it read
    (slot lease), not with the name the slot has now."""
    cells = [("c0", "%slot create lease"), FILL[0], ("c1", "%slot rename lease tenancy")]
    check_run_all_again(ip, cells, capsys, calls)
    capsys.readouterr()
    ip.run_cell(FILL[0][1], cell_id=FILL[0][0])
    assert "[replayed from the store, no model call · slot lease · turn 1" in capsys.readouterr().out


def failing_records(ip: Any, monkeypatch: pytest.MonkeyPatch, failures: int) -> list[int]:
    """The store's cell-record writes fail ``failures`` times (the connection lost after the
    turn committed); the tries made."""
    from slotmagic import StoreError

    store = session(ip).store
    write = store.record_cell
    tried: list[int] = []

    def record_cell(*args: Any, **kwargs: Any) -> Any:
        tried.append(1)
        if len(tried) <= failures:
            raise StoreError("the PostgreSQL server closed the connection")
        return write(*args, **kwargs)

    monkeypatch.setattr(store, "record_cell", record_cell)
    return tried


def test_a_turn_whose_record_fails_is_reported_stored(
    ip: Any, capsys: pytest.CaptureFixture[str], calls: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    tried = failing_records(ip, monkeypatch, failures=100)
    result = ip.run_cell("%%turn\nIs the deposit refundable?", cell_id="r0")
    assert result.error_in_exec is None  # the turn committed: the cell did not fail
    out = capsys.readouterr()
    assert "slot default · turn 1" in out.out
    said = out.err.strip().splitlines()
    assert said == [
        "the reply (turn 1 of slot default) is stored, but this cell's record was not (the PostgreSQL server "
        "closed the connection): run again, the cell finds its turn but not the lines it printed"
    ]
    assert len(tried) == 3 and ip.user_ns["_"].turn == 1  # tried again; the reply is the cell's value
    monkeypatch.undo()
    ip.run_cell("%%turn\nIs the deposit refundable?", cell_id="r0")
    assert "replayed from the store, no model call" in capsys.readouterr().out  # what the line promised
    assert len(calls) == 1 and len(session(ip).history.turns("default")) == 1


def test_a_record_that_fails_once_is_written_on_the_next_try(
    ip: Any, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    tried = failing_records(ip, monkeypatch, failures=1)
    ip.run_cell("%%turn\nIs the deposit refundable?", cell_id="r1")
    assert capsys.readouterr().err == "" and len(tried) == 2
    dump = session(ip).store.dump_session(session(ip).session_id)  # type: ignore[attr-defined]
    assert [str(row[1]) for row in dump.tables["cells"] if str(row[1]).startswith("turn|")] != []


def test_a_command_whose_record_fails_is_reported_done(
    ip: Any, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    failing_records(ip, monkeypatch, failures=100)
    result = ip.run_cell("%slot derive appeal", cell_id="d0")
    assert result.error_in_exec is None
    assert session(ip).has_slot("appeal")
    assert capsys.readouterr().err.strip().splitlines() == [
        "%slot is done, but this cell's record was not (the PostgreSQL server closed the connection): "
        "run again, the cell acts anew"
    ]


def test_a_switch_clicked_after_run_all_holds_for_reads_run_again_and_the_next_turn(
    ip: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 41's sequence: Run All twice (the notebook visits another session and comes back,
    as tutorial 02 does), a new ``%slot`` cell run, "follow live" and a slot clicked in the
    tree, the ``%slot`` cell run again: it shows the session now and restores nothing; the
    next turn lands on the clicked slot."""
    from ipywidgets.widgets.widget import _instances

    from slotmagic.widgets._snapshot_widget import SnapshotWidget

    cells = [
        ("a", "%%turn\nWhat is a deposit?"),
        ("b", "%slot derive court"),
        ("c", "%slot derive letter --from default"),
        ("d", "%slot switch default"),
        ("t", "%slot tree"),
        ("x", '%config SlotMagic.session_id = "elsewhere"'),
        ("y", "%slot list"),
        ("z", '%config SlotMagic.session_id = ""'),
    ]
    run_all(ip, cells, capsys)
    before = set(_instances)
    run_all(ip, cells, capsys)  # Run All again, in the same kernel
    (tree,) = [w for k, w in _instances.items() if k not in before and isinstance(w, SnapshotWidget)]
    capsys.readouterr()
    ip.run_cell("%slot", cell_id="n")  # a new cell
    assert capsys.readouterr().out.startswith("current slot: default")
    tree._handle_msg({"content": {"data": {"method": "custom", "content": {"type": "follow"}}}, "buffers": []})
    tree._handle_msg(
        {"content": {"data": {"method": "custom", "content": {"type": "switch", "slot": "letter"}}}, "buffers": []}
    )
    assert session(ip).current_slot == "letter" and tree.status["text"] == "switched to slot letter"
    ip.run_cell("%slot", cell_id="n")  # run again by hand: the session now
    assert capsys.readouterr().out.startswith("current slot: letter")
    assert session(ip).current_slot == "letter"
    ip.run_cell("%%turn\nAnd now?", cell_id="m")
    assert "slot letter · turn 2" in capsys.readouterr().out
