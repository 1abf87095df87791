"""Service backups: an archive of a service's volumes and of its database components'
dumps (``core.panel.dumps``), made and restored by background jobs through the runtime
port (``export_volume`` / ``import_volume``; ``exec_output`` / ``exec_input`` for dumps),
stored at a backup destination the operator configured (``local`` unless the request or
the default names another).

The backup row is the job: ``pending`` (queued) → ``running`` → ``completed`` or
``failed``. A restore is a job on the same row (``restore_status``), and so is a
verification (``verify_status``: the archive read back from its destination, its
checksum and structure checked; a backup that does not verify becomes ``failed``). One
backup or restore runs per service at a time; none starts while the service is
``deploying``.

Decisions:

- A backup reads the volumes while the service runs (no downtime); a restore stops the
  service's running containers, replaces each volume's content, and starts again those
  that were running.
- On start-up, a backup left ``running`` by a stopped process is ``failed`` (its partial
  archive removed); a restore left ``running`` is queued again and runs from the start
  (it is idempotent: the volumes are emptied and filled again, then the containers that
  ran before the first attempt are started).

Where archives live is the ``archives`` collaborator's business (``app.storage.backup_archives``),
by destination name and object key (``archive_key``):
``default`` (the default destination's name), ``has(name)``,
``write(destination, key, manifest, parts, on_part) -> (size, sha256)`` (``parts``: an
iterable of ``(name, kind, chunks)``), ``verify(destination, key, sha256) -> manifest``
(every part's entry under ``parts``: ``name``, ``kind``, ``member``, ``size_bytes``,
``sha256``), ``part_chunks(destination, key, entry)``, ``remove(destination, key)``,
``remove_service(prefix)``.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime

from core.panel import dumps, leases
from core.panel.budgets import DELETED, Budget, Budgeted
from core.panel.compose.loader import load_compose
from core.panel.containers import COMPONENT_LABEL
from core.panel.deploys import resource_names
from core.errors import Conflict, Invalid, NotFound
from core.panel.events import Event
from core.panel.services import new_id, record, visible

BUSY = ("pending", "running")
# Every job runs within a ``core.panel.budgets.Budget`` when the worker gives one
# (``SLIPWAY_BACKUP_TIMEOUT``, ``SLIPWAY_BACKUP_MAX_MB``): the engine's streams are
# counted and closed through it, and a job that spends it (or whose service is deleted
# meanwhile: ``DELETED``) ends ``failed`` with its reason.
# Backups and restores are on the service's timeline too (event types ``backup`` and
# ``restore``): ``started`` when asked for, then ``success`` or ``failed`` with the reason.
INTERRUPTED = "interrupted by a restart of Slipway"


def service_prefix(customer_id: str, service_id: str) -> str:
    """Where a service's backup objects are, below a destination's own prefix."""
    return f"{customer_id}/{service_id}/"


def archive_key(customer_id: str, service_id: str, backup_id: str) -> str:
    """The object of one backup: ``<customer id>/<service id>/<backup id>.tar``."""
    return f"{service_prefix(customer_id, service_id)}{backup_id}.tar"


@dataclass(frozen=True)
class Backup:
    id: str
    service_id: str
    status: str
    created_at: datetime
    updated_at: datetime
    progress: int = 0
    size_bytes: int = 0
    sha256: str | None = None
    volumes: tuple = ()
    error: str | None = None
    completed_at: datetime | None = None
    restore_status: str | None = None  # None: never restored
    restore_progress: int = 0
    restore_requested_at: datetime | None = None
    restore_completed_at: datetime | None = None
    restore_error: str | None = None
    restore_containers: tuple | None = None  # recorded once per restore, before it stops anything
    scheduled: bool = False  # made by the service's backup policy (core.panel.backup_policies), not asked for
    restore_service_id: str | None = None  # the restore's target when not this service (a new service)
    destination: str = "local"  # the backup destination its archive is stored at
    kind: str = "volumes"  # volumes, postgres, mysql, redis
    verify_status: str | None = None  # None: never verified; pending, running, completed, failed
    verified_at: datetime | None = None  # when it last verified
    verify_error: str | None = None  # why it did not


#: the steps a restore reports (``backup.progress`` ``step`` and its timeline), in order:
#: the archive read from its destination, its checksums checked, one ``loaded`` per
#: volume or dump put back (``part`` names it), then ``completed``
RESTORE_STEPS = ("fetched", "verified", "loaded", "completed")


def progress_event(service, backup: Backup, operation: str = "backup", step: str | None = None,
                   part: str | None = None) -> Event:
    """``backup.progress`` ``{service_id, backup_id, progress, status, operation, step,
    part}``: for a restore (``operation`` ``restore``) progress and status are the
    restore's, and ``step`` the step it just ended (:data:`RESTORE_STEPS`; ``part`` the
    volume or dump a ``loaded`` step loaded), null between steps; for a verification
    (``verify``) the status is the verification's (progress 0, then 100)."""
    if operation == "restore":
        progress, status = backup.restore_progress, backup.restore_status
    elif operation == "verify":
        status = backup.verify_status
        progress = 100 if status in ("completed", "failed") else 0
    else:
        progress, status = backup.progress, backup.status
    return Event("backup.progress", {"service_id": backup.service_id, "backup_id": backup.id, "progress": progress,
                                     "status": status, "operation": operation, "step": step, "part": part},
                 backup.service_id, getattr(service, "customer_id", None))


