"""Structured output: ``submit_turn(..., schema=...)`` and ``%%turn --schema NAME``, sent as each
wire asks (OpenAI's strict json_schema, Anthropic's forced tool, Ollama's format through its
OpenAI-compatible endpoint), request bodies checked against the official SDKs' types; the reply
read into ``reply.parsed``, an invalid one a line; replays and fan-outs read it too."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, Literal

import pytest
from pydantic import BaseModel, Field

from slotmagic import Session
from slotmagic._core.schema import ResponseSchema, strict_schema
from slotmagic._errors import ConfigError
from slotmagic.providers import ProviderSettings

from .sdk_types import check_body
from .wire_server import (
    WireServer,
    an_start,
    an_stop,
    an_text_block,
    an_tool_block,
    oa_text_stream,
    sse_response,
)


class Step(BaseModel):
    action: str
    minutes: int = Field(description="how long it takes")


class Recipe(BaseModel):
    """A recipe, step by step."""

    title: str
    servings: int = 2
    kind: Literal["sweet", "savory"]
    steps: list[Step]
    note: str | None = None


PANCAKES = {
    "title": "Pancakes",
    "servings": 4,
    "kind": "sweet",
    "steps": [{"action": "mix", "minutes": 5}, {"action": "fry", "minutes": 10}],
    "note": None,
}
DICT_SCHEMA = {
    "title": "city",
    "type": "object",
    "properties": {"name": {"type": "string"}, "population": {"type": "integer"}},
    "required": ["name", "population"],
}


@pytest.fixture
def session(settings: ProviderSettings) -> Iterator[Session]:
    with Session.open("structured", db_path=":memory:", settings=settings) as s:
        yield s


def anthropic_answer(name: str, value: Any, *, said: str = "") -> list[Any]:
    blocks = an_text_block(0, said) if said else []
    blocks += an_tool_block(1 if said else 0, "toolu_01", name, json.dumps(value))
    return sse_response([an_start(), *blocks, *an_stop("tool_use")])


def test_openai_gets_a_strict_json_schema(session: Session, wire: WireServer) -> None:
    wire.script(sse_response(oa_text_stream(json.dumps(PANCAKES))))
    reply = session.submit_turn("Pancakes?", model="openai:gpt-4o-mini", schema=Recipe)
    body = wire.requests[-1].json()
    check_body("chat", body)
    sent = body["response_format"]
    assert sent["type"] == "json_schema"
    assert sent["json_schema"]["name"] == "Recipe" and sent["json_schema"]["strict"] is True
    assert sent["json_schema"]["description"] == "A recipe, step by step."
    from openai.lib._pydantic import to_strict_json_schema

    assert sent["json_schema"]["schema"] == to_strict_json_schema(Recipe)  # the SDK's own strict form
    assert isinstance(reply.parsed, Recipe) and reply.parsed.steps[1].action == "fry"
    assert reply.text == json.dumps(PANCAKES)


def test_a_dict_schema_and_ollama(session: Session, wire: WireServer) -> None:
    wire.script(sse_response(oa_text_stream('{"name": "Oslo", "population": 709037}')))
    reply = session.submit_turn("Oslo?", model="ollama:llama3.2", schema=DICT_SCHEMA)
    body = wire.requests[-1].json()
    check_body("chat", body)
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "city", "schema": DICT_SCHEMA, "strict": False},  # Ollama: its format, as given
    }
    assert reply.parsed == {"name": "Oslo", "population": 709037}


def test_anthropic_gets_a_forced_tool_whose_input_is_the_answer(session: Session, wire: WireServer) -> None:
    wire.script(anthropic_answer("Recipe", PANCAKES, said="Here it is."))
    reply = session.submit_turn("Pancakes?", model="anthropic:claude-sonnet-4-5", schema=Recipe)
    body = wire.requests[-1].json()
    check_body("messages", body)
    assert body["tool_choice"] == {"type": "tool", "name": "Recipe"}
    tool = body["tools"][-1]
    assert tool["name"] == "Recipe" and tool["input_schema"] == Recipe.model_json_schema()
    assert isinstance(reply.parsed, Recipe) and reply.parsed.title == "Pancakes"
    assert json.loads(reply.text) == PANCAKES and reply.message.tool_calls == ()
    stored = session.messages()
    assert [m.role for m in stored] == ["user", "assistant"] and json.loads(stored[-1].content) == PANCAKES


def test_anthropic_with_other_tools_may_call_them_first(session: Session, wire: WireServer) -> None:
    def population(city: str) -> int:
        """How many people live in a city."""
        return 709037

    session.tools.add(population)
    wire.script(
        sse_response(
            [an_start(), *an_tool_block(0, "toolu_a", "population", '{"city": "Oslo"}'), *an_stop("tool_use")]
        ),
        anthropic_answer("city", {"name": "Oslo", "population": 709037}),
    )
    reply = session.submit_turn("Oslo?", model="anthropic:claude-sonnet-4-5", schema=DICT_SCHEMA, tools=["population"])
    first = wire.requests[0].json()
    check_body("messages", first)
    assert first["tool_choice"] == {"type": "any"}
    assert [t["name"] for t in first["tools"]] == ["population", "city"]
    assert reply.parsed == {"name": "Oslo", "population": 709037}
    assert [s.name for s in reply.steps] == ["population"]


def test_an_invalid_reply_is_one_line_and_is_stored(session: Session, wire: WireServer) -> None:
    wire.script(sse_response(oa_text_stream('{"title": "Pancakes", "kind": "salty", "steps": []}')))
    reply = session.submit_turn("Pancakes?", model="openai:gpt-4o-mini", schema=Recipe)
    assert reply.parsed is None
    (line,) = [n for n in reply.notes if "schema" in n]
    assert line.startswith("the reply does not match schema Recipe: kind: Input should be 'sweet' or 'savory'")
    assert "\n" not in line and session.messages()[-1].content == reply.text
    wire.script(sse_response(oa_text_stream("Sure! Pancakes are great.")))
    reply = session.submit_turn("Oslo?", model="openai:gpt-4o-mini", schema=DICT_SCHEMA)
    assert reply.parsed is None and any("it is not JSON" in n for n in reply.notes)
    wire.script(sse_response(oa_text_stream('{"name": "Oslo", "population": "many"}')))
    reply = session.submit_turn("Oslo?", model="openai:gpt-4o-mini", schema=DICT_SCHEMA)
    assert "the reply does not match schema city: 'population' must be a whole number" in " ".join(reply.notes)


def test_a_replay_reads_the_reply_again(session: Session, wire: WireServer) -> None:
    wire.script(sse_response(oa_text_stream(json.dumps(PANCAKES))))
    first = session.submit_turn("Pancakes?", model="openai:gpt-4o-mini", schema=Recipe, cell_id="c1")
    again = session.submit_turn("Pancakes?", model="openai:gpt-4o-mini", schema=Recipe, cell_id="c1")
    assert again.replayed and again.parsed == first.parsed and isinstance(again.parsed, Recipe)
    assert len(wire.requests) == 1


def test_fan_out_takes_a_schema(session: Session) -> None:
    session.create_slot("b")
    result = session.fan_out("Pancakes for two", slots=["default", "b"], schema=Recipe)
    parsed = [column.reply.parsed for column in result.columns if column.reply is not None]
    assert len(parsed) == 2 and all(isinstance(p, Recipe) and p.title == "Pancakes for two" for p in parsed)


def test_bad_schemas_are_one_line(session: Session) -> None:
    with pytest.raises(ConfigError, match="its root must be an object"):
        session.submit_turn("x", schema={"type": "array", "items": {"type": "string"}})
    with pytest.raises(ConfigError, match="schema must be a pydantic model class or a JSON schema dict, not str"):
        session.submit_turn("x", schema="Recipe")
    assert session.messages() == []


def test_strict_schema_matches_the_sdks_for_nested_models() -> None:
    from openai.lib._pydantic import to_strict_json_schema

    class Wrapper(BaseModel):
        recipe: Recipe
        alternatives: list[Recipe] = []

    assert strict_schema(ResponseSchema.of(Wrapper).schema) == to_strict_json_schema(Wrapper)


def test_schema_from_a_notebook(ip: Any, wire: WireServer, monkeypatch: pytest.MonkeyPatch) -> None:
    from IPython.core.error import UsageError

    ip.run_cell("from pydantic import BaseModel\nclass City(BaseModel):\n    name: str\n    population: int\n")
    ip.run_cell("%%turn --schema City\nTell me about Oslo")
    reply = ip.user_ns["_"]
    assert reply.parsed is not None and reply.parsed.name == "Tell me about Oslo" and reply.parsed.population == 0
    with pytest.raises(UsageError, match="--schema Town: no such name in this notebook"):
        ip.run_cell("%%turn --schema Town\nTell me about Oslo")
