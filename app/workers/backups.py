"""The backup worker inside the server: runs queued backup, restore and verification
jobs off the event loop, up to ``concurrency`` at once (``SLIPWAY_BACKUP_WORKERS``) on
threads of their own (``calls``: not the deploys' nor the other engine work's), at most
one per customer at a time (counted over every process sharing the database), so one
customer's stuck job never holds up another's.

Each job runs within a ``core.panel.budgets.Budget``: ``timeout`` seconds
(``SLIPWAY_BACKUP_TIMEOUT``; a timer spends it) and ``max_mb`` megabytes read
(``SLIPWAY_BACKUP_MAX_MB``); past either the engine's stream is closed and the job ends
``failed`` with the reason. A delete of the service (``cancel_services``, called before
the delete touches the engine; and, for other processes' deletes, every
``CANCEL_POLL_S`` seconds a query of which running jobs' services are gone) spends the
budget with ``service deleted``, so the job ends at once and frees its slot.

On start-up it settles the jobs a stopped process left running
(``core.panel.backups.recover_interrupted``, under the worker leases of
``core.panel.leases``): backups become ``failed``, restores run again (not those into a
service deleted meanwhile). After a scheduled backup, its policy's retention runs and,
with ``verify``, the backup's verification is queued
(``core.panel.backup_policies.after_backup``). Runs where the deploy worker runs
(``SLIPWAY_DEPLOY_WORKER``)."""
from __future__ import annotations

import asyncio
import logging
import threading

from app.workers.loop import JobWorker
from core.panel import backup_policies, backups
from core.panel.budgets import DELETED, MB, Budget

log = logging.getLogger("slipway.backup")


class BackupWorker(JobWorker):
    name = "backup"
    CANCEL_POLL_S = 2.0

    def __init__(self, store, clock, runtime, calls, archives, lease=None, verify=None, *, engine_check=None,
                 concurrency: int = 2, timeout: float = 3600.0, max_mb: float = 102400.0):
        self.store, self.clock, self.runtime, self.calls, self.archives = store, clock, runtime, calls, archives
        self.lease = lease  # app.workers.loop.WorkerLease; None: jobs are claimed without an owner
        #: queues the verification of a completed scheduled backup whose policy says ``verify``
        #: (``verify(backup)``); None: no verification is queued
        self.verify = verify
        # the engine's own check of a database dump during a verification, after the checksum
        # and the archive's structure (core.panel.backups.run_verify); None: those only
        self.engine_check = engine_check
        self.concurrency, self.timeout, self.max_bytes = concurrency, float(timeout), int(max_mb * MB)
        self._active: dict = {}  # backup id -> (service ids the job touches, its Budget): jobs running here
        self._active_lock = threading.Lock()

    def tasks(self) -> dict:
        return {**super().tasks(), "backup-cancels": self._cancels}

    def recover(self) -> list:
        return backups.recover_interrupted(self.store.uow(), self.clock, self.archives)

    def claim(self, owner):
        return backups.claim_next(self.store.uow(), self.clock, owner, per_customer=True)

    def budget(self) -> Budget:
        """A fresh budget of one job (its timer is started by ``work``)."""
        return Budget(seconds=self.timeout, max_bytes=self.max_bytes)

    def work(self, claimed) -> None:
        kind, backup = claimed
        budget = self.budget()
        timer = threading.Timer(self.timeout, budget.expire)
        timer.daemon = True
        touched = {backup.service_id, *([backup.restore_service_id] if kind == "restore" and
                                        backup.restore_service_id else [])}
        with self._active_lock:
            self._active[backup.id] = (touched, budget)
        timer.start()
        try:
            done = backups.run(self.store.uow(), self.clock, self.runtime, self.archives, claimed, self.engine_check,
                               budget)
        finally:
            timer.cancel()
            with self._active_lock:
                self._active.pop(backup.id, None)
        if kind == "backup":
            backup_policies.after_backup(self.store.uow(), self.archives, done, verify=self.verify)

    def running_jobs(self) -> dict:
        """``{backup id: service ids}`` of the jobs running in this process now."""
        with self._active_lock:
            return {backup_id: set(touched) for backup_id, (touched, _) in self._active.items()}

    def cancel_services(self, service_ids, reason: str = DELETED) -> list:
        """Spend, with ``reason``, the budget of every job running here that touches one
        of ``service_ids`` (a restore into a new service touches both); returns the
        backups' ids. A service's delete calls it before it touches the engine."""
        wanted = set(service_ids)
        with self._active_lock:
            active = [(backup_id, budget) for backup_id, (touched, budget) in self._active.items() if touched & wanted]
        for _, budget in active:
            budget.cancel(reason)
        return [backup_id for backup_id, _ in active]

    def cancel_deleted(self) -> list:
        """Spend the budget of every running job one of whose services is gone (deleted by
        another process); returns the backups' ids. Blocking (database)."""
        with self._active_lock:
            active = {backup_id: (set(touched), budget) for backup_id, (touched, budget) in self._active.items()}
        if not active:
            return []
        with self.store.uow(write=False).reading() as uow:
            alive = uow.services.existing(set().union(*(touched for touched, _ in active.values())))
        gone = [backup_id for backup_id, (touched, budget) in active.items()
                if not touched <= alive and not budget.is_set()]
        for backup_id in gone:
            active[backup_id][1].cancel(DELETED)
        return gone

    async def _cancels(self) -> None:
        while True:
            await asyncio.sleep(self.CANCEL_POLL_S)
            try:
                cancelled = await self.store.run(self.cancel_deleted)
                if cancelled:
                    log.info("cancelling backup job(s) of deleted services: %s", ", ".join(cancelled))
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("could not look for deleted services of running backup jobs")
