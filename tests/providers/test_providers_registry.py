"""One registration per provider: everything about a provider derives from its registration,
so a new one (here ``acme``, registered in a test registry) works, is documented and has its
secrets masked without a line of code anywhere else."""

from __future__ import annotations

import ast
import dataclasses
import logging
import traceback
from pathlib import Path

import pytest

from conftest import ROOT
from slotmagic._errors import ConfigError, MissingAPIKey, UnknownModel
from slotmagic.providers import KNOWN_PROVIDERS, REGISTRY, ProviderSettings, ProviderSpec, Registry, SettingSpec
from slotmagic.providers._endpoint import checked_url
from slotmagic.providers._registry import KeyedEndpoint
from slotmagic.providers._settings import settings_class

from .support import Drained, drain_async, drain_sync
from .wire_server import WireServer, json_response, oa_text_stream, sse_response

ACME_TOKEN = "acme-PLANTED-token-7f3e2d1c0b9a8f7e6d5c"
ACME_PASSWORD = "acme-url-pa55w0rd-913"


def acme_registry() -> Registry:
    """The built-in providers plus one more, as a plug-in would register it."""
    acme = ProviderSpec(
        "acme",
        "slotmagic.providers._openai:OpenAIProvider",  # speaks the OpenAI wire protocol
        summary="Acme's hosted models",
        example="acme:rocket-1",
        settings=(
            SettingSpec("acme_token", "ACME_TOKEN", "required for acme.example", secret=True),
            SettingSpec("acme_url", "ACME_URL", "`https://acme.example/v1`", url=True, check=checked_url),
        ),
        endpoint=KeyedEndpoint("acme_url", "acme_token", "https://acme.example/v1"),
    )
    return Registry([*REGISTRY, acme])


def test_a_new_registration_is_masked_and_works_without_other_code(
    wire: WireServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    registry = acme_registry()
    settings_cls = settings_class(registry)
    settings = settings_cls(acme_token=ACME_TOKEN, acme_url=f"{wire.url.replace('//', f'//bob:{ACME_PASSWORD}@')}/v1")
    seen = [repr(settings), str(settings), f"{settings}", repr(settings.replace(read_timeout=5))]
    assert "acme_token='***'" in seen[0] and "acme_url='http://***@127.0.0.1:" in seen[0]

    # The model string, the provider class, the endpoint and the docs all come from it.
    assert registry.parse_model("acme:rocket-1") == ("acme", "rocket-1")
    assert "acme" in registry.names() and "ACME_TOKEN" in registry.settings_table()
    provider, name = registry.provider("acme:rocket-1", settings)
    assert (provider.name, name) == ("acme", "rocket-1")
    endpoint = registry.endpoint(settings, "acme")
    assert endpoint.api_key == ACME_TOKEN and ACME_PASSWORD in endpoint.secrets

    # A whole reply, and a failure whose body quotes the token back.
    from slotmagic._core.messages import Message
    from slotmagic.providers import ChatRequest

    chat = ChatRequest(name, (Message.user("hi"),))
    wire.script(sse_response(oa_text_stream("from acme")))
    assert drain_sync(provider, chat).completion.message.content == "from acme"
    assert wire.requests[-1].headers["authorization"].startswith("Basic ")  # the URL's credentials win
    wire.script(json_response(401, {"error": {"message": f"bad token {ACME_TOKEN} for bob:{ACME_PASSWORD}"}}))
    failed: Drained = drain_async(provider, chat)
    assert failed.error is not None
    seen += [str(failed.error), repr(failed.error), "".join(traceback.format_exception(failed.error)), caplog.text]
    provider.close()

    for text in seen:
        assert ACME_TOKEN not in text and ACME_PASSWORD not in text
    with pytest.raises(MissingAPIKey, match="ACME_TOKEN"):
        registry.endpoint(settings_cls(), "acme", environ={})


def test_the_built_in_registrations() -> None:
    assert KNOWN_PROVIDERS == REGISTRY.names() == ("openai", "azure", "anthropic", "gemini", "ollama", "echo")
    secret = {s.name for s in REGISTRY.settings() if s.secret}
    assert secret == {
        "openai_api_key",
        "azure_openai_api_key",
        "azure_openai_ad_token",
        "anthropic_api_key",
        "gemini_api_key",
    }
    with pytest.raises(UnknownModel) as caught:
        REGISTRY.parse_model("gpt-4o")
    assert (
        "openai:gpt-4o-mini, azure:gpt-4o-mini, anthropic:claude-sonnet-4-5, gemini:gemini-2.5-flash, ollama:llama3.2 "
        "or echo" in str(caught.value)
    )


def test_every_secret_field_is_masked_by_its_registration() -> None:
    # No list of key names anywhere: repr masks what the field metadata marks secret.
    planted = {s.name: f"planted-{s.name}-0123456789" for s in REGISTRY.settings() if s.secret}
    text = repr(ProviderSettings(**planted))
    for name, value in planted.items():
        assert value not in text and f"{name}='***'" in text


def test_registrations_that_clash_are_refused() -> None:
    registry = acme_registry()
    with pytest.raises(ConfigError, match="registered already"):
        registry.register(ProviderSpec("acme", "x:y", summary="", example="acme:x"))
    clash = SettingSpec("openai_api_key", "OTHER_KEY", "", secret=True)
    with pytest.raises(ConfigError, match="taken"):
        registry.register(
            ProviderSpec(
                "other", "x:y", summary="", example="other:x", settings=(clash,), endpoint=KeyedEndpoint("", "", "")
            )
        )
    general = SettingSpec("read_timeout", "X_READ", "")
    odd = Registry(
        [
            ProviderSpec(
                "odd", "x:y", summary="", example="odd:x", settings=(general,), endpoint=KeyedEndpoint("", "", "")
            )
        ]
    )
    with pytest.raises(ConfigError, match="general setting"):
        settings_class(odd)


def test_the_documented_table_is_the_registry_table() -> None:
    page = (ROOT / "docs" / "guide" / "providers.md").read_text()
    assert REGISTRY.settings_table() in page


def test_the_typed_declaration_matches_the_built_class() -> None:
    """_settings.py declares ProviderSettings for type checkers; at run time the class is built
    from the registry. The two must have the same fields, in the same order, with the same
    defaults."""
    tree = ast.parse(Path(ROOT / "slotmagic" / "providers" / "_settings.py").read_text())
    declared = next(
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING"
        for node in node.body
        if isinstance(node, ast.ClassDef) and node.name == "ProviderSettings"
    )
    fields = [(n.target.id, n.value) for n in declared.body if isinstance(n, ast.AnnAssign)]  # type: ignore[union-attr]
    built = dataclasses.fields(ProviderSettings)
    assert [name for name, _ in fields] == [f.name for f in built]
    for (name, value), f in zip(fields, built, strict=True):
        if f.default is dataclasses.MISSING:
            assert f.default_factory() == {} and "default_factory=dict" in ast.unparse(value), name  # type: ignore[misc]
        else:
            assert eval(ast.unparse(value), {"MiB": 1024 * 1024}) == f.default, name
