"""The providers slotmagic knows, one registration each.

A registration says everything about a provider: its name, the class that speaks its wire
protocol (imported only when a model needs it, so ``import slotmagic`` loads no httpx), its
settings with their environment variables and defaults, which of them are secret, and how
they make an :class:`~.endpoint.Endpoint`. Everything else is derived from the registry:

- the ``ProviderSettings`` fields (:mod:`.settings`), whose ``repr`` masks each field marked
  ``secret`` (and the credentials of each ``url`` field) because the registration says so,
  not because a list elsewhere names it;
- :func:`parse_model`, :func:`resolve_provider`, :func:`resolve_endpoint`, ``KNOWN_PROVIDERS``;
- the ``%config SlotMagic`` traits of the non-secret settings (:mod:`slotmagic._magics.options`);
- the settings table in the docs (:meth:`Registry.settings_table`; a test keeps the docs'
  copy equal to it).

It also says what the rest of slotmagic asks about the provider's models: their context
windows (``window``, else the model database under ``catalog``), their prices (the database,
else ``price``) and whether their tokens are counted exactly with OpenAI's encodings
(``exact_count``). No table elsewhere names a provider.

Adding a provider is adding one :class:`ProviderSpec` to :data:`REGISTRY` (and, for type
checkers, its fields to the declaration in :mod:`.settings`); a package adds one through the
``slotmagic.providers`` entry point group, naming its ``ProviderSpec`` (see
docs/guide/providers.md).
"""

from __future__ import annotations

import importlib
import logging
import os
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from .._core.secrets import masked_url, redact_all
from .._errors import ConfigError, MissingAPIKey, ProviderError, SlotMagicError, UnknownModel, exception_text
from ..tokens._counter import count_exactly
from ._azure import AzureEndpoint, check_deployments, check_version
from ._endpoint import Endpoint, Lookup, checked_url, ollama_base_url
from ._model_names import DEFAULT_OPENAI_REASONING_MODELS, model_patterns
from ._plugins import group_may_be_named
from ._window_rules import ECHO_WINDOW, FixedWindow, ServedWindow, WindowRule

logger = logging.getLogger("slotmagic")

ENTRY_POINTS = "slotmagic.providers"  # the group a package registers a provider under

DEFAULT_OPENAI_BASE_URL = "https://api.openai.com/v1"
DEFAULT_ANTHROPIC_BASE_URL = "https://api.anthropic.com"
DEFAULT_GEMINI_BASE_URL = "https://generativelanguage.googleapis.com/v1beta/openai"


@dataclass(frozen=True)
class SettingSpec:
    """One provider setting: a ``ProviderSettings`` field holding ``str | None``.

    While the field is None (or empty) its environment variable is read at each request.
    """

    name: str  # the field name, e.g. "openai_api_key"
    env: str  # the environment variable, e.g. "OPENAI_API_KEY"
    default: str  # what applies when neither is set, as the docs say it
    secret: bool = False  # a key: masked in every repr, never a %config setting
    url: bool = False  # may carry credentials: shown without them
    help: str = ""  # for %config SlotMagic (settings that are not secret)
    check: Callable[[str, str], object] | None = None  # (value, source) -> raises ConfigError

    def shown(self, value: object) -> str:
        """``repr`` of a value of this setting, as it may be shown."""
        if value is None:
            return "None"
        if self.secret:
            return "'***'"
        if self.url and isinstance(value, str):
            return repr(masked_url(value))
        return repr(value)


class EndpointRule(Protocol):
    """How a provider's settings make the endpoint of a request."""

    def resolve(self, spec: ProviderSpec, lookup: Lookup) -> Endpoint: ...


@dataclass(frozen=True)
class KeyedEndpoint:
    """A base URL and a key: the official URL needs the key, a URL of your own may not."""

    url: str  # the setting holding the base URL
    key: str  # the setting holding the key
    default_url: str

    def resolve(self, spec: ProviderSpec, lookup: Lookup) -> Endpoint:
        url = lookup(self.url)
        key = lookup(self.key)
        if key is None and url is None:  # a custom server decides for itself whether it wants a key
            raise MissingAPIKey(spec.name, spec.setting(self.key).env)
        base_url = checked_url(*url) if url else self.default_url
        return Endpoint(spec.name, base_url, key[0] if key else None)


