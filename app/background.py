"""Background work inside the server: tasks on its event loop, started by the ASGI
lifespan and cancelled at shutdown (the deploy and backup workers, the billing
recompute, the route file).

A subclass names its tasks in ``tasks()``. Queue workers wait with ``idle(seconds)``,
which returns early when ``wake()`` is called (from any thread) because a job was queued.
"""
from __future__ import annotations

import asyncio


class Background:
    _tasks: list = []
    _wake: asyncio.Event | None = None
    _loop = None

    def tasks(self) -> dict:
        """``{task name: coroutine function}`` to run while the server runs."""
        raise NotImplementedError

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._wake = asyncio.Event()
        self._tasks = [self._loop.create_task(run(), name=name) for name, run in self.tasks().items()]

    async def stop(self) -> None:
        tasks, self._tasks = self._tasks, []
        for task in tasks:
            task.cancel()
        for task in tasks:
            try:
                await task
            except asyncio.CancelledError:
                pass

    def wake(self) -> None:
        """Work was queued: the waiting worker looks now rather than at its next poll."""
        if self._wake is not None and self._loop is not None:
            self._loop.call_soon_threadsafe(self._wake.set)

    async def idle(self, seconds: float) -> None:
        """Wait ``seconds``, or less if ``wake()`` is called meanwhile."""
        self._wake.clear()
        try:
            await asyncio.wait_for(self._wake.wait(), timeout=seconds)
        except asyncio.TimeoutError:
            pass
