"""The backup worker inside the server: runs queued backup and restore jobs one at a
time on the engine-call threads, off the event loop. On start-up it settles the jobs a
stopped process left running (``core.backups.recover_interrupted``): backups become
``failed``, restores run again. Runs where the deploy worker runs
(``SLIPWAY_DEPLOY_WORKER``)."""
from __future__ import annotations

import asyncio
import contextlib
import logging

from app.background import Background
from core import backups

log = logging.getLogger("slipway.backups")

POLL_S = 1.0


class BackupWorker(Background):
    def __init__(self, store, clock, runtime, engine, archives, lease=None):
        self.store, self.clock, self.runtime, self.engine, self.archives = store, clock, runtime, engine, archives
        self.lease = lease  # app.background.WorkerLease; None: jobs are claimed without an owner

    def tasks(self) -> dict:
        return {"backup-jobs": self._jobs}

    def _run(self, claimed) -> None:
        with self.lease.working() if self.lease is not None else contextlib.nullcontext():
            backups.run(self.store.uow(), self.clock, self.runtime, self.archives, claimed)

    async def _recover(self) -> None:
        try:
            touched = await self.store.run(backups.recover_interrupted, self.store.uow(), self.clock, self.archives)
            if touched:
                log.warning("settled %d backup job(s) interrupted by a restart: %s", len(touched), ", ".join(touched))
        except Exception:
            log.exception("could not settle interrupted backup jobs")

    async def _jobs(self) -> None:
        owner = await self.lease.hold() if self.lease is not None else None
        await self._recover()
        recovered_at = asyncio.get_running_loop().time()
        while True:
            try:
                if self.lease is not None and asyncio.get_running_loop().time() - recovered_at > self.lease.RECOVER_S:
                    recovered_at = asyncio.get_running_loop().time()
                    await self._recover()  # jobs of another process that stopped meanwhile
                claimed = await self.store.run(backups.claim_next, self.store.uow(), self.clock, owner)
                if claimed is None:
                    await self.idle(POLL_S)
                    continue
                await self.engine.run(self._run, claimed)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("backup worker round failed")
                await asyncio.sleep(POLL_S)
