"""The namespace store (seed T2): a 200 KB tool result stays out of the prompt, is read back
by pages, exported whole, stored once, and never read across sessions."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import count_rows
from slotmagic import Message, Session, ToolCall
from slotmagic._namespace import Namespace, content_key, parse_reference


@pytest.fixture
def db_path(store_target: str) -> str:
    """Every test here runs on a SQLite file and on a PostgreSQL schema."""
    return store_target


BIG = "".join(f"line {i:06d}: the lease clause text, with its numbers and dates é中\n" for i in range(3000))


@pytest.fixture
def session(db_path: Path) -> Session:
    s = Session.open("ns", db_path=db_path)

    def fetch_lease() -> str:
        """The whole lease, as text."""
        return BIG

    def short() -> str:
        """A small answer."""
        return "just this"

    s.tools.add(fetch_lease)
    s.tools.add(short)
    return s


def test_a_large_result_is_a_reference_in_the_view_and_whole_on_expand(session: Session, tmp_path: Path) -> None:
    assert len(BIG.encode()) > 200_000
    reply = session.submit_turn("Look at it.\ncall fetch_lease\ncall short")
    stored = session.messages()
    big, small = stored[2], stored[3]
    assert parse_reference(big.content) == ("fetch_lease", content_key(BIG))
    assert len(big.content) < 1_000 and "bytes" in big.content and big.content.count("line 000000") == 1
    assert small.content == "just this"  # under the threshold: as it is
    assert session.messages(expand=True)[2].content == BIG
    assert "fetch_lease" in reply.text  # the model saw the reference and the preview
    # The next request grows by the reference only.
    view = session.preview()
    assert sum(len(m.content) for m in view.messages) < 3_000
    exported = session.history.export(tmp_path / "out.json")
    messages = json.loads(exported.read_text(encoding="utf-8"))["messages"]
    assert messages[2]["content"] == BIG  # byte for byte
    assert BIG in (session.history.export(tmp_path / "out.md")).read_text(encoding="utf-8")


def test_read_namespace_pages_through_the_original(session: Session) -> None:
    session.submit_turn("call fetch_lease")
    ref = session.messages()[2].content.splitlines()[0]
    tools = session._engine.turn_tools(session.slot(), None, session.preview())
    assert tools is not None and "read_namespace" in tools.names()  # offered while a reference is in view
    page = tools.run_sync(ToolCall("p1", "read_namespace", json.dumps({"ref": ref, "offset": 1000, "length": 500})))
    head, _, body = page.content.partition("\n")
    assert body == BIG[1000:1500] and head.startswith(f"[{ref} characters 1,000 to 1,500 of")
    end = tools.run_sync(ToolCall("p2", "read_namespace", json.dumps({"ref": ref, "offset": len(BIG) - 10})))
    assert end.content.endswith(BIG[-10:]) and "the end" in end.content


def test_identical_results_are_stored_once(session: Session, db_path: Path) -> None:
    session.submit_turn("call fetch_lease")
    session.submit_turn("again\ncall fetch_lease")
    assert count_rows(db_path, "namespace") == 1


def test_a_reference_from_another_session_is_refused(session: Session, db_path: Path) -> None:
    session.submit_turn("call fetch_lease")
    ref = session.messages()[2].content.splitlines()[0]
    with Session.open("other", db_path=db_path) as other:
        answer = Namespace(other.store, other.session_id).read(ref)
        assert answer == f"error: no namespace entry {ref!r} in this session"
        assert BIG[:100] not in answer
    assert Namespace(session.store, session.session_id).read("namespace://x/zz").startswith("error: 'namespace://x/zz'")


def test_the_cache_is_bounded_by_bytes(session: Session) -> None:
    namespace = Namespace(session.store, session.session_id, cache_bytes=300_000)
    for n in range(3):
        namespace.shelve(Message.tool(f"c{n}", BIG + str(n), "fetch_lease"))
    assert namespace._cached <= 300_000 and len(namespace._cache) == 1
    assert namespace.get(content_key(BIG + "0")) == BIG + "0"  # read back from the store


GC_LOOP = """
import sys, time
from pathlib import Path
from slotmagic import Session
target, status, stop = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
passes = 0
with Session.open("race", db_path=target) as session:
    while not stop.exists():
        session.history.gc()
        passes += 1
        status.with_suffix(".new").write_text(str(passes))
        status.with_suffix(".new").replace(status)  # whole: a read between truncate and write saw 0
        time.sleep(0.02)