class Busy(Conflict):
    """The service is deploying, or a backup or restore of it is queued or running: the
    same request may succeed later (a due scheduled backup waits for it)."""


def _service_idle(uow, service) -> None:
    if service.status == "deploying":
        raise Busy("the service is deploying")
    running = uow.backups.busy_for_service(service.id)
    if running is not None:
        raise Busy(f"backup {running.id} of this service is still being made or restored")


# --- requests ----------------------------------------------------------------------------


def create_backup(uow, clock, principal, service_id: str, parse, *, archives=None,
                  destination: str | None = None) -> Backup:
    """Queue a backup of the service's volumes (``parse(compose, variables)`` gives the
    plan that names them) to ``destination`` (a name ``archives`` has; its default when
    None)."""
    principal.require("backups:write")
    with uow:
        service = visible(principal, uow.services.get(service_id, for_update=True), service_id)
        if destination is None:
            destination = archives.default if archives is not None else "local"
        elif archives is not None and not archives.has(destination):
            raise Invalid("invalid backup", fields={"destination": f"no backup destination {destination!r} "
                                                                   "is configured"})
        backup = queue_backup(uow, clock, service, parse, destination=destination)
        uow.commit()
    return backup


def queue_backup(uow, clock, service, parse, *, destination: str = "local", scheduled: bool = False) -> Backup:
    """Inside the caller's transaction (``service`` read ``for_update``): the rules every
    backup keeps, asked for or scheduled: ``Busy`` while the service deploys or another
    backup or restore of it is queued or running, ``Conflict`` with nothing to back up
    (no volumes, no database component); then the ``pending`` backup to ``destination``
    (its ``kind`` the first database component's, else ``volumes``), its progress event
    and its ``started`` timeline event."""
    _service_idle(uow, service)
    try:
        volumes = tuple(parse(service.compose, service.variables or {}).volumes)
    except Exception:  # noqa: BLE001 - no compose yet (a git or ai service before its first deploy)
        volumes = ()
    engines = _engines(service)
    volumes = dumps.archived_volumes(_document(service), volumes)
    if not volumes and not engines:
        raise Conflict("the service has no volumes to back up")
    now = clock.now()
    backup = Backup(id=new_id("bkp"), service_id=service.id, status="pending", created_at=now, updated_at=now,
                    volumes=volumes, scheduled=scheduled, destination=destination, kind=dumps.backup_kind(engines))
    uow.backups.add(backup)
    uow.emit(progress_event(service, backup))
    what = "scheduled" if scheduled else "asked for"
    record(uow, clock, service.id, "backup", "started",
           f"backup {backup.id} of {', '.join((*volumes, *engines))} to {destination} {what}")
    return backup


TARGETS = ("service", "new")


