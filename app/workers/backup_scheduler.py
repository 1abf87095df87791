"""The backup scheduler inside the server: at start-up and then every ``TICK_S`` seconds
it queues the scheduled backup of each due backup policy
(``core.panel.backup_policies.run_policy``) and wakes the backup worker, which makes it.
Every process running the workers (``SLIPWAY_DEPLOY_WORKER``) runs a scheduler; each due
run is claimed in the transaction that queues its backup, so it makes one backup whatever
the number of processes. A run that came due while no process ran is due at start-up
and runs once."""
from __future__ import annotations

import asyncio
import logging

from app.workers.loop import Background
from core.panel import backup_policies

log = logging.getLogger("slipway.backups")


class BackupScheduler(Background):
    TICK_S = 10.0  # how often due policies are looked for (a policy's run starts at most this late)

    def __init__(self, store, clock, parse, queued=lambda: None, page: int = backup_policies.DUE_BATCH):
        """``parse(compose, variables)`` names a service's volumes; ``queued()`` is called
        after a tick queued backups (the backup worker's ``wake``); ``page``: due policies
        read at a time."""
        self.store, self.clock, self.parse, self.queued, self.page = store, clock, parse, queued, page

    def tasks(self) -> dict:
        return {"backup-scheduler": self._run}

    def tick(self) -> list:
        """Queue the backups of the policies due now (blocking: database work); answers them."""
        made, after = [], None
        while page := backup_policies.due_policies(self.store.uow(), self.clock, self.page, after):
            for policy in page:
                try:
                    backup = backup_policies.run_policy(self.store.uow(), self.clock, policy, self.parse)
                except Exception:  # one policy's trouble does not hold the others up; it is due again
                    log.exception("scheduled backup of service %s could not be queued", policy.service_id)
                    continue
                if backup is not None:
                    made.append(backup)
            after = page[-1].service_id
        return made

    async def _run(self) -> None:
        while True:
            try:
                made = await self.store.run(self.tick)
                if made:
                    log.info("queued %d scheduled backup(s): %s", len(made), ", ".join(b.id for b in made))
                    self.queued()
            except asyncio.CancelledError:
                raise
            except Exception:  # the next tick tries again
                log.exception("backup scheduler tick failed")
            await self.idle(self.TICK_S)
