"""Handlers of the panel API's deploy keys: list, create, read, delete
(``core.panel.deploy_keys``). No answer carries a key's private half."""
from __future__ import annotations

from app.http.pipeline import Reply
from app.http.timefmt import rfc3339
from core.panel import deploy_keys


def key_json(k) -> dict:
    return {"id": k.id, "name": k.name, "customer_id": k.customer_id, "public_key": k.public_key,
            "fingerprint": k.fingerprint, "created_at": rfc3339(k.created_at)}


class DeployKeysHandlers:
    def __init__(self, store, clock):
        self.store, self.clock = store, clock

    def handlers(self) -> dict:
        return {"listDeployKeys": self.list_keys, "createDeployKey": self.create_key,
                "getDeployKey": self.get_key, "deleteDeployKey": self.delete_key}

    async def list_keys(self, call):
        p = call.params
        found, total = await self.store.run(deploy_keys.list_keys, self.store.uow(write=False), call.caller,
                                            page=p["page"], per_page=p["per_page"], customer_id=p.get("customer_id"))
        return Reply(200, {"data": [key_json(k) for k in found], "total": total, "page": p["page"],
                           "per_page": p["per_page"]})

    async def create_key(self, call):
        key = await self.store.run(deploy_keys.create_key, self.store.uow(), self.clock, call.caller, call.body)
        return Reply(201, key_json(key))

    async def get_key(self, call):
        key = await self.store.run(deploy_keys.get_key, self.store.uow(write=False), call.caller, call.params["id"])
        return Reply(200, key_json(key))

    async def delete_key(self, call):
        await self.store.run(deploy_keys.delete_key, self.store.uow(), call.caller, call.params["id"])
        return Reply(204)
