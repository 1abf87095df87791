"""Handlers of the panel API's service backups: list, create, detail, delete, restore,
verify.
The work itself runs in the background (``app.workers.backups``)."""
from __future__ import annotations

from app.http.pipeline import Reply
from app.http.timefmt import rfc3339
from app.panel.backup_policies import policy_json
from core.panel import backup_policies, backups


def backup_json(b) -> dict:
    restore = None
    if b.restore_status is not None:
        restore = {"status": b.restore_status, "progress": b.restore_progress,
                   "requested_at": rfc3339(b.restore_requested_at), "completed_at": rfc3339(b.restore_completed_at),
                   "error": b.restore_error}
    return {"id": b.id, "service_id": b.service_id, "status": b.status, "progress": b.progress,
            "size_bytes": b.size_bytes, "sha256": b.sha256, "checksum_sha256": b.sha256, "volumes": list(b.volumes),
            "destination": b.destination, "kind": b.kind,
            "created_at": rfc3339(b.created_at), "completed_at": rfc3339(b.completed_at), "error": b.error,
            "verify_status": b.verify_status, "verified_at": rfc3339(b.verified_at), "verify_error": b.verify_error,
            "scheduled": b.scheduled, "restore": restore, "restored_service_id": b.restore_service_id}


class BackupsHandlers:
    """The backups operations of the panel API, one method each; ``handlers()`` maps their
    operation ids to them. ``parse(compose, variables)`` is the compose parser that names
    a service's volumes; ``wake()`` tells the backup worker a job is queued;
    ``create_service(uow, principal, request, also)`` creates the new service of a restore
    into one (``core.panel.services.create_service`` with its collaborators bound; None:
    such restores are refused). ``calls``: the engine-call pool on whose customer's share
    the work that reaches the outside runs (a destination's delete, a restore's new
    service planned), never a database thread (``core.waits``); None: the database's.
    ``engine_gate`` (``app.engine_gate``): a backup or a restore is refused with 503
    ``engine_unavailable`` before anything is stored when the engine is not configured or
    does not answer its ping."""

    def __init__(self, store, clock, archives, parse, wake=lambda: None, create_service=None, calls=None,
                 engine_gate=None):
        self.engine_gate = engine_gate
        self.store, self.clock, self.archives, self.parse, self.wake = store, clock, archives, parse, wake
        self.create_service = create_service
        self.calls = calls

    async def _outside(self, call, fn, *args):
        """``fn(*args)`` on the caller's share of the engine-call threads (it reaches a
        backup destination or looks hosts up)."""
        if self.calls is None:
            return await self.store.run(fn, *args)
        from app.panel.services import tenant

        return await self.calls.run_for(tenant(call.caller), fn, *args)

    async def _engine_answers(self, call) -> None:
        if self.engine_gate is None:
            return
        from app.panel.services import tenant

        if self.calls is None:  # never a database thread
            import asyncio

            await self.engine_gate.require(asyncio.to_thread)
        else:
            await self.engine_gate.require(lambda fn: self.calls.run_for(tenant(call.caller), fn))

    def handlers(self) -> dict:
        return {"listBackups": self.list_backups, "createBackup": self.create_backup, "getBackup": self.get_backup,
                "deleteBackup": self.delete_backup, "restoreBackup": self.restore_backup,
                "verifyBackup": self.verify_backup}

    async def list_backups(self, call):
        p = call.params
        found, total = await self.store.run(backups.list_backups, self.store.uow(write=False), call.caller, p["id"],
                                            page=p["page"], per_page=p["per_page"], status=p.get("status"))
        # the service's policy beside its backups (null: none), so a client learns there is
        # none without asking GET .../backup-policy for a 404
        policy = await self.store.run(backup_policies.find_policy, self.store.uow(write=False), call.caller, p["id"])
        return Reply(200, {"data": [backup_json(b) for b in found], "total": total, "page": p["page"],
                           "per_page": p["per_page"], "policy": None if policy is None else policy_json(policy)})

    async def create_backup(self, call):
        await self._engine_answers(call)
        body = call.body if isinstance(call.body, dict) else {}
        backup = await self.store.run(backups.create_backup, self.store.uow(), self.clock, call.caller,
                                      call.params["id"], self.parse, archives=self.archives,
                                      destination=body.get("destination"))
        self.wake()
        return Reply(202, backup_json(backup))

    async def get_backup(self, call):
        found = await self.store.run(backups.get_backup, self.store.uow(write=False), call.caller, call.params["id"],
                                     call.params["backup_id"])
        return Reply(200, backup_json(found))

    async def delete_backup(self, call):
        await self._outside(call, backups.delete_backup, self.store.uow(), self.archives, call.caller,
                            call.params["id"], call.params["backup_id"])
        return Reply(204)

    async def restore_backup(self, call):
        await self._engine_answers(call)
        backup = await self._outside(call, backups.restore_backup, self.store.uow(), self.clock, call.caller,
                                     call.params["id"], call.params["backup_id"], call.body, self.create_service)
        self.wake()
        return Reply(202, backup_json(backup))

    async def verify_backup(self, call):
        backup = await self.store.run(backups.verify_backup, self.store.uow(), self.clock, call.caller,
                                      call.params["id"], call.params["backup_id"])
        self.wake()
        return Reply(202, backup_json(backup))
