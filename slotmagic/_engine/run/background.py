"""Running a coroutine from synchronous code that may itself run inside an event loop.

A notebook cell runs inside the kernel's own event loop, which can neither be blocked by
``asyncio.run`` nor entered again. So the coroutine gets a new loop in a worker thread, and the
calling thread stays free: it hands the coroutine's events to a callback, in the calling
thread (where displays belong), as they come. An interrupt there (Ctrl-C) cancels the
coroutine and waits for it to wind down (its connections closed) before it propagates.
"""

from __future__ import annotations

import asyncio
import queue
import threading
from collections.abc import Callable, Coroutine
from contextlib import suppress
from typing import Any, Generic, TypeVar

__all__ = ["run_beside"]

T = TypeVar("T")
E = TypeVar("E")

_POLL = 0.05  # seconds without an event after which on_idle is called
_DONE = object()  # put after the coroutine's last event: wakes the calling thread at once


class _Worker(Generic[T]):
    def __init__(self, make: Callable[[], Coroutine[Any, Any, T]], done: Callable[[], None]) -> None:
        self._make = make
        self._done = done
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[T] | None = None
        self._started = threading.Event()
        self.result: T | None = None
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._main, name="slotmagic-fan-out", daemon=True)

    def _main(self) -> None:
        async def main() -> T:
            self._loop = asyncio.get_running_loop()
            self._task = asyncio.current_task()
            self._started.set()
            return await self._make()

        try:
            self.result = asyncio.run(main())
        except BaseException as exc:  # handed to the calling thread
            self.error = exc
        finally:
            self._started.set()
            self._done()

    def cancel(self) -> None:
        self._started.wait()
        loop, task = self._loop, self._task
        if loop is not None and task is not None:
            with suppress(RuntimeError):  # the loop has closed: nothing left to cancel
                loop.call_soon_threadsafe(task.cancel)


def run_beside(
    make: Callable[[Callable[[E], None]], Coroutine[Any, Any, T]],
    on_event: Callable[[E], None],
    on_idle: Callable[[], None] | None = None,
) -> T:
    """Run ``make(emit)`` on a new event loop in a worker thread and return its result; every
    ``emit(event)`` reaches ``on_event`` in this thread, and ``on_idle`` is called whenever no
    event came for a moment (a display can show that it is waiting). An exception here
    (Ctrl-C) cancels the coroutine, waits for it to end, and is raised again."""
    events: queue.SimpleQueue[Any] = queue.SimpleQueue()  # the events, then _DONE
    worker: _Worker[T] = _Worker(lambda: make(events.put), lambda: events.put(_DONE))
    worker.thread.start()
    try:
        while True:
            try:
                event = events.get(timeout=_POLL)
            except queue.Empty:
                if on_idle is not None:
                    on_idle()
                continue
            if event is _DONE:
                break
            on_event(event)
    except BaseException:
        worker.cancel()
        worker.thread.join()
        raise
    worker.thread.join()  # ending now: its result and error are set
    if worker.error is not None:
        raise worker.error
    return worker.result  # type: ignore[return-value]