@dataclass(frozen=True)
class OllamaEndpoint:
    """An Ollama server's OpenAI-compatible ``/v1``, from ``OLLAMA_HOST`` as Ollama reads it."""

    host: str  # the setting holding the host

    def resolve(self, spec: ProviderSpec, lookup: Lookup) -> Endpoint:
        host = lookup(self.host)
        return Endpoint(spec.name, ollama_base_url(*host) if host else ollama_base_url(None))


@dataclass(frozen=True)
class ProviderSpec:
    """One provider's registration."""

    name: str  # the "provider" in "provider:model"
    factory: str  # "module:Class", imported when first needed; Class(settings, name=..., registry=...)
    summary: str  # what answers, for the docs
    example: str  # a model string, for messages and docs
    settings: tuple[SettingSpec, ...] = ()
    endpoint: EndpointRule | None = None  # None: no network (echo)
    bare: bool = False  # the model string may be the name alone ("echo")
    catalog: str | None = None  # its id in the model database (genai-prices): windows and prices
    window: WindowRule | None = None  # its models' windows, before the database is asked
    price: tuple[float, float, float | None] | None = None  # USD per million in/out/cached, when nothing else says
    exact_count: bool = False  # its model names are OpenAI's, counted exactly with their encodings
    # The request format it speaks: "openai" (chat completions), "anthropic" (Messages), or None
    # (its own, as echo's). The view pipeline mends what that format requires (_engine/steps/).
    wire: str | None = None
    # A server at a base URL the model database does not know (vLLM, llama.cpp, a proxy) is asked
    # the window of a model the database does not know either (``_served.py``).
    asks_server: bool = False

    def setting(self, name: str) -> SettingSpec:
        for spec in self.settings:
            if spec.name == name:
                return spec
        raise KeyError(name)

    def make(self, settings: Any, registry: Registry) -> Any:
        module, _, attr = self.factory.partition(":")
        cls = getattr(importlib.import_module(module), attr)
        return cls(settings, name=self.name, registry=registry)


_IDENTIFIER = re.compile(r"[a-z][a-z0-9_]*\Z")


