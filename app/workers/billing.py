"""Background work inside the server: the periodic billing recompute.

It runs once at start-up and then every ``SLIPWAY_BILLING_INTERVAL`` seconds, in a
worker thread. Several Slipway processes may run it: the recompute takes an advisory
lock, so only one of them works at a time and the others skip that round.
"""
from __future__ import annotations

import asyncio
import logging
import time

from app.http.collector import collector_paused
from app.workers.loop import Background
from core.partner import statements

log = logging.getLogger("slipway.jobs")


class BillingRecompute(Background):
    def __init__(self, store, clock, models: dict, interval: float):
        self.store, self.clock, self.models, self.interval = store, clock, models, interval

    def tasks(self) -> dict:
        return {"billing-recompute": self._run}

    async def once(self) -> dict:
        from app.http.observability.prometheus import metrics

        started = time.perf_counter()
        try:
            return await self.store.run(collector_paused()(statements.recompute), self.store.uow(), self.clock, self.models)
        finally:
            metrics().billing_duration.observe(time.perf_counter() - started)

    async def _run(self) -> None:
        while True:
            try:
                done = await self.once()
                log.info("billing recompute %s: %d partner(s)", done["period"], len(done["partners"]))
            except asyncio.CancelledError:
                raise
            except Exception:  # keep the schedule; the next round tries again
                log.exception("billing recompute failed")
            await asyncio.sleep(self.interval)
