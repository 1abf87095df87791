"""Backup policies: a service's backups on a schedule, and how many of them are kept.

A policy is ``{schedule, destination, keep_last, verify}``: ``schedule`` a five-field
cron expression read in UTC (minute, hour, day of month, month, day of week; parsed by
``cronsim``), ``destination`` one of the operator's backup destinations, ``keep_last``
1-365, ``verify`` whether each scheduled backup is verified once made. One policy per
service; its row holds ``next_run_at``, the next time it is due.

Decisions:

- A run is claimed once across every process sharing the database: the transaction that
  queues the scheduled backup also moves the policy's ``next_run_at`` on, guarded by its
  old value (``BackupPolicyRepository.advance``), so of two schedulers that saw the same
  due run one queues the backup and the other's guarded update matches no row and rolls
  its transaction back.
- The next run is the schedule's first time after *now* (not after the run that was
  due), so runs missed while no process ran (or while the service was busy) make one
  backup, not one per missed time.
- A due run whose service is busy (deploying, or a backup or restore of it queued or
  running: ``core.panel.backups.Busy``) is not dropped: the policy stays due and the next
  tick tries again. A run the backup rules refuse for good (a service without volumes) is
  skipped: ``next_run_at`` moves on and a ``backup`` ``failed`` timeline event says why.
- Retention: after each scheduled backup that completes, the service's completed
  scheduled backups beyond ``keep_last`` (the newest kept) are deleted, rows and archives,
  through the same path as ``DELETE .../backups/{id}``. Backups asked for by hand are never
  deleted by a policy.
- A policy with ``verify`` queues a verification of each scheduled backup that completes
  (``verify(backup)``, the collaborator the worker is given).

Time comes from the Clock port; ``Destinations`` (built by the composition) holds the
names of the destinations the operator configured and the default one.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from core.errors import Conflict, Invalid, NotFound
from core.panel import backups
from core.panel.schedules import next_run, schedule_problem
from core.panel.services import record, visible

__all__ = ["next_run", "schedule_problem"]  # (the schedule's rules: core.panel.schedules)

KEEP_MIN, KEEP_MAX = 1, 365
DUE_BATCH = 50  # due policies read at a time (a tick reads every page)


@dataclass(frozen=True)
class BackupPolicy:
    service_id: str
    schedule: str
    destination: str
    keep_last: int
    verify: bool
    next_run_at: datetime
    created_at: datetime
    updated_at: datetime
    last_run_at: datetime | None = None  # when a run last queued a backup
    last_backup_id: str | None = None  # the backup it queued


@dataclass(frozen=True)
class Destinations:
    """The backup destinations a policy may name, and the one it gets when it names none."""
    names: frozenset
    default: str = "local"


# --- requests -------------------------------------------------------------------------------


def _policy_problems(body: dict, destinations: Destinations) -> dict:
    problems = {}
    problem = schedule_problem(body.get("schedule"))
    if problem:
        problems["schedule"] = problem
    destination = body.get("destination", destinations.default)
    if destination not in destinations.names:
        problems["destination"] = ("unknown destination; one of: " + ", ".join(sorted(destinations.names)))
    keep = body.get("keep_last")
    if isinstance(keep, bool) or not isinstance(keep, int) or not KEEP_MIN <= keep <= KEEP_MAX:
        problems["keep_last"] = f"an integer from {KEEP_MIN} to {KEEP_MAX}"
    if not isinstance(body.get("verify", False), bool):
        problems["verify"] = "true or false"
    return problems


def put_policy(uow, clock, principal, service_id: str, body: dict, destinations: Destinations) -> BackupPolicy:
    """Create or replace the service's policy; its next run is the schedule's first time
    from now. 422 on the field that is wrong (``schedule``, ``destination``, ...)."""
    principal.require("backups:write")
    with uow:
        service = visible(principal, uow.services.get(service_id), service_id)
        problems = _policy_problems(body, destinations)
        if problems:
            raise Invalid("invalid backup policy", fields=problems)
        now = clock.now()
        old = uow.backup_policies.get(service.id)
        policy = BackupPolicy(service_id=service.id, schedule=" ".join(body["schedule"].split()),
                              destination=body.get("destination", destinations.default),
                              keep_last=body["keep_last"], verify=body.get("verify", False),
                              next_run_at=next_run(body["schedule"], now),
                              created_at=old.created_at if old else now, updated_at=now,
                              last_run_at=old.last_run_at if old else None,
                              last_backup_id=old.last_backup_id if old else None)
        uow.backup_policies.put(policy)
        uow.commit()
    return policy


def find_policy(uow, principal, service_id: str) -> BackupPolicy | None:
    """The service's policy, or None when it has none (the service itself must be visible)."""
    principal.require("backups:read")
    with uow:
        service = visible(principal, uow.services.get(service_id), service_id)
        return uow.backup_policies.get(service.id)