class Registry:
    """Provider registrations by name, in the order they were registered."""

    def __init__(
        self, specs: Iterable[ProviderSpec] = (), *, publish: Callable[[ProviderSpec], None] | None = None
    ) -> None:
        self._specs: dict[str, ProviderSpec] = {}
        self._plugins: dict[str, str] = {}  # provider -> the entry point it came from (a package's)
        self._publish = publish  # told of each registration (the counting rules below the providers)
        for spec in specs:
            self.register(spec)

    def register(self, spec: ProviderSpec) -> ProviderSpec:
        if not _IDENTIFIER.match(spec.name):
            raise ConfigError(f"provider name {spec.name!r} must be lower-case letters, digits and '_'")
        if spec.name in self._specs:
            raise ConfigError(f"provider {spec.name!r} is registered already")
        taken = {s.name for s in self.settings()} | {s.env for s in self.settings()}
        for setting in spec.settings:
            if not _IDENTIFIER.match(setting.name) or setting.name in taken or setting.env in taken:
                raise ConfigError(
                    f"provider {spec.name!r}: setting {setting.name!r} or {setting.env} is taken or invalid"
                )
            taken |= {setting.name, setting.env}
        if spec.endpoint is None and spec.settings:
            raise ConfigError(f"provider {spec.name!r} has settings but no endpoint rule")
        self._specs[spec.name] = spec
        if self._publish is not None:
            self._publish(spec)
        return spec

    def get(self, provider: str) -> ProviderSpec | None:
        """The registration of ``provider`` (a name, not a model string), or None."""
        return self._specs.get(provider)

    def wire(self, model: str) -> str | None:
        """The request format ``model``'s provider speaks (``ProviderSpec.wire``); None for a
        provider of its own format or a model string naming no registered provider."""
        provider, sep, _ = model.partition(":")
        spec = self._specs.get(provider if sep else model)
        return spec.wire if spec is not None else None

    def load_entry_points(self) -> list[str]:
        """Register the provider each installed package names in the ``slotmagic.providers``
        entry point group (a ``ProviderSpec``, or a function returning one). One that cannot be
        loaded or registered — whatever it raises, ``SystemExit`` (a module-level argparse) and
        ``KeyboardInterrupt`` included — is left out with one logged line naming it (its words
        with secrets redacted); the others still load. Returns the names registered."""
        import importlib.metadata  # ~11 ms (email, zipfile, csv): imported only when a package may name one

        added: list[str] = []
        try:
            entries = list(importlib.metadata.entry_points(group=ENTRY_POINTS))
        except Exception as exc:  # an installed distribution's metadata that cannot be read
            logger.warning("provider plugins were not loaded: %s", plugin_failure(exc))
            return added
        for entry in entries:
            try:
                spec = entry.load()
                if not isinstance(spec, ProviderSpec) and callable(spec):
                    spec = spec()
                if not isinstance(spec, ProviderSpec):
                    raise ConfigError(f"it is a {type(spec).__name__}, not a ProviderSpec")
                added.append(self.register(spec).name)
                dist = getattr(entry, "dist", None)
                self._plugins[spec.name] = f"{dist.name}, {entry.value}" if dist is not None else entry.value
            except BaseException as exc:  # a broken package (SystemExit, KeyboardInterrupt too) must not stop slotmagic
                logger.warning(
                    "provider %r from %s was not registered: %s", entry.name, entry.value, plugin_failure(exc)
                )
        return added

    def __iter__(self) -> Iterator[ProviderSpec]:
        return iter(self._specs.values())

    def names(self) -> tuple[str, ...]:
        return tuple(self._specs)

    def settings(self) -> Iterator[SettingSpec]:
        """Every provider setting, in registration order."""
        for spec in self._specs.values():
            yield from spec.settings

    # -- models --------------------------------------------------------------------------------

    def parse_model(self, model: str) -> tuple[str, str]:
        """Split ``"provider:model"``; a bare provider name registered as ``bare`` (``echo``)
        is ``(name, name)``. The provider must be registered."""
        provider, sep, name = model.partition(":")
        if not sep:
            spec = self._specs.get(model)
            if spec is not None and spec.bare:
                return model, model
            raise UnknownModel(f"model {model!r} names no provider; write provider:model, e.g. {self._examples()}")
        if provider not in self._specs:
            raise UnknownModel(f"unknown provider {provider!r} in model {model!r}; known: {', '.join(self._specs)}")
        if not name:
            raise UnknownModel(f"model {model!r} names no model after {provider + ':'!r}")
        return provider, name

    def provider(self, model: str, settings: Any) -> tuple[Any, str]:
        """A new provider object serving ``model``, and the model name to send it. A plugin's
        provider that cannot be made (its module missing, its constructor raising anything)
        is one line naming the plugin, its words with secrets redacted."""
        provider, name = self.parse_model(model)
        spec = self._specs[provider]
        origin = self._plugins.get(provider)
        if origin is None:
            return spec.make(settings, self), name
        try:
            return spec.make(settings, self), name
        except SlotMagicError:
            raise  # its own one line (a missing key, say)
        except BaseException as exc:  # SystemExit and KeyboardInterrupt are the plugin's too
            secrets = [str(v) for s in spec.settings if s.secret and (v := getattr(settings, s.name, None))]
            raise ProviderError(
                f"provider {provider!r} (plugin {origin}) could not be made: {plugin_failure(exc, secrets)}; "
                "fix or reinstall the package, or use another model"
            ) from None

    def endpoint(self, settings: Any, provider: str, environ: Mapping[str, str] | None = None) -> Endpoint:
        """The endpoint for ``provider`` now: settings first, then the environment, then defaults."""
        spec = self._specs.get(provider)
        if spec is None or spec.endpoint is None:
            raise ConfigError(f"no endpoint settings for provider {provider!r}")
        by_name = {s.name: s for s in spec.settings}
        return spec.endpoint.resolve(spec, lambda name: _lookup(by_name[name], settings, environ))

    def value(self, settings: Any, name: str, environ: Mapping[str, str] | None = None) -> tuple[str, str] | None:
        """A provider setting's value now and where it came from (the setting, else its
        environment variable), or None when neither is set."""
        for setting in self.settings():
            if setting.name == name:
                return _lookup(setting, settings, environ)
        raise KeyError(name)

    def _examples(self) -> str:
        examples = [s.name if s.bare else s.example for s in self._specs.values()]
        return ", ".join(examples[:-1]) + (" or " if len(examples) > 1 else "") + examples[-1]

    # -- docs ----------------------------------------------------------------------------------

    def settings_table(self) -> str:
        """The provider settings as a Markdown table (docs/guide/providers.md holds a copy of it)."""
        rows = [("setting", "environment variable", "default")]
        rows += [(f"`{s.name}`", f"`{s.env}`", s.default) for s in self.settings()]
        widths = [max(len(row[i]) for row in rows) for i in range(3)]
        lines = ["| " + " | ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)) + " |" for row in rows]
        lines.insert(1, "|" + "|".join("-" * (w + 2) for w in widths) + "|")
        return "\n".join(lines)


def _lookup(setting: SettingSpec, settings: Any, environ: Mapping[str, str] | None) -> tuple[str, str] | None:
    value = getattr(settings, setting.name)
    if value:  # empty strings mean "not set"
        return value, f"the {setting.name} setting"
    env = os.environ if environ is None else environ
    if env.get(setting.env):
        return env[setting.env], setting.env
    return None


def _check_url(value: str, source: str) -> object:
    return checked_url(value, source)


def _check_patterns(value: str, source: str) -> object:
    return model_patterns(value, source)


def _check_host(value: str, source: str) -> object:
    return ollama_base_url(value, source)


REGISTRY = Registry(
    [
        ProviderSpec(
            "openai",
            "slotmagic.providers._openai:OpenAIProvider",
            summary="OpenAI chat completions, or any OpenAI-compatible server",
            example="openai:gpt-4o-mini",
            settings=(
                SettingSpec("openai_api_key", "OPENAI_API_KEY", "required for api.openai.com", secret=True),
                SettingSpec(
                    "openai_base_url",
                    "OPENAI_BASE_URL",
                    f"`{DEFAULT_OPENAI_BASE_URL}`",
                    url=True,
                    help="Base URL of an OpenAI-compatible server for openai:... models (vLLM, llama.cpp, "
                    "LM Studio, OpenRouter, a proxy); empty uses OPENAI_BASE_URL, else api.openai.com.",
                    check=_check_url,
                ),
                SettingSpec(
                    "openai_reasoning_models",
                    "OPENAI_REASONING_MODELS",
                    f"`{DEFAULT_OPENAI_REASONING_MODELS}`",
                    help="Which openai:... models are reasoning models, sent the system prompt as a developer "
                    "message and max_completion_tokens: model-name patterns separated by commas (an Azure "
                    "deployment's name, 'o3*'), or 'none'; empty uses OPENAI_REASONING_MODELS, else "
                    f"{DEFAULT_OPENAI_REASONING_MODELS}.",
                    check=_check_patterns,
                ),
                SettingSpec(
                    "openai_responses_models",
                    "OPENAI_RESPONSES_MODELS",
                    "the models only the Responses API serves",
                    help="Which openai:... models go to the Responses API (/v1/responses) instead of chat completions: "
                    "model-name patterns separated by commas ('gpt-5*', '*' for all), or 'none'; empty uses "
                    "OPENAI_RESPONSES_MODELS, else the models only it serves (o3-pro, gpt-5-pro, ...).",
                    check=_check_patterns,
                ),
            ),
            endpoint=KeyedEndpoint("openai_base_url", "openai_api_key", DEFAULT_OPENAI_BASE_URL),
            catalog="openai",
            exact_count=True,
            wire="openai",
            asks_server=True,
        ),
        ProviderSpec(
            "azure",
            "slotmagic.providers._azure_provider:AzureProvider",
            summary="an Azure OpenAI deployment of the model (see Azure OpenAI below)",
            example="azure:gpt-4o-mini",
            settings=(
                SettingSpec("azure_openai_api_key", "AZURE_OPENAI_API_KEY", "sent as `api-key`", secret=True),
                SettingSpec("azure_openai_ad_token", "AZURE_OPENAI_AD_TOKEN", "a bearer token, if no key", secret=True),
                SettingSpec(
                    "azure_openai_endpoint",
                    "AZURE_OPENAI_ENDPOINT",
                    "`https://RESOURCE.openai.azure.com`",
                    url=True,
                    check=_check_url,
                    help="The Azure OpenAI resource's endpoint for azure:... models.",
                ),
                SettingSpec(
                    "azure_openai_api_version",
                    "OPENAI_API_VERSION",
                    "`v1`",
                    check=check_version,
                    help="The Azure OpenAI API version: v1, or a dated one such as 2024-10-21.",
                ),
                SettingSpec(
                    "azure_openai_deployments",
                    "AZURE_OPENAI_DEPLOYMENTS",
                    "each model's own name",
                    check=check_deployments,
                    help="The deployment of each azure:MODEL: 'gpt-4o-mini=prod-4o'.",
                ),
            ),
            endpoint=AzureEndpoint("azure_openai_endpoint", "azure_openai_api_key", "azure_openai_ad_token"),
            catalog="azure",
            exact_count=True,
            wire="openai",
        ),
        ProviderSpec(
            "anthropic",
            "slotmagic.providers._anthropic:AnthropicProvider",
            summary="Anthropic's Messages API",
            example="anthropic:claude-sonnet-4-5",
            settings=(
                SettingSpec("anthropic_api_key", "ANTHROPIC_API_KEY", "required for api.anthropic.com", secret=True),
                SettingSpec(
                    "anthropic_base_url",
                    "ANTHROPIC_BASE_URL",
                    f"`{DEFAULT_ANTHROPIC_BASE_URL}`",
                    url=True,
                    help="Base URL for anthropic:... models; empty uses ANTHROPIC_BASE_URL, else api.anthropic.com.",
                    check=_check_url,
                ),
            ),
            endpoint=KeyedEndpoint("anthropic_base_url", "anthropic_api_key", DEFAULT_ANTHROPIC_BASE_URL),
            catalog="anthropic",
            wire="anthropic",
        ),
        ProviderSpec(
            "gemini",
            "slotmagic.providers._openai:OpenAIProvider",  # its OpenAI-compatible endpoint
            summary="Google's Gemini models, through their OpenAI-compatible endpoint",
            example="gemini:gemini-2.5-flash",
            settings=(
                SettingSpec("gemini_api_key", "GEMINI_API_KEY", "required (Google AI Studio)", secret=True),
                SettingSpec(
                    "gemini_base_url",
                    "GEMINI_BASE_URL",
                    f"`{DEFAULT_GEMINI_BASE_URL}`",
                    url=True,
                    check=_check_url,
                    help="Base URL for gemini:... models (an OpenAI-compatible endpoint).",
                ),
            ),
            endpoint=KeyedEndpoint("gemini_base_url", "gemini_api_key", DEFAULT_GEMINI_BASE_URL),
            catalog="google",
            wire="openai",
        ),
        ProviderSpec(
            "ollama",
            "slotmagic.providers._openai:OpenAIProvider",  # Ollama's OpenAI-compatible /v1, no key
            summary="a local Ollama server, through its OpenAI-compatible `/v1` endpoint",
            example="ollama:llama3.2",
            settings=(
                SettingSpec(
                    "ollama_host",
                    "OLLAMA_HOST",
                    "`http://localhost:11434` (no key)",
                    url=True,
                    help="Where ollama:... models are served; empty uses OLLAMA_HOST, else http://localhost:11434.",
                    check=_check_host,
                ),
            ),
            endpoint=OllamaEndpoint("ollama_host"),
            window=ServedWindow(),
            price=(0.0, 0.0, 0.0),  # it runs on your own machine
            wire="openai",
        ),
        ProviderSpec(
            "echo",
            "slotmagic.providers._echo:EchoProvider",
            summary="the offline test model (no network, no key)",
            example="echo",
            bare=True,
            window=FixedWindow(ECHO_WINDOW, "the offline test model"),
        ),
    ],
    publish=lambda spec: count_exactly(spec.name) if spec.exact_count else None,
)


def plugin_failure(exc: BaseException, secrets: Iterable[str] = ()) -> str:
    """What a plugin raised, as one line: its type and words, secrets redacted (a plugin may
    quote the environment, an API key among it)."""
    return redact_all(f"{type(exc).__name__}: {exception_text(exc, 200)}", secrets)


def load_plugins() -> None:
    """Register the providers installed packages name in the entry point group, if any may."""
    if group_may_be_named(ENTRY_POINTS):
        REGISTRY.load_entry_points()
