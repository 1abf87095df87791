"""Handlers of the panel API's backup policy of a service: read, create or replace,
delete. The scheduler that runs the policies is ``app.workers.backup_scheduler``."""
from __future__ import annotations

from app.http.pipeline import Reply
from app.http.timefmt import rfc3339
from core.panel import backup_policies


def policy_json(p) -> dict:
    return {"service_id": p.service_id, "schedule": p.schedule, "destination": p.destination,
            "keep_last": p.keep_last, "verify": p.verify, "next_run_at": rfc3339(p.next_run_at),
            "last_run_at": rfc3339(p.last_run_at), "last_backup_id": p.last_backup_id,
            "created_at": rfc3339(p.created_at), "updated_at": rfc3339(p.updated_at)}


class BackupPoliciesHandlers:
    """``destinations`` (``core.panel.backup_policies.Destinations``): the names a policy
    may give; ``wake()`` tells the scheduler a policy changed."""

    def __init__(self, store, clock, destinations, wake=lambda: None):
        self.store, self.clock, self.destinations, self.wake = store, clock, destinations, wake

    def handlers(self) -> dict:
        return {"getBackupPolicy": self.get_policy, "putBackupPolicy": self.put_policy,
                "deleteBackupPolicy": self.delete_policy}

    async def get_policy(self, call):
        found = await self.store.run(backup_policies.get_policy, self.store.uow(write=False), call.caller,
                                     call.params["id"])
        return Reply(200, policy_json(found))

    async def put_policy(self, call):
        policy = await self.store.run(backup_policies.put_policy, self.store.uow(), self.clock, call.caller,
                                      call.params["id"], call.body, self.destinations)
        self.wake()
        return Reply(200, policy_json(policy))

    async def delete_policy(self, call):
        await self.store.run(backup_policies.delete_policy, self.store.uow(), call.caller, call.params["id"])
        return Reply(204)
