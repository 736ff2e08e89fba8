"""Azure OpenAI on the loopback server: the resource endpoint, the deployment a model goes to,
the API version's URL shape, an api-key header or a bearer token from the environment; windows
and prices from the deployment's model; bodies checked against the openai SDK's request types."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from slotmagic import Session
from slotmagic._errors import ConfigError, MissingAPIKey, ProviderHTTPError
from slotmagic.providers import ProviderSettings

from .responses_wire import text_stream
from .sdk_types import check_body
from .wire_server import WireServer, json_response, oa_text_stream, sse_response

KEY = "azk-planted-0123456789abcdef0123456789"
TOKEN = "eyJ0eXAiOiJKV1Qi.planted-entra-token.0123456789"
_AZURE = (
    "AZURE_OPENAI_API_KEY",
    "AZURE_OPENAI_AD_TOKEN",
    "AZURE_OPENAI_ENDPOINT",
    "OPENAI_API_VERSION",
    "AZURE_OPENAI_DEPLOYMENTS",
)


@pytest.fixture
def azure(wire: WireServer, monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in _AZURE:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AZURE_OPENAI_ENDPOINT", wire.url)
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", KEY)
    monkeypatch.setenv("AZURE_OPENAI_DEPLOYMENTS", "gpt-4o-mini=prod-4o, o3-pro=deep-thinker")
    return monkeypatch


@pytest.fixture
def session(azure: pytest.MonkeyPatch) -> Iterator[Session]:
    with Session.open("azure", db_path=":memory:", settings=ProviderSettings(connect_timeout=2, read_timeout=2)) as s:
        yield s


def test_v1_chat_with_an_api_key(session: Session, wire: WireServer) -> None:
    wire.script(sse_response(oa_text_stream("Hello")))
    reply = session.submit_turn("Hi", model="azure:gpt-4o-mini")
    request = wire.requests[-1]
    assert request.path == "/openai/v1/chat/completions"
    assert request.headers["api-key"] == KEY and "authorization" not in request.headers
    body = request.json()
    check_body("chat", body)
    assert body["model"] == "prod-4o"  # the deployment; the model's name is for windows, prices and reasoning
    assert reply.text == "Hello"
    assert reply.cost == pytest.approx((12 * 0.15 + 5 * 0.6) / 1e6)  # gpt-4o-mini's price (genai-prices)
    assert session._engine.window("azure:gpt-4o-mini") == (128_000, True)


def test_a_dated_api_version_and_a_bearer_token(session: Session, wire: WireServer, azure: pytest.MonkeyPatch) -> None:
    azure.setenv("OPENAI_API_VERSION", "2024-10-21")
    azure.delenv("AZURE_OPENAI_API_KEY")
    azure.setenv("AZURE_OPENAI_AD_TOKEN", TOKEN)
    wire.script(sse_response(oa_text_stream("Hello")))
    session.submit_turn("Hi", model="azure:gpt-4.1")  # not named in the deployments: its own name
    request = wire.requests[-1]
    assert request.path == "/openai/deployments/gpt-4.1/chat/completions?api-version=2024-10-21"
    assert request.headers["authorization"] == f"Bearer {TOKEN}" and "api-key" not in request.headers
    check_body("chat", request.json())


def test_reasoning_models_and_the_responses_api(session: Session, wire: WireServer) -> None:
    wire.script(text_stream("Proved.", reasoning="Euclid."))
    reply = session.submit_turn("Infinitely many primes?", model="azure:o3-pro", system="Be rigorous.")
    request = wire.requests[-1]
    assert request.path == "/openai/v1/responses" and request.headers["api-key"] == KEY
    body = request.json()
    check_body("responses", body)
    assert body["model"] == "deep-thinker" and body["store"] is False
    assert body["input"][0] == {"role": "developer", "content": "Be rigorous."}  # o3-pro reasons: by its name
    assert reply.text == "Proved."


def test_missing_settings_are_one_line(session: Session, wire: WireServer, azure: pytest.MonkeyPatch) -> None:
    azure.delenv("AZURE_OPENAI_API_KEY")
    with pytest.raises(MissingAPIKey, match="set the AZURE_OPENAI_API_KEY \\(or AZURE_OPENAI_AD_TOKEN\\) environment"):
        session.submit_turn("Hi", model="azure:gpt-4o-mini")
    azure.setenv("AZURE_OPENAI_API_KEY", KEY)
    azure.delenv("AZURE_OPENAI_ENDPOINT")
    with pytest.raises(ConfigError, match="azure: set AZURE_OPENAI_ENDPOINT to your resource's endpoint"):
        session.submit_turn("Hi", model="azure:gpt-4o-mini")
    azure.setenv("AZURE_OPENAI_ENDPOINT", wire.url)
    azure.setenv("AZURE_OPENAI_DEPLOYMENTS", "gpt-4o-mini")
    with pytest.raises(ConfigError, match="'gpt-4o-mini' is not MODEL=DEPLOYMENT"):
        session.submit_turn("Hi", model="azure:gpt-4o-mini")
    assert session.messages() == [] and wire.requests == []


def test_the_key_never_shows(session: Session, wire: WireServer) -> None:
    error = {"error": {"code": "401", "message": f"Access denied due to invalid subscription key {KEY}."}}
    wire.script(json_response(401, error))
    with pytest.raises(ProviderHTTPError) as caught:
        session.submit_turn("Hi", model="azure:gpt-4o-mini")
    assert KEY not in str(caught.value) and "\n" not in str(caught.value)
    assert KEY not in repr(session.settings)