def restore_backup(uow, clock, principal, service_id: str, backup_id: str, body=None, create_service=None) -> Backup:
    """Queue a restore of a ``completed`` backup: into the service (``body`` None or
    ``{"target": "service"}``), or into a new service of the same customer
    (``{"target": "new", "name": ...}``; ``create_service(uow, principal, request, also)``
    is ``core.panel.services.create_service`` with its other collaborators bound, and
    deploys a ``request`` that names no ``deploy_method`` with the loaded method that runs
    a compose definition as given, ``core.panel.capabilities.runs_compose``)."""
    principal.require("backups:write")
    body = body if body is not None else {}
    if not isinstance(body, dict) or body.get("target", "service") not in TARGETS:
        raise Invalid("invalid restore", fields={"target": "one of " + ", ".join(TARGETS)})
    if body.get("target", "service") == "new":
        return _restore_into_new(uow, clock, principal, service_id, backup_id, body, create_service)
    with uow:
        service = visible(principal, uow.services.get(service_id, for_update=True), service_id)
        backup = _backup_of(uow, service, backup_id)
        _restorable(backup)
        _service_idle(uow, service)
        now = clock.now()
        backup = replace(backup, restore_status="pending", restore_progress=0, restore_requested_at=now,
                         restore_completed_at=None, restore_error=None, restore_containers=None,
                         restore_service_id=None, updated_at=now)
        uow.backups.update(backup)
        uow.emit(progress_event(service, backup, "restore"))
        record(uow, clock, service.id, "restore", "started", f"restore from backup {backup.id} asked for")
        uow.commit()
    return backup


def _restore_into_new(uow, clock, principal, service_id: str, backup_id: str, body: dict, create_service) -> Backup:
    """A new service of the source's customer with its compose and variables, created (and
    its deploy queued) in the transaction that queues the restore into it; the restore job
    waits until that deploy has ended (``run_restore``). The name is checked as service
    creation checks it (422), a taken one is 409; the new service counts against the
    customer's limits as any other."""
    name = body.get("name")
    if not isinstance(name, str) or not name:
        raise Invalid("invalid restore", fields={"name": "the new service's name is required with target new"})
    with uow:
        source = visible(principal, uow.services.get(service_id), service_id)
        backup = _backup_of(uow, source, backup_id)
        _restorable(backup)
    queued = {}

    def queue(uow, service) -> None:
        if source.secrets:  # the source's secret variables stay secret (masked, stored encrypted) in the copy
            uow.services.update(replace(service, secrets=tuple(source.secrets)))
        current = uow.backups.get(backup.id)
        if current is None or current.service_id != source.id:
            raise NotFound(f"backup {backup_id} not found")
        _restorable(current)
        if current.restore_status in BUSY:
            raise Conflict(f"backup {current.id} is being restored")
        now = clock.now()
        queued["backup"] = replace(current, restore_status="pending", restore_progress=0, restore_requested_at=now,
                                   restore_completed_at=None, restore_error=None, restore_containers=None,
                                   restore_service_id=service.id, updated_at=now)
        uow.backups.update(queued["backup"])
        uow.emit(progress_event(source, queued["backup"], "restore"))
        message = f"restore from backup {current.id} of service {source.id} asked for"
        record(uow, clock, service.id, "restore", "started", message)
        record(uow, clock, source.id, "restore", "started",
               f"restore from backup {current.id} into the new service {service.id} asked for")

    # no deploy method named: ``create_service`` deploys it with the one that runs a compose
    # definition as given (core.panel.capabilities.runs_compose)
    request = {"name": name, "customer_id": source.customer_id, "compose": source.compose,
               "variables": dict(source.variables or {})}
    if create_service is None:
        raise Invalid("invalid restore", fields={"target": "restoring into a new service is not available here"})
    create_service(uow, principal, request, queue)
    return queued["backup"]


def _restorable(backup: Backup) -> None:
    """409 unless the backup is ``completed`` and not being verified (one job at a time on
    a row: each writes the whole row), for a restore into the service or a new one."""
    if backup.status != "completed":
        raise Conflict(f"backup {backup.id} is {backup.status}: only a completed backup can be restored")
    if backup.verify_status in BUSY:
        raise Conflict(f"backup {backup.id} is being verified")


def verify_backup(uow, clock, principal, service_id: str, backup_id: str) -> Backup:
    """Queue a verification of a ``completed`` backup (``run_verify``)."""
    principal.require("backups:write")
    with uow:
        service = visible(principal, uow.services.get(service_id, for_update=True), service_id)
        backup = _backup_of(uow, service, backup_id)
        if backup.status != "completed":
            raise Conflict(f"backup {backup.id} is {backup.status}: only a completed backup can be verified")
        if backup.verify_status in BUSY:
            raise Conflict(f"backup {backup.id} is being verified")
        if backup.restore_status in BUSY:  # one job at a time on a row: each writes the whole row
            raise Conflict(f"backup {backup.id} is being restored")
        backup = queue_verification(uow, clock, service, backup)
        uow.commit()
    return backup


