"""Background work inside the server: bounding each service's history
(``core.panel.history``): its timeline events past the newest ``SLIPWAY_EVENTS_KEEP``
and its deploy jobs past the newest 200 are deleted at start-up and then every
``INTERVAL_S`` seconds, as the Clock port counts them. Several processes may run it at
once: a delete of rows another already deleted is no harm."""
from __future__ import annotations

import asyncio
import logging

from app.workers.loop import Background
from core.panel import history

log = logging.getLogger("slipway.jobs")


class HistoryCleanup(Background):
    INTERVAL_S = 3600.0
    TICK_S = 60.0  # how often the clock is looked at between rounds

    def __init__(self, store, clock, events_keep: int, jobs_keep: int = history.JOBS_KEEP):
        self.store, self.clock = store, clock
        self.events_keep, self.jobs_keep = events_keep, jobs_keep

    def tasks(self) -> dict:
        return {"history-cleanup": self._run}

    async def once(self) -> tuple[int, int]:
        """Prune now; answers (events, jobs) deleted."""
        return await self.store.run(history.prune, self.store.uow(), events_keep=self.events_keep,
                                    jobs_keep=self.jobs_keep)

    async def _run(self) -> None:
        while True:
            try:
                events, jobs = await self.once()
                if events or jobs:
                    log.info("history clean-up deleted %d timeline event(s) and %d deploy job(s)", events, jobs)
            except asyncio.CancelledError:
                raise
            except Exception:  # the next round tries again
                log.exception("history clean-up failed")
            due = self.clock.monotonic() + self.INTERVAL_S
            while (left := due - self.clock.monotonic()) > 0:
                await asyncio.sleep(min(left, self.TICK_S))
