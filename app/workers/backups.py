"""The backup worker inside the server: runs queued backup, restore and verification
jobs one at a time on the engine-call threads, off the event loop. On start-up it settles the jobs a
stopped process left running (``core.panel.backups.recover_interrupted``, under the worker
leases of ``core.panel.leases``): backups become
``failed``, restores run again. After a scheduled backup, its policy's retention runs
and, with ``verify``, the backup's verification is queued
(``core.panel.backup_policies.after_backup``). Runs where the deploy worker runs
(``SLIPWAY_DEPLOY_WORKER``)."""
from __future__ import annotations

from app.workers.loop import JobWorker
from core.panel import backup_policies, backups


class BackupWorker(JobWorker):
    name = "backup"

    def __init__(self, store, clock, runtime, calls, archives, lease=None, verify=None):
        self.store, self.clock, self.runtime, self.calls, self.archives = store, clock, runtime, calls, archives
        self.lease = lease  # app.workers.loop.WorkerLease; None: jobs are claimed without an owner
        #: queues the verification of a completed scheduled backup whose policy says ``verify``
        #: (``verify(backup)``); None: no verification is queued
        self.verify = verify
        # the engine's own check of a database dump during a verification, after the checksum
        # and the archive's structure (core.panel.backups.run_verify); None: those only
        self.engine_check = None

    def recover(self) -> list:
        return backups.recover_interrupted(self.store.uow(), self.clock, self.archives)

    def claim(self, owner):
        return backups.claim_next(self.store.uow(), self.clock, owner)

    def work(self, claimed) -> None:
        backup = backups.run(self.store.uow(), self.clock, self.runtime, self.archives, claimed, self.engine_check)
        if claimed[0] == "backup":
            backup_policies.after_backup(self.store.uow(), self.archives, backup, verify=self.verify)