def queue_verification_of(uow, clock, backup_id: str) -> Backup | None:
    """In a transaction of its own: queue the verification of a completed backup that is
    not being verified or restored (a policy with ``verify``, after its backup
    completed); None when it is gone or busy."""
    with uow:
        backup = uow.backups.get(backup_id)
        if backup is None or backup.status != "completed" or backup.verify_status in BUSY \
                or backup.restore_status in BUSY:
            return None
        backup = queue_verification(uow, clock, uow.services.get(backup.service_id), backup)
        uow.commit()
    return backup


def check_dumps(runtime):
    """The verification's engine check (``run_verify``'s ``engine_check``): each dump of
    the archive restored in a scratch container and checked there
    (``core.panel.dumps.verify_parts``), its bytes read from the backup's destination."""
    def check(service, backup: Backup, manifest: dict, archives, key: str, budget: Budget | None = None) -> None:
        entries = {part["member"]: part for part in dumps.manifest_parts(manifest)}
        dumps.verify_parts(Budgeted(runtime, budget) if budget is not None else runtime, manifest,
                           lambda member: _counted(budget, archives.part_chunks(backup.destination, key,
                                                                                entries[member])),
                           service_id=service.id)
    return check


def queue_verification(uow, clock, service, backup: Backup) -> Backup:
    """Mark a completed backup's verification queued, inside the caller's transaction
    (the verify route; a policy with ``verify`` after its backup completed)."""
    backup = replace(backup, verify_status="pending", verify_error=None, updated_at=clock.now())
    uow.backups.update(backup)
    uow.emit(progress_event(service, backup, "verify"))
    return backup


def _backup_of(uow, service, backup_id: str) -> Backup:
    backup = uow.backups.get(backup_id)
    if backup is None or backup.service_id != service.id:
        raise NotFound(f"backup {backup_id} not found")
    return backup


def get_backup(uow, principal, service_id: str, backup_id: str) -> Backup:
    principal.require("backups:read")
    with uow:
        return _backup_of(uow, visible(principal, uow.services.get(service_id), service_id), backup_id)


def list_backups(uow, principal, service_id: str, *, page: int, per_page: int, status: str | None = None):
    """Newest first; ``(backups, total)``."""
    principal.require("backups:read")
    with uow:
        visible(principal, uow.services.get(service_id), service_id)
        return uow.backups.page(service_id, page=page, per_page=per_page, status=status)


def _deletable(backup: Backup) -> None:
    if backup.status in BUSY:
        raise Conflict(f"backup {backup.id} is {backup.status}: wait until it ends")
    if backup.restore_status in BUSY:
        raise Conflict(f"backup {backup.id} is being restored")
    if backup.verify_status in BUSY:
        raise Conflict(f"backup {backup.id} is being verified")


def delete_backup(uow, archives, principal, service_id: str, backup_id: str) -> None:
    """Remove the backup's archive from its destination, then forget the backup; 409
    while it, a restore from it or its verification runs. A destination that fails
    raises its error and the backup stays (the request may be tried again)."""
    principal.require("backups:write")
    with uow.reading():
        service = visible(principal, uow.services.get(service_id), service_id)
        backup = _backup_of(uow, service, backup_id)
        _deletable(backup)
    archives.remove(backup.destination, archive_key(service.customer_id, service.id, backup.id))
    with uow:
        _deletable(_backup_of(uow, service, backup_id))  # nothing started meanwhile
        uow.backups.delete(backup_id)
        uow.commit()


def forget_backup(uow, backup: Backup) -> Backup:
    """Inside the caller's transaction: delete the backup's row; 409 while it, a restore
    from it or its verification runs. Its archive goes with ``remove_archive`` once the
    transaction committed (a policy's retention: a rollback must not leave a row without
    its archive)."""
    _deletable(backup)
    uow.backups.delete(backup.id)
    return backup


def remove_archive(archives, customer_id: str, backup: Backup) -> None:
    """Remove a forgotten backup's archive from its destination."""
    archives.remove(backup.destination, archive_key(customer_id, backup.service_id, backup.id))


def forget_service(archives, service) -> None:
    """After a service is deleted: its backup rows went with it (the database cascades),
    its archives go now, from every destination."""
    archives.remove_service(service_prefix(service.customer_id, service.id))


