"""Handlers of the panel API's service backups: list, create, detail, delete, restore.
The work itself runs in the background (``app.workers.backups``)."""
from __future__ import annotations

from app.http.pipeline import Reply
from app.http.timefmt import rfc3339
from core.panel import backups


def backup_json(b) -> dict:
    restore = None
    if b.restore_status is not None:
        restore = {"status": b.restore_status, "progress": b.restore_progress,
                   "requested_at": rfc3339(b.restore_requested_at), "completed_at": rfc3339(b.restore_completed_at),
                   "error": b.restore_error}
    return {"id": b.id, "service_id": b.service_id, "status": b.status, "progress": b.progress,
            "size_bytes": b.size_bytes, "sha256": b.sha256, "volumes": list(b.volumes),
            "created_at": rfc3339(b.created_at), "completed_at": rfc3339(b.completed_at), "error": b.error,
            "restore": restore}


def backups_handlers(store, clock, archives, parse, wake=lambda: None) -> dict:
    """``parse(compose, variables)`` is the compose parser that names a service's volumes;
    ``wake()`` tells the backup worker a job is queued."""
    run = store.run

    async def list_backups(call):
        p = call.params
        found, total = await run(backups.list_backups, store.uow(write=False), call.caller, p["id"], page=p["page"],
                                 per_page=p["per_page"], status=p.get("status"))
        return Reply(200, {"data": [backup_json(b) for b in found], "total": total, "page": p["page"],
                           "per_page": p["per_page"]})

    async def create_backup(call):
        backup = await run(backups.create_backup, store.uow(), clock, call.caller, call.params["id"], parse)
        wake()
        return Reply(202, backup_json(backup))

    async def get_backup(call):
        return Reply(200, backup_json(await run(backups.get_backup, store.uow(write=False), call.caller,
                                                call.params["id"], call.params["backup_id"])))

    async def delete_backup(call):
        await run(backups.delete_backup, store.uow(), archives, call.caller, call.params["id"],
                  call.params["backup_id"])
        return Reply(204)

    async def restore_backup(call):
        backup = await run(backups.restore_backup, store.uow(), clock, call.caller, call.params["id"],
                           call.params["backup_id"])
        wake()
        return Reply(202, backup_json(backup))

    return {"listBackups": list_backups, "createBackup": create_backup, "getBackup": get_backup,
            "deleteBackup": delete_backup, "restoreBackup": restore_backup}