def get_policy(uow, principal, service_id: str) -> BackupPolicy:
    policy = find_policy(uow, principal, service_id)
    if policy is None:
        raise NotFound(f"service {service_id} has no backup policy")
    return policy


def delete_policy(uow, principal, service_id: str) -> None:
    """Remove the policy (the backups it made stay); 404 when there is none."""
    principal.require("backups:write")
    with uow:
        service = visible(principal, uow.services.get(service_id), service_id)
        if not uow.backup_policies.delete(service.id):
            raise NotFound(f"service {service_id} has no backup policy")
        uow.commit()


# --- the scheduler --------------------------------------------------------------------------


def due_policies(uow, clock, limit: int = DUE_BATCH, after: str | None = None) -> list[BackupPolicy]:
    """A page of the policies due now, by service id (``after``: the last one of the page
    before). A tick reads every page, so policies kept due by a busy service never hold
    the others up."""
    with uow.reading():
        return uow.backup_policies.due(clock.now(), limit, after)


def run_policy(uow, clock, policy: BackupPolicy, parse) -> backups.Backup | None:
    """Queue the scheduled backup of one due run (``policy`` as ``due_policies`` read it),
    claiming the run in the same transaction (see the module's decisions). None when
    another process claimed it, the policy changed or went, the service is busy (tried
    again at the next tick), or the run was skipped."""
    now = clock.now()
    following = next_run(policy.schedule, now)
    with uow:
        service = uow.services.get(policy.service_id, for_update=True)
        if service is None:
            return None  # deleted meanwhile: its policy went with it
        try:
            backup = backups.queue_backup(uow, clock, service, parse, destination=policy.destination, scheduled=True)
        except backups.Busy:
            return None  # nothing written: still due
        except Conflict as exc:  # refused for good: the run is claimed without a backup
            backup = None
            record(uow, clock, service.id, "backup", "failed", f"scheduled backup skipped: {exc.message}")
        ran = {"ran_at": now, "backup_id": backup.id} if backup is not None else {}
        if not uow.backup_policies.advance(policy.service_id, policy.next_run_at, following, **ran):
            return None  # another process claimed this run first: what was written here rolls back
        uow.commit()
    return backup


def after_backup(uow, archives, backup: backups.Backup, verify=None) -> list[str]:
    """Once a scheduled backup ended: when it completed, its service's completed scheduled
    backups beyond the policy's ``keep_last`` are deleted (rows in one transaction, then
    their archives), and with the policy's ``verify`` the backup's verification is queued
    (``verify(backup)``). Answers the ids deleted."""
    if not backup.scheduled or backup.status != "completed":
        return []
    with uow:
        policy = uow.backup_policies.get(backup.service_id)
        service = uow.services.get(backup.service_id)
        if policy is None or service is None:
            return []
        kept = uow.backups.completed_scheduled(backup.service_id)  # newest first
        gone = []
        for old in kept[policy.keep_last:]:
            try:
                gone.append(backups.forget_backup(uow, old))
            except Conflict:  # being restored: it stays until the next run
                continue
        uow.commit()
    for old in gone:
        backups.remove_archive(archives, service.customer_id, old)
    if policy.verify and verify is not None:
        verify(backup)
    return [b.id for b in gone]