# --- jobs (worker threads) --------------------------------------------------------------------


def claim_next(uow, clock, owner: str | None = None, per_customer: bool = False):
    """The oldest queued job as ``(kind, backup)`` with kind ``backup``, ``restore`` or ``verify``,
    now marked running (SKIP LOCKED on PostgreSQL); None when nothing is queued. With
    ``per_customer``, the jobs of a customer that has one running are passed over."""
    with uow:
        claimed = uow.backups.claim_queued(clock.now(), owner, per_customer=per_customer)
        if claimed is not None:
            kind, backup = claimed
            service = uow.services.get(backup.service_id)
            uow.emit(progress_event(service, backup, kind))
        uow.commit()
    return claimed


def recover_interrupted(uow, clock, archives) -> list[str]:
    """Backups a stopped process left ``running`` (its worker lease is stale or gone,
    ``core.panel.leases``) become ``failed`` (their partial archives are removed from their
    destinations); restores and verifications it left ``running`` are queued again; live
    workers' jobs stay. Returns the ids touched."""
    now = clock.now()
    failed = []
    with uow:
        live = uow.leases.live(leases.stale_before(clock))
        for backup in uow.backups.orphaned(live):
            backup = replace(backup, status="failed", error=INTERRUPTED, updated_at=now)
            uow.backups.update(backup)
            service = uow.services.get(backup.service_id)
            uow.emit(progress_event(service, backup))
            record(uow, clock, backup.service_id, "backup", "failed", f"backup {backup.id} failed: {INTERRUPTED}")
            failed.append((service, backup))
        requeued = uow.backups.orphaned(live, restore=True)
        for backup in requeued:
            service = uow.services.get(backup.service_id)
            if backup.restore_service_id is not None and uow.services.get(backup.restore_service_id) is None:
                # its new service was deleted: run again, it would restore into nothing
                backup = replace(backup, restore_status="failed", restore_error=DELETED, restore_completed_at=now,
                                 updated_at=now)
                record(uow, clock, backup.service_id, "restore", "failed",
                       f"restore from backup {backup.id} failed: {DELETED}")
            else:
                backup = replace(backup, restore_status="pending", restore_progress=0, updated_at=now)
            uow.backups.update(backup)
            uow.emit(progress_event(service, backup, "restore"))
        reverify = uow.backups.orphaned(live, verify=True)
        for backup in reverify:
            uow.backups.update(replace(backup, verify_status="pending", updated_at=now))
        uow.commit()
    for service, backup in failed:
        if service is not None:
            try:
                archives.remove(backup.destination, archive_key(service.customer_id, service.id, backup.id))
            except Exception:  # noqa: BLE001 - an unreachable destination: its partial upload is never an object anyway
                pass
    return [b.id for _, b in failed] + [b.id for b in requeued] + [b.id for b in reverify]


def run(uow, clock, runtime, archives, claimed, engine_check=None, budget: Budget | None = None) -> Backup:
    """Run a claimed job, within ``budget`` when given; answers the backup as the job left it."""
    kind, backup = claimed
    if kind == "restore":
        return run_restore(uow, clock, runtime, archives, backup, budget)
    if kind == "verify":
        return run_verify(uow, clock, archives, backup, engine_check, budget)
    return run_backup(uow, clock, runtime, archives, backup, budget)


def _failure(budget: Budget | None, exc: Exception) -> str:
    """Why a job failed: its budget's reason when it was spent or cancelled, else the error's."""
    return (budget.failure(exc) if budget is not None else None) or _reason(exc)


def _counted(budget: Budget | None, chunks):
    return budget.count(chunks) if budget is not None else chunks


def _save(uow, service, backup: Backup, operation: str, clock=None, step: str | None = None) -> bool:
    """Store the job's new state and announce it; False when the backup is gone (its
    service was deleted meanwhile). With ``clock``, the job ended: its ``success`` or
    ``failed`` event goes on the service's timeline in the same transaction (a restore
    that succeeded announces its step ``completed``)."""
    with uow:
        if uow.backups.get(backup.id) is None:
            return False
        uow.backups.update(backup)
        uow.emit(progress_event(service, backup, operation, step))
        if clock is not None:
            error = backup.restore_error if operation == "restore" else backup.error
            what = f"restore from backup {backup.id}" if operation == "restore" else f"backup {backup.id}"
            record(uow, clock, backup.service_id, operation, "failed" if error else "success",
                   f"{what} failed: {error}" if error else f"{what} completed")
        uow.commit()
    return True


