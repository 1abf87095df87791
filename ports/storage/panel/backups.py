"""The panel API's repositories of backups and backup policies in the storage port
(``ports.storage``); the conventions they keep are in the package's docstring."""
from __future__ import annotations

from abc import abstractmethod
from typing import Protocol

from core.panel.backup_policies import BackupPolicy
from core.panel.backups import Backup


class BackupRepository(Protocol):
    @abstractmethod
    def add(self, backup: Backup) -> None:
        """Insert a backup (a queued job while ``pending``)."""

    @abstractmethod
    def get(self, backup_id: str) -> Backup | None:
        """The backup, or None."""

    @abstractmethod
    def update(self, backup: Backup) -> None:
        """Store every field but the id."""

    @abstractmethod
    def delete(self, backup_id: str) -> None:
        """Remove the backup's row."""

    @abstractmethod
    def busy_for_service(self, service_id: str) -> Backup | None:
        """A backup of the service being made or restored (queued included), oldest first."""

    @abstractmethod
    def page(self, service_id: str, *, page: int, per_page: int, status: str | None = None):
        """``(backups, total)`` of the service, optionally of one status, newest first."""

    @abstractmethod
    def in_state(self, status: str) -> list[Backup]:
        """Backups of one status, oldest first."""

    @abstractmethod
    def in_restore_state(self, status: str) -> list[Backup]:
        """Backups of one restore status, oldest first."""

    @abstractmethod
    def orphaned(self, live_owners, *, restore: bool = False, verify: bool = False) -> list[Backup]:
        """Backups (or, with ``restore``, restores; with ``verify``, verifications) running
        for a worker not among ``live_owners``, oldest first."""

    @abstractmethod
    def claim_queued(self, now, owner: str | None = None, per_customer: bool = False):
        """The oldest queued backup, restore or verification (``updated_at``, then id), marked running
        for ``owner``: ``(kind, backup)`` with kind ``backup``, ``restore`` or ``verify``, or None.
        With ``per_customer``, the jobs of a customer with one of the three running (in any
        process) are passed over."""

    @abstractmethod
    def completed_scheduled(self, service_id: str) -> list[Backup]:
        """The service's ``completed`` backups a policy made (``scheduled``), newest first
        (``created_at``, then id)."""


class BackupPolicyRepository(Protocol):
    @abstractmethod
    def get(self, service_id: str) -> BackupPolicy | None:
        """The service's policy, or None."""

    @abstractmethod
    def put(self, policy: BackupPolicy) -> None:
        """Insert the service's policy, or replace every field of the one it has."""

    @abstractmethod
    def delete(self, service_id: str) -> bool:
        """Remove the service's policy; False when it had none."""

    @abstractmethod
    def due(self, now, limit: int, after: str | None = None) -> list[BackupPolicy]:
        """At most ``limit`` policies whose ``next_run_at`` is ``now`` or earlier, by
        service id; with ``after``, those whose service id comes after it (the next page)."""

    @abstractmethod
    def advance(self, service_id: str, due_at, next_run_at, *, ran_at=None, backup_id: str | None = None) -> bool:
        """Claim the run due at ``due_at``: set ``next_run_at`` (and, with ``ran_at``,
        ``last_run_at`` and ``last_backup_id``) only if the policy's ``next_run_at`` is
        still ``due_at``. True when this call changed the row; False when another
        transaction claimed the run first or the policy changed or went. On PostgreSQL a
        concurrent claimer waits for this transaction and then matches no row."""
