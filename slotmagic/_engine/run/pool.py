"""The providers a session's turns use: one per provider name, kept for its open connections."""

from __future__ import annotations

from ...providers import ProviderSettings, parse_model, resolve_provider
from ...providers._base import Provider


class ProviderPool:
    """Makes each provider on first use and keeps it, so its connections are reused by the
    next turn; ``close`` closes them all (new settings, or the session ending)."""

    def __init__(self) -> None:
        self._providers: dict[str, Provider] = {}

    def get(self, model: str, settings: ProviderSettings) -> Provider:
        """The provider for ``model``, made with ``settings`` unless one is kept already."""
        name, _ = parse_model(model)
        if name not in self._providers:
            self._providers[name] = resolve_provider(model, settings)[0]
        return self._providers[name]

    def kept(self) -> dict[str, Provider]:
        """The providers kept, by provider name."""
        return dict(self._providers)

    def close(self) -> None:
        for provider in self._providers.values():
            provider.close()
        self._providers.clear()