def run_backup(uow, clock, runtime, archives, backup: Backup, budget: Budget | None = None) -> Backup:
    """Export every volume into one archive. Never raises: a failure ends the backup
    ``failed`` with the reason (the budget's when it was spent), and leaves no archive
    behind."""
    if budget is not None:
        runtime = Budgeted(runtime, budget)
    with uow.reading():
        service = uow.services.get(backup.service_id)
        release = uow.releases.numbered(service.id, service.release) if service and service.release else None
    total = len(backup.volumes)

    def volume_done(index: int) -> None:
        nonlocal backup
        backup = replace(backup, progress=min(99, int(100 * (index + 1) / (total + 1))), updated_at=clock.now())
        _save(uow, service, backup, "backup")

    key = archive_key(service.customer_id, service.id, backup.id) if service is not None else None
    try:
        if service is None:
            raise RuntimeError(DELETED)
        parts, engines = backup_parts(runtime, service, backup)
        total = len(parts)
        manifest = {"service_id": service.id, "service_name": service.name, "customer_id": service.customer_id,
                    "backup_id": backup.id, "created_at": backup.created_at.isoformat(),
                    "kind": dumps.backup_kind(engines), "engines": _engine_records(release, engines)}
        size, digest = archives.write(backup.destination, key, manifest, parts, volume_done)
    except Exception as exc:  # noqa: BLE001 - the reason goes to the backup
        if key is not None:
            try:  # a destination's put leaves nothing when it fails; this clears what a stranger path left
                archives.remove(backup.destination, key)
            except Exception:  # noqa: BLE001 - best effort: the reason that matters is the first one
                pass
        now = clock.now()
        backup = replace(backup, status="failed", error=_failure(budget, exc), updated_at=now)
        _save(uow, service, backup, "backup", clock)
        return backup
    now = clock.now()
    backup = replace(backup, status="completed", progress=100, size_bytes=size, sha256=digest, completed_at=now,
                     updated_at=now, error=None)
    if not _save(uow, service, backup, "backup", clock):
        archives.remove(backup.destination, key)
    return backup


def run_verify(uow, clock, archives, backup: Backup, engine_check=None, budget: Budget | None = None) -> Backup:
    """Fetch the backup's archive from its destination, compare its SHA-256 with the
    recorded one and read its structure (``archives.verify``); then, when given,
    ``engine_check(service, backup, manifest, archives, key)`` (the engine's own check of
    a database dump, which raises with the reason when it does not pass). Success sets
    ``verified_at``; failure marks the backup ``failed`` with ``verify_error`` and puts a
    ``backup`` ``failed`` event on the timeline. Never raises. With ``budget``, the check
    gets it too (``engine_check(..., budget=budget)``)."""
    with uow.reading():
        service = uow.services.get(backup.service_id)
    try:
        if service is None:
            raise RuntimeError(DELETED)
        key = archive_key(service.customer_id, service.id, backup.id)
        manifest = archives.verify(backup.destination, key, backup.sha256)
        if budget is not None:
            budget.check()
        if engine_check is not None:
            if budget is not None:
                engine_check(service, backup, manifest, archives, key, budget=budget)
            else:
                engine_check(service, backup, manifest, archives, key)
    except Exception as exc:  # noqa: BLE001 - the reason goes to the verification
        return fail_verification(uow, clock, service, backup, _failure(budget, exc))
    now = clock.now()
    backup = replace(backup, verify_status="completed", verified_at=now, verify_error=None, updated_at=now)
    _save(uow, service, backup, "verify")
    return backup


def fail_verification(uow, clock, service, backup: Backup, reason: str) -> Backup:
    """The backup did not verify: ``failed``, with the reason, on the timeline too."""
    now = clock.now()
    backup = replace(backup, status="failed", verify_status="failed", verify_error=reason,
                     error=f"verification failed: {reason}", updated_at=now)
    with uow:
        if uow.backups.get(backup.id) is not None:
            uow.backups.update(backup)
            uow.emit(progress_event(service, backup, "verify"))
            uow.emit(progress_event(service, backup))
            record(uow, clock, backup.service_id, "backup", "failed",
                   f"backup {backup.id} failed verification: {reason}")
        uow.commit()
    return backup


