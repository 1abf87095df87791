"""Background work inside the server: deleting idempotency keys past their 24 hours
(``app.http.idempotency``). Requests already treat an expired key as absent, so this
only keeps the table small: it runs at start-up and then every ``INTERVAL_S`` seconds.
Several processes may run it at once; a delete of rows another already deleted is no
harm."""
from __future__ import annotations

import asyncio
import logging

from app.workers.loop import Background

log = logging.getLogger("slipway.jobs")


class IdempotencyCleanup(Background):
    INTERVAL_S = 3600.0

    def __init__(self, store, idempotency):
        self.store, self.idempotency = store, idempotency

    def tasks(self) -> dict:
        return {"idempotency-cleanup": self._run}

    async def once(self) -> int:
        """Delete the expired keys now; how many went."""
        return await self.store.run(self.idempotency.purge)

    async def _run(self) -> None:
        while True:
            try:
                gone = await self.once()
                if gone:
                    log.info("deleted %d expired idempotency key(s)", gone)
            except asyncio.CancelledError:
                raise
            except Exception:  # the next round tries again
                log.exception("idempotency key clean-up failed")
            await asyncio.sleep(self.INTERVAL_S)
