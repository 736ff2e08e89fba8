"""``azure:MODEL``: OpenAI's wire formats on an Azure OpenAI resource (see :mod:`._azure`)."""

from __future__ import annotations

from dataclasses import replace

from .._core.request import ChatRequest
from ._azure import API_V1, chat_path, deployments
from ._openai import OpenAIProvider, request_body
from ._responses import responses_body
from ._transport import SSECall

__all__ = ["AzureProvider"]


class AzureProvider(OpenAIProvider):
    """Chat completions (or the Responses API) of an Azure deployment, by the model it serves."""

    name = "azure"

    def call(self, request: ChatRequest) -> SSECall:
        endpoint = self.endpoint()
        keyed = self.registry.value(self.settings, "azure_openai_api_key") is not None
        assert endpoint.api_key is not None  # AzureEndpoint refuses to resolve without one
        headers = {"api-key": endpoint.api_key} if keyed else {"authorization": f"Bearer {endpoint.api_key}"}
        deployment = self.deployment(request.model)
        reasoning = self.reasoning(request.model)  # by the model's name, not the deployment's
        sent = replace(request, model=deployment)
        if self.responses(request.model):
            return SSECall(endpoint, "/openai/v1/responses", responses_body(sent, reasoning=reasoning), headers)
        label = f"{self.name} ({endpoint.host})"
        body = request_body(sent, endpoint, reasoning=reasoning, label=label)
        return SSECall(endpoint, chat_path(deployment, self.version()), body, headers)

    def deployment(self, model: str) -> str:
        found = self.registry.value(self.settings, "azure_openai_deployments")
        return deployments(*found).get(model, model) if found else model

    def version(self) -> str:
        found = self.registry.value(self.settings, "azure_openai_api_version")
        return found[0].strip() if found else API_V1