def run_restore(uow, clock, runtime, archives, backup: Backup, budget: Budget | None = None) -> Backup:
    """Stop the service's running containers, replace each volume's content with the
    archive's, start again the containers that were running. Never raises: a failure
    ends the restore ``failed`` (the containers that ran are started again anyway).

    The restore holds an operation lease on the service (``core.panel.leases``), beaten
    every ``BEAT_S`` while a volume streams in and after each volume, so the health check
    does not take the containers it stopped for a sick service, however long it takes;
    within ``budget`` when given (the reads of the archive counted)."""
    if budget is not None:
        runtime = Budgeted(runtime, budget)
    with uow.reading():
        service = uow.services.get(backup.service_id)
    lease = leases.operation_key(backup.restore_service_id or backup.service_id)
    _beat(uow, clock, lease)
    try:
        return _restore(uow, clock, runtime, archives, backup, service, lease, budget)
    finally:
        with uow:
            leases.end_operation(uow, lease)
            uow.commit()


BEAT_S = 60.0  # how often a restore beats its operation lease while a volume streams in


def _beat(uow, clock, lease: str) -> None:
    with uow:
        leases.hold_operation(uow, clock, lease)
        uow.commit()


def _beating(chunks, uow, clock, lease: str):
    """``chunks`` as they are, the lease beaten every ``BEAT_S`` (of the clock) meanwhile."""
    last = clock.monotonic()
    for chunk in chunks:
        yield chunk
        if clock.monotonic() - last >= BEAT_S:
            _beat(uow, clock, lease)
            last = clock.monotonic()


def _restore(uow, clock, runtime, archives, backup: Backup, service, lease: str, budget=None) -> Backup:
    restart = backup.restore_containers
    target = service
    try:
        if service is None:
            raise RuntimeError(DELETED)
        key = archive_key(service.customer_id, service.id, backup.id)
        progress = {"backup": backup}

        def step(name: str, percent: int, message: str, part: str | None = None) -> None:
            progress["backup"] = _restore_step(uow, clock, service, progress["backup"], name, percent, message,
                                               part, target)

        # read whole and checked before anything is touched
        manifest = archives.verify(backup.destination, key, backup.sha256,
                                   fetched=lambda size: step("fetched", 5, f"fetched the archive ({size} bytes) "
                                                             f"from backup destination {backup.destination}"))
        step("verified", 8, "verified the archive's checksums")
        backup = progress["backup"]
        if backup.restore_service_id is not None:
            target = _deployed(uow, clock, backup.restore_service_id, lease, budget)
        states = runtime.containers(target.id)
        if restart is None:  # a re-run after a restart keeps the first attempt's list
            restart = tuple(s.name for s in states if s.running)
            backup = replace(backup, restore_containers=restart, restore_progress=10, updated_at=clock.now())
            if not _save(uow, service, backup, "restore"):
                raise RuntimeError("the backup was deleted")
        engines = _dumped(manifest)
        for state in reversed(states):
            if state.running and state.labels.get(COMPONENT_LABEL) not in engines:  # a database loads its dump
                runtime.stop(state.id)
        volumes = dumps.manifest_parts(manifest)
        for index, volume in enumerate(volumes):
            chunks = _beating(_counted(budget, archives.part_chunks(backup.destination, key, volume)), uow, clock,
                              lease)
            if volume["kind"] == dumps.VOLUMES:
                runtime.import_volume(resource_names(target, volume=volume["name"]), chunks)
            else:
                dumps.restore_part(runtime, clock, target.id, volume["name"], volume["kind"], chunks,
                                   int(volume["size_bytes"]))
            what = "volume" if volume["kind"] == dumps.VOLUMES else f"{volume['kind']} dump"
            backup = _restore_step(uow, clock, service, backup, "loaded",
                                   min(99, 10 + int(85 * (index + 1) / len(volumes))),
                                   f"loaded {what} {volume['name']} ({index + 1} of {len(volumes)})",
                                   volume["name"], target)
            _beat(uow, clock, lease)
        for name in restart:
            runtime.start(name)
    except Exception as exc:  # noqa: BLE001 - the reason goes to the restore, after the stopped containers start again
        for name in restart or ():
            try:
                runtime.start(name)
            except Exception:  # noqa: BLE001 - best effort: the reason that matters is the first one
                pass
        now = clock.now()
        backup = replace(backup, restore_status="failed", restore_error=_failure(budget, exc),
                         restore_completed_at=now, updated_at=now)
        _save(uow, service, backup, "restore", clock)
        return backup
    now = clock.now()
    backup = replace(backup, restore_status="completed", restore_progress=100, restore_error=None,
                     restore_completed_at=now, updated_at=now)
    _save(uow, service, backup, "restore", clock, step="completed")
    if target is not service:
        with uow:
            record(uow, clock, target.id, "restore", "success", f"restore from backup {backup.id} completed")
            uow.commit()
    return backup


