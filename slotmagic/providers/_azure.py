"""Azure OpenAI: where an ``azure:MODEL`` request goes, and with which credential.

``azure:gpt-4o-mini`` names the model a deployment serves, so its window, its price and whether
it reasons come from the model data as for ``openai:gpt-4o-mini``; the deployment it is sent to
is named in ``azure_openai_deployments`` (``AZURE_OPENAI_DEPLOYMENTS``: ``"gpt-4o-mini=prod-4o,
o3-mini=reasoner"``), else it is the model's own name (as the Azure portal names deployments).

- the resource endpoint: ``azure_openai_endpoint`` / ``AZURE_OPENAI_ENDPOINT``
  (``https://RESOURCE.openai.azure.com``);
- the credential: an ``api-key`` header from ``AZURE_OPENAI_API_KEY``, else a Microsoft Entra
  bearer token from ``AZURE_OPENAI_AD_TOKEN`` (the names the official ``openai`` package reads);
- the API version: ``azure_openai_api_version`` / ``OPENAI_API_VERSION``. ``v1`` (the default)
  sends to ``/openai/v1/chat/completions`` with the deployment as the body's ``model``; a dated
  version (``2024-10-21``) to ``/openai/deployments/DEPLOYMENT/chat/completions?api-version=…``.
  The Responses API goes to ``/openai/v1/responses`` either way (Azure serves it there only).

Docs: https://learn.microsoft.com/azure/ai-foundry/openai/reference and
https://learn.microsoft.com/azure/ai-foundry/openai/api-version-lifecycle
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import quote

from .._errors import ConfigError, MissingAPIKey
from ._endpoint import Endpoint, Lookup, Registration, checked_url

__all__ = ["API_V1", "AzureEndpoint", "chat_path", "check_deployments", "check_version", "deployments"]

API_V1 = "v1"
_VERSION = re.compile(r"(v1|preview|\d{4}-\d{2}-\d{2}(-preview)?)\Z")
_DEPLOYMENT = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}\Z")


@dataclass(frozen=True)
class AzureEndpoint:
    """The resource endpoint and an api-key or, without one, a bearer token."""

    url: str  # the setting holding the resource endpoint
    key: str  # the setting holding the api-key
    token: str  # the setting holding a Microsoft Entra token

    def resolve(self, spec: Registration, lookup: Lookup) -> Endpoint:
        url = lookup(self.url)
        if url is None:
            raise ConfigError(
                f"azure: set {spec.setting(self.url).env} to your resource's endpoint "
                "(https://RESOURCE.openai.azure.com), or %config SlotMagic.azure_openai_endpoint"
            )
        credential = lookup(self.key) or lookup(self.token)
        if credential is None:
            raise MissingAPIKey(spec.name, f"{spec.setting(self.key).env} (or {spec.setting(self.token).env})")
        base = checked_url(*url)
        return Endpoint(
            spec.name, base[: -len("/openai")] if base.rstrip("/").endswith("/openai") else base, credential[0]
        )


def deployments(value: str | None, source: str = "azure_openai_deployments") -> dict[str, str]:
    """``"model=deployment,..."`` as a dict; ConfigError naming ``source`` when malformed."""
    found: dict[str, str] = {}
    for pair in (value or "").split(","):
        if not pair.strip():
            continue
        model, sep, deployment = (p.strip() for p in pair.partition("="))
        if not sep or not model or not _DEPLOYMENT.match(deployment):
            raise ConfigError(
                f"{source}: {pair.strip()!r} is not MODEL=DEPLOYMENT; write e.g. 'gpt-4o-mini=prod-4o,o3-mini=reasoner'"
            )
        found[model] = deployment
    return found


def check_deployments(value: str, source: str) -> object:
    return deployments(value, source)


def check_version(value: str, source: str) -> object:
    if not _VERSION.match(value.strip()):
        raise ConfigError(f"{source}: {value!r} is not an API version; use v1, or a dated one such as 2024-10-21")
    return value.strip()


def chat_path(deployment: str, version: str) -> str:
    """Where chat completions go for ``deployment`` under API ``version``."""
    if version == API_V1:
        return "/openai/v1/chat/completions"
    return f"/openai/deployments/{quote(deployment, safe='')}/chat/completions?api-version={quote(version, safe='')}"
