"""The pieces that keep a turn's every request within its window, on their own: counting and
shortening a request (RequestFit), cutting a page to the room left (PageRoom), shortening an
older result in the view (shortened), and a summary that names a reference offering the reader."""

from __future__ import annotations

from pathlib import Path

from slotmagic import Message, Session, ToolCall
from slotmagic._core.request import ChatRequest
from slotmagic._engine.run.fit import RequestFit
from slotmagic._engine.run.reading import PageRoom
from slotmagic._engine.view.inputs import Counting
from slotmagic._engine.view.tool_results import kept_aside_by, shortened
from slotmagic._namespace import Namespace, content_key
from slotmagic._store import open_store
from slotmagic.tokens import TokenCounter

COUNTING = Counting(TokenCounter.for_model("openai:gpt-4o-mini"))


def request(*messages: Message) -> ChatRequest:
    return ChatRequest(model="gpt-4o-mini", messages=messages)


def result(call: str, text: str, name: str = "lookup") -> list[Message]:
    return [Message.assistant("", tool_calls=[ToolCall(call, name, "{}")]), Message.tool(call, text, name)]


def test_a_request_over_its_limit_has_its_results_shortened_oldest_first(tmp_path: Path) -> None:
    with open_store(str(tmp_path / "s.sqlite3")) as store:
        namespace = Namespace(store, "s")
        big = "record " * 300
        sent = request(Message.user("go"), *result("a", big + "one"), *result("b", big + "two"))
        whole = RequestFit(COUNTING, 10_000, namespace).tokens(sent)
        fit = RequestFit(COUNTING, whole - 100, namespace)
        fitted = fit.fit(sent)
        assert fitted is not None and fit.tokens(fitted) <= fit.limit
        first, second = fitted.messages[2], fitted.messages[4]
        assert first.content.startswith("namespace://lookup/") and second.content == big + "two"  # oldest first
        assert namespace.read(first.content.split()[0], 0, 50_000).endswith(big + "one")  # kept aside: readable
        assert fit.fit(sent) is not None and RequestFit(COUNTING, whole, namespace).fit(sent) is sent


def test_a_request_that_cannot_fit_even_shortened_is_none(tmp_path: Path) -> None:
    with open_store(str(tmp_path / "s.sqlite3")) as store:
        fit = RequestFit(COUNTING, 50, Namespace(store, "s"))
        assert fit.fit(request(Message.user("word " * 200))) is None


def test_a_page_is_cut_to_the_room_and_says_what_is_left(tmp_path: Path) -> None:
    with open_store(str(tmp_path / "s.sqlite3")) as store:
        namespace = Namespace(store, "s", threshold=10)
        ref = namespace.shelve(Message.tool("c", "lorem ipsum dolor " * 2_000, "doc")).content.split()[0]
        room = PageRoom(200, lambda text: COUNTING.counter.count_text(text))
        page = namespace.read(ref, 0, 4_000, fit=room.fit)
        assert COUNTING.counter.count_text(page) <= 200
        assert page.startswith(f"[{ref} characters 0 to ") and "more pages) from offset" in page
        assert namespace.read(ref, 0, 4_000, fit=PageRoom(3, room.count).fit).startswith("error: this request has")


def test_shortened_forms() -> None:
    head = "namespace://doc/0123456789abcdef\n[9,000 bytes, 9,000 characters kept aside; read them with "
    kept_aside = Message.tool("c", head + "read_namespace(ref, offset, length). Preview:]\n" + "x" * 300, "doc")
    short = shortened(kept_aside)
    assert short is not None and short.content.startswith("namespace://doc/0123456789abcdef\n[9,000 bytes")
    assert not kept_aside_by(short, kept_aside)  # already kept aside: nothing to keep
    inline = Message.tool("c", "field=value " * 100, "lookup")
    short = shortened(inline)
    assert short is not None and short.content.startswith(f"namespace://lookup/{content_key(inline.content)}")
    assert kept_aside_by(short, inline)
    header = "[namespace://doc/0123456789abcdef characters 4,000 to 8,000 of 9,000; ...]\n"
    page = Message.tool("c", header + "y" * 4_000, "read_namespace")
    short = shortened(page)
    assert short is not None and "read_namespace(ref, offset=4000)" in short.content
    assert not kept_aside_by(short, page)  # a page points back to where it came from
    assert shortened(Message.tool("c", "short", "lookup")) is None


def test_a_summary_that_names_a_reference_offers_the_reader(tmp_path: Path) -> None:
    with Session.open("s", db_path=tmp_path / "s.sqlite3", model="echo") as session:
        for i in range(4):
            session.submit_turn(f"question {i}")
        session.compactions.compact(
            keep=2, summary="The lease is at namespace://doc/0123456789abcdef; clause 3 matters."
        )
        reply = session.submit_turn('call read_namespace {"ref": "namespace://doc/0123456789abcdef"}')
        assert [step.name for step in reply.steps] == ["read_namespace"]  # offered: the summary names a reference
        assert reply.steps[0].result.startswith("error: no namespace entry")
