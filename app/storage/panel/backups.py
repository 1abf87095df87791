"""peewee repositories of service backups (``core.panel.backups.Backup``; the rows double as
the queue of backup and restore jobs) and of backup policies
(``core.panel.backup_policies.BackupPolicy``)."""
from __future__ import annotations

import json
from dataclasses import asdict

import peewee

from core.panel.backup_policies import BackupPolicy
from core.panel.backups import BUSY, Backup

_CLAIM_LOCK = 0x736C7731  # pg_advisory_xact_lock key of backup-job claims ("slw1")


class PeeweeBackups:
    def __init__(self, m):
        self.m = m

    @staticmethod
    def _entity(row) -> Backup:
        containers = json.loads(row.restore_containers) if row.restore_containers is not None else None
        return Backup(id=row.id, service_id=row.service_id, status=row.status, created_at=row.created_at,
                      updated_at=row.updated_at, progress=row.progress, size_bytes=row.size_bytes, sha256=row.sha256,
                      volumes=tuple(json.loads(row.volumes or "[]")), error=row.error, completed_at=row.completed_at,
                      restore_status=row.restore_status, restore_progress=row.restore_progress,
                      restore_requested_at=row.restore_requested_at,
                      restore_completed_at=row.restore_completed_at, restore_error=row.restore_error,
                      restore_containers=tuple(containers) if containers is not None else None,
                      destination=row.destination, kind=row.kind, verify_status=row.verify_status,
                      verified_at=row.verified_at, verify_error=row.verify_error,
                      scheduled=bool(row.scheduled), restore_service_id=row.restore_service_id)

    @staticmethod
    def _values(backup: Backup) -> dict:
        values = asdict(backup)
        values["service"] = values.pop("service_id")
        values["volumes"] = json.dumps(list(backup.volumes))
        values["restore_containers"] = (json.dumps(list(backup.restore_containers))
                                        if backup.restore_containers is not None else None)
        return values

    def add(self, backup: Backup) -> None:
        self.m.Backup.insert(**self._values(backup)).execute()

    def get(self, backup_id: str) -> Backup | None:
        row = self.m.Backup.get_or_none(self.m.Backup.id == backup_id)
        return self._entity(row) if row else None

    def update(self, backup: Backup) -> None:
        values = self._values(backup)
        values.pop("id")
        self.m.Backup.update(**values).where(self.m.Backup.id == backup.id).execute()

    def delete(self, backup_id: str) -> None:
        self.m.Backup.delete().where(self.m.Backup.id == backup_id).execute()

    def busy_for_service(self, service_id: str) -> Backup | None:
        """A backup of the service that is being made or restored (queued included)."""
        B = self.m.Backup
        row = (B.select().where((B.service == service_id) & (B.status.in_(BUSY) | B.restore_status.in_(BUSY)))
               .order_by(B.created_at, B.id).first())
        return self._entity(row) if row else None

    def page(self, service_id: str, *, page: int, per_page: int, status: str | None = None):
        B = self.m.Backup
        query = B.select().where(B.service == service_id)
        if status:
            query = query.where(B.status == status)
        total = query.count()
        rows = query.order_by(B.created_at.desc(), B.id.desc()).paginate(page, per_page)
        return [self._entity(r) for r in rows], total

    def in_state(self, status: str) -> list[Backup]:
        B = self.m.Backup
        return [self._entity(r) for r in B.select().where(B.status == status).order_by(B.created_at, B.id)]

    def in_restore_state(self, status: str) -> list[Backup]:
        B = self.m.Backup
        return [self._entity(r) for r in B.select().where(B.restore_status == status).order_by(B.created_at, B.id)]

    def orphaned(self, live_owners, *, restore: bool = False, verify: bool = False) -> list[Backup]:
        """Backups (or, with ``restore``, restores; with ``verify``, verifications) running
        for a worker that is not among ``live_owners`` (a sub-query): left by a process that
        stopped."""
        B = self.m.Backup
        state = B.restore_status if restore else B.verify_status if verify else B.status
        query = B.select().where((state == "running") & (B.owner.is_null() | B.owner.not_in(live_owners)))
        return [self._entity(r) for r in query.order_by(B.created_at, B.id)]

    def claim_queued(self, now, owner: str | None = None, per_customer: bool = False):
        """The oldest queued backup, restore or verification, marked running: ``(kind,
        backup)`` or None. With ``per_customer``, the jobs of a customer that has one
        running already (any of the three, in any process) are passed over; claims are then
        serialized (a transaction-scoped advisory lock on PostgreSQL, the write lock on
        SQLite), so that count is exact. On PostgreSQL the row is locked SKIP LOCKED, so
        several processes share the queue."""
        B, S = self.m.Backup, self.m.Service
        db = B._meta.database
        postgres = isinstance(db, peewee.PostgresqlDatabase)
        if postgres and per_customer:
            db.execute_sql("SELECT pg_advisory_xact_lock(%s)", (_CLAIM_LOCK,))
        query = B.select().where((B.status == "pending") | (B.restore_status == "pending")
                                 | (B.verify_status == "pending"))
        if per_customer:
            R, RS = B.alias(), S.alias()
            busy = (RS.select(RS.customer).join(R, on=(R.service == RS.id))
                    .where((R.status == "running") | (R.restore_status == "running")
                           | (R.verify_status == "running")))
            query = query.where(B.service.not_in(S.select(S.id).where(S.customer.in_(busy))))
        query = query.order_by(B.updated_at, B.id).limit(1)
        if postgres:
            query = query.for_update("FOR UPDATE SKIP LOCKED")
        row = query.first()
        if row is None:
            return None
        if row.status == "pending":
            B.update(status="running", updated_at=now, owner=owner).where(B.id == row.id).execute()
            return "backup", self._entity(self.m.Backup.get_by_id(row.id))
        if row.restore_status == "pending":
            B.update(restore_status="running", updated_at=now, owner=owner).where(B.id == row.id).execute()
            return "restore", self._entity(self.m.Backup.get_by_id(row.id))
        B.update(verify_status="running", updated_at=now, owner=owner).where(B.id == row.id).execute()
        return "verify", self._entity(self.m.Backup.get_by_id(row.id))

    def completed_scheduled(self, service_id: str) -> list[Backup]:
        B = self.m.Backup
        query = B.select().where((B.service == service_id) & (B.status == "completed") & (B.scheduled == True))  # noqa: E712
        return [self._entity(r) for r in query.order_by(B.created_at.desc(), B.id.desc())]


