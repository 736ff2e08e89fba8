"""Credentials written into a base URL (``http://user:password@host/v1``) never leave the
process as text: not in a ``ConfigError``, a ``repr``, httpx's log lines, nor an error body in
which the server quotes the ``Authorization`` header back. Requests go to the bare URL with the
credentials as a Basic header; with an API key set as well, the rule in the README holds."""

from __future__ import annotations

import base64
import logging
import traceback

import pytest

from slotmagic._core.messages import Message
from slotmagic._core.secrets import masked_url
from slotmagic._errors import ConfigError, ProviderHTTPError
from slotmagic.providers import ChatRequest, ProviderSettings
from slotmagic.providers._anthropic import AnthropicProvider
from slotmagic.providers._endpoint import Endpoint
from slotmagic.providers._openai import OpenAIProvider
from slotmagic.providers._settings import resolve_endpoint

from .support import PLANTED_ANTHROPIC_KEY, PLANTED_OPENAI_KEY, drain_sync
from .wire_server import WireServer, an_text_stream, json_response, oa_text_stream, sse_response

USER, PASSWORD = "alice", "pa55w0rd-PLANTED-url-secret"
TOKEN = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
HELLO = ChatRequest("m", (Message.user("Hello"),))


def with_credentials(url: str, user: str = USER, password: str = PASSWORD) -> str:
    return url.replace("://", f"://{user}:{password}@", 1)


def leaks(text: str) -> bool:
    return PASSWORD in text or TOKEN in text or f"{USER}:{PASSWORD}" in text


@pytest.mark.parametrize(
    "changes",
    [
        {"openai_base_url": "htp://alice:pa55w0rd-PLANTED-url-secret@proxy.example/v1"},
        {"openai_base_url": "alice:pa55w0rd-PLANTED-url-secret@proxy.example:8080/v1"},
        {"anthropic_base_url": "http://alice:pa55w0rd-PLANTED-url-secret@proxy.example:99999"},
        {"openai_base_url": "http://alice:pa55w0rd-PLANTED-url-secret/x@proxy.example/v1"},
        {"ollama_host": "ftp://alice:pa55w0rd-PLANTED-url-secret@gpu-box"},
    ],
)
def test_a_malformed_url_is_refused_without_its_password(changes: dict[str, str]) -> None:
    with pytest.raises(ConfigError) as caught:
        ProviderSettings(**changes)  # type: ignore[arg-type]
    assert not leaks(str(caught.value)) and "***@" in str(caught.value)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("variable", ["OPENAI_BASE_URL", "OLLAMA_HOST"])
def test_a_malformed_url_from_the_environment_is_refused_without_its_password(
    monkeypatch: pytest.MonkeyPatch, variable: str
) -> None:
    monkeypatch.setenv(variable, f"gopher://{USER}:{PASSWORD}@proxy.example")
    with pytest.raises(ConfigError) as caught:
        resolve_endpoint(ProviderSettings(), "openai" if variable == "OPENAI_BASE_URL" else "ollama")
    assert not leaks(str(caught.value)) and variable in str(caught.value)


def test_reprs_show_urls_without_credentials() -> None:
    settings = ProviderSettings(
        openai_base_url=with_credentials("http://proxy.example/v1"),
        anthropic_base_url=with_credentials("https://gateway.example"),
        ollama_host=with_credentials("http://gpu-box:11434"),
    )
    for text in (repr(settings), str(settings), repr(resolve_endpoint(settings, "openai"))):
        assert not leaks(text), text
    assert "openai_base_url='http://***@proxy.example/v1'" in repr(settings)


def test_the_endpoint_keeps_credentials_apart_from_the_url() -> None:
    endpoint = Endpoint("openai", "http://al%40ce:p%2Fss@proxy.example:8443/v1/")
    assert (endpoint.base_url, endpoint.host) == ("http://proxy.example:8443/v1", "proxy.example:8443")
    assert (endpoint.username, endpoint.password) == ("al@ce", "p/ss")
    assert endpoint.basic_auth == "Basic " + base64.b64encode(b"al@ce:p/ss").decode()
    assert {"p/ss", "p%2Fss", "al@ce:p/ss", base64.b64encode(b"al@ce:p/ss").decode()} <= set(endpoint.secrets)
    token_only = Endpoint("openai", "https://sk-in-the-user-part-123456@gateway.example/v1")
    assert "sk-in-the-user-part-123456" in token_only.secrets  # a user name alone is the token
    assert masked_url("https://u:p@h/p@th") == "https://***@th"  # the last @ wins: nothing survives