def _restore_step(uow, clock, service, backup: Backup, step: str, percent: int, message: str,
                  part: str | None = None, target=None) -> Backup:
    """A restore's step done: its progress stored and announced (``backup.progress`` with
    ``step`` and ``part``), and on the timeline (``restore`` ``progress``) of the backed-up
    service and of the restore's target when that is another one; ``RuntimeError`` when
    the backup was deleted meanwhile."""
    backup = replace(backup, restore_progress=max(backup.restore_progress, percent), updated_at=clock.now())
    text = f"restore from backup {backup.id}: {message}"
    with uow:
        if uow.backups.get(backup.id) is None:
            raise RuntimeError("the backup was deleted")
        uow.backups.update(backup)
        uow.emit(progress_event(service, backup, "restore", step, part))
        record(uow, clock, backup.service_id, "restore", "progress", text)
        if target is not None and target.id != backup.service_id:
            record(uow, clock, target.id, "restore", "progress", text)
        uow.commit()
    return backup


NEW_SERVICE_WAIT_S = 1800.0  # how long a restore into a new service waits for its first deploy to end
NEW_SERVICE_POLL_S = 1.0


def _deployed(uow, clock, service_id: str, lease: str, budget=None):
    """The new service a restore goes into, once its first deploy has ended (its lease
    beaten meanwhile); an error when that deploy failed or the service is gone
    (``service deleted``), or the budget is spent."""
    deadline = clock.monotonic() + NEW_SERVICE_WAIT_S
    while True:
        if budget is not None:
            budget.check()
        with uow.reading():
            target = uow.services.get(service_id)
        if target is None:
            raise RuntimeError(DELETED)
        if target.status == "failed":
            raise RuntimeError(f"the new service {service_id} failed to deploy")
        if target.status != "deploying":
            return target
        if clock.monotonic() > deadline:
            raise RuntimeError(f"the new service {service_id} still deploys after {NEW_SERVICE_WAIT_S:g} s")
        _beat(uow, clock, lease)
        clock.sleep(NEW_SERVICE_POLL_S)


# --- engine-aware parts (core.panel.dumps) -----------------------------------------------------


def _document(service):
    """The service's compose document (None without a readable compose)."""
    try:
        return load_compose(service.compose or "", service.variables or {})
    except Exception:  # noqa: BLE001 - no compose yet, or one that no longer reads: no engine components
        return None


def _engines(service) -> dict:
    return dumps.engine_components(_document(service))


def backup_parts(runtime, service, backup: Backup):
    """The archive's parts ``(name, kind, chunks)``: the volumes the backup names, then a
    dump of each engine component of the service's compose; and those components."""
    engines = _engines(service)
    volumes = [(name, dumps.VOLUMES, runtime.export_volume(resource_names(service, volume=name)))
               for name in backup.volumes]
    return volumes + dumps.dump_parts(runtime, service.id, engines), engines


def _engine_records(release, engines: dict) -> dict:
    """The manifest's ``engines``: each engine component's ``kind``, its ``image`` and the
    ``image_id`` the service's running release ran it from (None when the release records
    none), which its verification runs (``core.panel.dumps.verify_parts``), whatever the
    compose names later."""
    ran = {i.get("component"): i for i in (release.images if release is not None else ())}
    return {name: {"kind": e["kind"], "image": (ran.get(name) or {}).get("image") or e["image"],
                   "image_id": (ran.get(name) or {}).get("image_id")} for name, e in engines.items()}


def _dumped(manifest: dict) -> set:
    """The components whose dumps the archive holds (they stay running during a restore)."""
    return {p["name"] for p in dumps.manifest_parts(manifest) if p["kind"] != dumps.VOLUMES}


def _reason(exc: Exception) -> str:
    return str(exc)[-2000:] or type(exc).__name__