"""


@pytest.mark.slow
def test_gc_in_another_process_throughout_tool_turns_never_takes_their_results(
    db_path: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A large result is in the store from when its tool returns, but nothing refers to it
    until its turn is stored: gc in another kernel took it meanwhile, and the stored reference
    pointed at nothing. Here gc runs in a second process throughout, and the model's second reply
    is held until that process has made three more passes; every result is readable after."""
    import subprocess
    import sys
    import time

    from slotmagic.providers import ProviderSettings
    from tests.providers.wire_server import Until, WireServer, oa_text_stream, oa_tool_stream, sse_response

    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    wire = WireServer()
    settings = ProviderSettings(openai_api_key="sk-test", openai_base_url=wire.url + "/v1", read_timeout=120.0)
    session = Session.open("race", db_path=db_path, settings=settings, model="openai:gpt-4o-mini")
    results = {n: f"result {n}: " + "".join(f"row {i} of turn {n}\n" for i in range(400)) for n in range(3)}

    def fetch(turn: int) -> str:
        """A large result."""
        return results[turn]

    session.tools.add(fetch)
    status, stop = tmp_path / "passes", tmp_path / "stop"

    def passes() -> int:
        """The gc process's passes so far (it replaces the file after each)."""
        try:
            return int(status.read_text() or 0)
        except (FileNotFoundError, ValueError):
            return 0

    session.submit_turn("warm up", model="echo")  # the session exists before gc looks for it
    gc = subprocess.Popen([sys.executable, "-c", GC_LOOP, str(db_path), str(status), str(stop)])
    try:
        while not status.exists():
            assert gc.poll() is None, "the gc process ended"
            time.sleep(0.05)
        for n in results:
            before = passes()
            wire.script(
                sse_response(oa_tool_stream([(f"c{n}", "fetch", [json.dumps({"turn": n})])])),
                [
                    Until(lambda before=before: passes() >= before + 3 or gc.poll() is not None),
                    *sse_response(oa_text_stream(f"Read turn {n}.")),
                ],
            )
            session.submit_turn(f"Fetch {n}.")
            assert passes() - before >= 3, "gc did not run during the turn"
            with Session.open("race", db_path=db_path) as other:  # another kernel: nothing cached
                at = other.history.turns()[-1].start + 2
                assert other.messages(expand=True)[at].content == results[n]
                assert other.history.read_namespace(other.messages()[at].content, 0, 50_000).endswith(results[n])
    finally:
        stop.touch()
        assert gc.wait(60) == 0
        wire.close()
    session.history.gc()  # reachable: kept
    assert [m.content for m in session.messages(expand=True) if m.role == "tool"] == list(results.values())
    exported = json.loads(session.history.export(tmp_path / "race.json").read_text(encoding="utf-8"))
    assert [m["content"] for m in exported["messages"] if m["role"] == "tool"] == list(results.values())
    session.close()


def test_a_small_result_that_starts_with_a_reference_is_exported_as_it_is(session: Session, tmp_path: Path) -> None:
    session.submit_turn("Look at it.\ncall fetch_lease")
    ref = f"namespace://fetch_lease/{content_key(BIG)}"
    session.tools.add(lambda: f"{ref}\nthat is where the lease is", name="pointer", description="Points.")
    session.submit_turn("Where?\ncall pointer")
    said = f"{ref}\nthat is where the lease is"
    assert session.messages()[-2].content == said  # small: stored as it is
    assert session.messages(expand=True)[-2].content == said  # not taken for the reference
    exported = json.loads(session.history.export(tmp_path / "out.json").read_text(encoding="utf-8"))["messages"]
    assert exported[2]["content"] == BIG and exported[-2]["content"] == said