class PeeweeBackupPolicies:
    def __init__(self, m):
        self.m = m

    @staticmethod
    def _entity(row) -> BackupPolicy:
        return BackupPolicy(service_id=row.service_id, schedule=row.schedule, destination=row.destination,
                            keep_last=row.keep_last, verify=bool(row.verify), next_run_at=row.next_run_at,
                            created_at=row.created_at, updated_at=row.updated_at, last_run_at=row.last_run_at,
                            last_backup_id=row.last_backup_id)

    def get(self, service_id: str) -> BackupPolicy | None:
        row = self.m.BackupPolicy.get_or_none(self.m.BackupPolicy.service == service_id)
        return self._entity(row) if row else None

    def put(self, policy: BackupPolicy) -> None:
        P = self.m.BackupPolicy
        values = asdict(policy)
        values["service"] = values.pop("service_id")
        update = {getattr(P, name): value for name, value in values.items() if name != "service"}
        P.insert(**values).on_conflict(conflict_target=[P.service], update=update).execute()

    def delete(self, service_id: str) -> bool:
        P = self.m.BackupPolicy
        return P.delete().where(P.service == service_id).execute() > 0

    def due(self, now, limit: int, after: str | None = None) -> list[BackupPolicy]:
        P = self.m.BackupPolicy
        query = P.select().where(P.next_run_at <= now)
        if after is not None:
            query = query.where(P.service > after)
        return [self._entity(r) for r in query.order_by(P.service).limit(limit)]

    def advance(self, service_id: str, due_at, next_run_at, *, ran_at=None, backup_id: str | None = None) -> bool:
        """One guarded UPDATE (``WHERE next_run_at = due_at``): on SQLite write transactions
        are serialised; on PostgreSQL a second claimer's UPDATE waits for the first's row
        lock, then finds ``next_run_at`` changed and matches nothing."""
        P = self.m.BackupPolicy
        values = {P.next_run_at: next_run_at}
        if ran_at is not None:
            values.update({P.last_run_at: ran_at, P.last_backup_id: backup_id})
        return P.update(values).where((P.service == service_id) & (P.next_run_at == due_at)).execute() == 1
