"""Ollama's served context length, asked from the server once per model (/api/ps, /api/show),
is the model's window; context_windows still wins and asks nothing."""

from __future__ import annotations

from pathlib import Path

from slotmagic import Session
from slotmagic.providers import ProviderSettings
from slotmagic.providers._ollama import OLLAMA_DEFAULT_CONTEXT

from .wire_server import WireServer, json_response

LOADED = {"models": [{"name": "llama3.2:latest", "model": "llama3.2:latest", "size": 3, "context_length": 32768}]}
SHOWN = {"parameters": 'stop "<|eot_id|>"\nnum_ctx 16384', "model_info": {"llama.context_length": 131072}}


def window(session: Session) -> tuple[int, bool]:
    budget = session.budget(model="ollama:llama3.2")
    return budget.window, budget.window_known


def test_a_loaded_model_s_context_length_is_its_window_asked_once(
    tmp_path: Path, wire: WireServer, settings: ProviderSettings
) -> None:
    wire.ollama_api("/api/ps", json_response(200, LOADED))
    with Session.open("o", db_path=tmp_path / "s.db", settings=settings) as session:
        assert window(session) == (32768, True)
        assert window(session) == (32768, True)
        assert session.budget(model="ollama:llama3.2").budget.total == 32768
    assert [r.path for r in wire.api_requests] == ["/api/ps"]  # once, and kept


def test_a_modelfile_num_ctx_is_the_window_when_the_model_is_not_loaded(
    tmp_path: Path, wire: WireServer, settings: ProviderSettings
) -> None:
    wire.ollama_api("/api/ps", json_response(200, {"models": []}))
    wire.ollama_api("/api/show", json_response(200, SHOWN))
    with Session.open("o", db_path=tmp_path / "s.db", settings=settings) as session:
        assert window(session) == (16384, True)
        assert window(session) == (16384, True)
    assert [r.path for r in wire.api_requests] == ["/api/ps", "/api/show"]
    assert wire.api_requests[1].json() == {"model": "llama3.2"}


def test_a_server_that_does_not_say_gets_ollama_s_default(
    tmp_path: Path, wire: WireServer, settings: ProviderSettings
) -> None:
    with Session.open("o", db_path=tmp_path / "s.db", settings=settings) as session:
        assert window(session) == (OLLAMA_DEFAULT_CONTEXT, True)  # both answered 404: not Ollama's API


def test_context_windows_wins_and_asks_nothing(tmp_path: Path, wire: WireServer, settings: ProviderSettings) -> None:
    with Session.open("o", db_path=tmp_path / "s.db", settings=settings) as session:
        session.options.context_windows = {"ollama:*": 65536}
        assert window(session) == (65536, True)
    assert wire.api_requests == []
