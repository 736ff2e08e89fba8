"""Pacing concurrent requests: a limit on how many are in flight, and a 429 that slows down
only the provider that sent it.

Several replies requested at once (a fan-out) share one :class:`Pacer`, made known to the
HTTP transport through a context variable, so no provider's signature changes and a turn run
on its own is not paced at all. While a request waits before a retry it gives its place back,
so a provider that answered 429 holds no place that another provider could use; and until its
wait is over, the other requests to that provider wait too instead of earning 429s of their own.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from contextvars import ContextVar

__all__ = ["PACER", "Pacer", "backoff", "ready"]


class Pacer:
    """At most ``limit`` requests in flight, and per-provider backoff after a 429."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._places = asyncio.Semaphore(limit)
        self._not_before: dict[str, float] = {}  # provider -> monotonic time it may be asked again
        self.backoffs: list[tuple[str, float]] = []  # (provider, seconds) as they happened

    @asynccontextmanager
    async def place(self) -> AsyncIterator[None]:
        """Hold one of the ``limit`` places for a whole request, its retries included."""
        async with self._places:
            yield

    async def ready(self, provider: str) -> None:
        """Return once ``provider`` may be sent a request (after a 429's wait)."""
        while (wait := self._not_before.get(provider, 0.0) - time.monotonic()) > 0:
            await self._away(wait)

    async def backoff(self, provider: str, seconds: float) -> None:
        """Wait ``seconds`` before retrying ``provider``; its other requests wait as long."""
        self.backoffs.append((provider, seconds))
        until = time.monotonic() + seconds
        self._not_before[provider] = max(self._not_before.get(provider, 0.0), until)
        await self.ready(provider)

    async def _away(self, seconds: float) -> None:
        """Sleep without holding a place: another provider's request may use it meanwhile."""
        self._places.release()
        try:
            await asyncio.sleep(seconds)
        finally:  # held again before the caller's ``place()`` gives it back, even when cancelled
            await asyncio.shield(self._places.acquire())


PACER: ContextVar[Pacer | None] = ContextVar("slotmagic_pacer", default=None)


async def ready(provider: str) -> None:
    pacer = PACER.get()
    if pacer is not None:
        await pacer.ready(provider)


async def backoff(provider: str, seconds: float) -> None:
    pacer = PACER.get()
    if pacer is None:
        await asyncio.sleep(seconds)
    else:
        await pacer.backoff(provider, seconds)