def test_ollama_host_keeps_its_credentials(wire: WireServer) -> None:
    settings = ProviderSettings(ollama_host=with_credentials(wire.url))
    endpoint = resolve_endpoint(settings, "ollama")
    assert endpoint.base_url == wire.url + "/v1" and endpoint.password == PASSWORD
    provider = OpenAIProvider(settings, name="ollama")
    wire.script(sse_response(oa_text_stream("ok")))
    assert drain_sync(provider, HELLO).completion.message.content == "ok"
    assert wire.requests[-1].headers["authorization"] == f"Basic {TOKEN}"
    provider.close()


@pytest.mark.parametrize("protocol", ["openai", "anthropic"])
def test_credentials_travel_as_a_basic_header_and_never_as_text(
    wire: WireServer, caplog: pytest.LogCaptureFixture, protocol: str
) -> None:
    """httpx logs every request URL at INFO and every connection step at DEBUG; the request
    goes to the bare URL, so none of that can hold the password. A server that quotes the
    Authorization header in its error body has the token redacted."""
    caplog.set_level(logging.DEBUG)
    if protocol == "openai":
        provider = OpenAIProvider(ProviderSettings(openai_base_url=with_credentials(wire.url + "/v1")))
        success = oa_text_stream("fine")
    else:
        settings = ProviderSettings(
            anthropic_base_url=with_credentials(wire.url), anthropic_api_key=PLANTED_ANTHROPIC_KEY
        )
        provider = AnthropicProvider(settings)
        success = an_text_stream("fine")
    wire.script(sse_response(success))
    assert drain_sync(provider, HELLO).completion.message.content == "fine"
    sent = wire.requests[-1]
    assert sent.headers["authorization"] == f"Basic {TOKEN}"
    if protocol == "anthropic":  # the key has a header of its own, so both are sent
        assert sent.headers["x-api-key"] == PLANTED_ANTHROPIC_KEY

    echo = f"Authorization: Basic {TOKEN} rejected for {USER}:{PASSWORD}; half a token: {TOKEN[:16]}"
    wire.script(json_response(401, {"error": {"message": echo, "type": "authentication_error"}}))
    error = drain_sync(provider, HELLO).error
    assert isinstance(error, ProviderHTTPError) and "[redacted]" in str(error)
    texts = [str(error), repr(error), "".join(traceback.format_exception(error)), caplog.text]
    assert "HTTP Request: POST http://127.0.0.1" in caplog.text  # httpx did log the requests
    assert [t for t in texts if leaks(t) or TOKEN[:16] in t] == []
    provider.close()


def test_with_a_key_and_url_credentials_the_url_credentials_are_sent(
    wire: WireServer, caplog: pytest.LogCaptureFixture
) -> None:
    """OpenAI's key and HTTP Basic both need the Authorization header: the credentials written
    into the URL win (they were written for this very server), the key is not sent, and one
    warning line says so, once, naming neither."""
    settings = ProviderSettings(openai_base_url=with_credentials(wire.url + "/v1"), openai_api_key=PLANTED_OPENAI_KEY)
    provider = OpenAIProvider(settings)
    for _ in range(2):
        wire.script(sse_response(oa_text_stream("ok")))
        drain_sync(provider, HELLO)
        assert wire.requests[-1].headers["authorization"] == f"Basic {TOKEN}"
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING and r.name.startswith("slotmagic")]
    assert len(warnings) == 1
    assert "URL's credentials are sent (HTTP Basic) and the key is not" in warnings[0].getMessage()
    assert not leaks(caplog.text) and PLANTED_OPENAI_KEY not in caplog.text
    provider.close()


def test_a_reason_phrase_or_content_type_quoting_the_password_is_redacted(wire: WireServer) -> None:
    provider = OpenAIProvider(ProviderSettings(openai_base_url=with_credentials(wire.url + "/v1"), max_retries=0))
    wire.script([f"HTTP/1.1 403 denied {PASSWORD}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n".encode()])
    wire.script([f"HTTP/1.1 200 OK\r\ncontent-type: text/{PASSWORD}\r\ncontent-length: 0\r\n\r\n".encode()])
    for _ in range(2):
        error = drain_sync(provider, HELLO).error
        assert error is not None and "[redacted]" in str(error) and not leaks(str(error)), error
    provider.close()
