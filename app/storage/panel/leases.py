"""peewee repository of worker leases (``core.panel.leases``)."""
from __future__ import annotations


class PeeweeLeases:
    def __init__(self, m):
        self.m = m

    def beat(self, worker_id: str, now) -> None:
        L = self.m.WorkerLease
        if not L.update(heartbeat_at=now).where(L.worker_id == worker_id).execute():
            L.insert(worker_id=worker_id, heartbeat_at=now).on_conflict_ignore().execute()

    def drop(self, worker_id: str) -> None:
        self.m.WorkerLease.delete().where(self.m.WorkerLease.worker_id == worker_id).execute()

    def live(self, since):
        """A sub-query of the ids of workers whose heartbeat is at or after ``since``."""
        L = self.m.WorkerLease
        return L.select(L.worker_id).where(L.heartbeat_at >= since)

    def held(self, prefix: str, since) -> set:
        """The ids starting with ``prefix`` whose heartbeat is at or after ``since``."""
        L = self.m.WorkerLease
        rows = L.select(L.worker_id).where(L.worker_id.startswith(prefix), L.heartbeat_at >= since).tuples()
        return {row[0] for row in rows if row[0].startswith(prefix)}  # LIKE folds case: exact here

    def purge(self, before) -> int:
        L = self.m.WorkerLease
        return L.delete().where(L.heartbeat_at < before).execute()
