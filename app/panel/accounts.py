"""Handlers of the panel API's contract, API keys, customers and templates."""
from __future__ import annotations

from datetime import datetime

from app.http.pipeline import Reply
from app.http.timefmt import parse_rfc3339, rfc3339
from core.panel import access, customers as panel_customers
from core.errors import Invalid


def api_key_json(key, full_key: str | None = None) -> dict:
    out = {"id": key.id, "name": key.name, "role": key.role, "keyPrefix": key.key_prefix,
           "rateLimitRpm": key.rate_limit_rpm, "expiresAt": rfc3339(key.expires_at),
           "deniedPermissions": list(key.denied_permissions), "customerId": key.customer_id,
           "createdAt": rfc3339(key.created_at)}
    if full_key is not None:
        out["key"] = full_key
    return out


def customer_json(c) -> dict:
    # limits as stored: null is the operator's default (SLIPWAY_CUSTOMER_MAX_*)
    return {"id": c.id, "name": c.name, "email": c.email, "created_at": rfc3339(c.created_at),
            "limits": {"services": c.limits.services, "memory_mb": c.limits.memory_mb, "cpus": c.limits.cpus,
                       "containers": c.limits.containers}}


def template_json(t) -> dict:
    return {"id": t["id"], "name": t["name"], "category": t.get("category", ""),
            "description": t.get("description", ""), "compose": t.get("compose", ""),
            "variables": [{"name": v["name"], "default": v.get("default"), "required": bool(v.get("required")),
                           "description": v.get("description", ""), "secret": bool(v.get("secret"))}
                          for v in t.get("variables", [])]}


def _listing(items, total, params) -> dict:
    return {"data": items, "total": total, "page": params["page"], "per_page": params["per_page"]}


def parse_expiry(value: str | None) -> datetime | None:
    if value is None:
        return None
    try:
        return parse_rfc3339(value)
    except ValueError as exc:
        raise Invalid("invalid API key", fields={"expiresAt": f"must be an RFC 3339 timestamp: {exc}"}) from None


def create_key(store, clock, body: dict, creator=None, default_rpm: int = access.DEFAULT_RPM):
    """``creator``: the calling key or session, which bounds the new key (None: the operator).
    ``default_rpm`` (``SLIPWAY_RATE_AUTH_RPM``) is the ``rateLimitRpm`` of a body without one."""
    return access.create_api_key(
        store.uow(), clock, name=body["name"], role=body["role"], rate_limit_rpm=body.get("rateLimitRpm"),
        expires_at=parse_expiry(body.get("expiresAt")), denied_permissions=body.get("deniedPermissions", []),
        customer_id=body.get("customerId"), creator=creator, default_rpm=default_rpm)


class AccountsHandlers:
    """The panel API's own contract, API key, customer and template operations, one
    method each; ``handlers()`` maps their operation ids to them. ``key_rpm``: a new
    key's ``rateLimitRpm`` when the request names none (SLIPWAY_RATE_AUTH_RPM)."""

    def __init__(self, store, clock, contract, catalog: dict, *, key_rpm: int = access.DEFAULT_RPM):
        self.store, self.clock, self.contract, self.catalog, self.key_rpm = store, clock, contract, catalog, key_rpm

    def handlers(self) -> dict:
        return {"getPanelContract": self.get_contract, "getPanelContractJson": self.get_contract_json,
                "createApiKey": self.create_api_key, "listApiKeys": self.list_api_keys,
                "revokeApiKey": self.revoke_api_key, "listPanelCustomers": self.list_customers,
                "createPanelCustomer": self.create_customer, "getPanelCustomer": self.get_customer,
                "updatePanelCustomer": self.update_customer, "deletePanelCustomer": self.delete_customer,
                "listTemplates": self.list_templates}

    async def get_contract(self, call):
        return Reply(200, self.contract.text, content_type="application/yaml")

    async def get_contract_json(self, call):  # the same served document, for clients that read JSON
        return Reply(200, self.contract.json, content_type="application/json")

    async def create_api_key(self, call):
        key, full = await self.store.run(create_key, self.store, self.clock, call.body, call.caller, self.key_rpm)
        return Reply(201, api_key_json(key, full))

    async def list_api_keys(self, call):
        keys = await self.store.run(access.list_api_keys, self.store.uow(write=False))
        page, per_page = call.params["page"], call.params["per_page"]
        chunk = keys[(page - 1) * per_page:page * per_page]
        return Reply(200, _listing([api_key_json(k) for k in chunk], len(keys), call.params))

    async def revoke_api_key(self, call):
        await self.store.run(access.revoke_api_key, self.store.uow(), self.clock, call.params["id"],
                             revoker=call.caller)
        return Reply(204)

    async def list_customers(self, call):
        p = call.params
        found, total = await self.store.run(panel_customers.list_customers, self.store.uow(write=False),
                                            page=p["page"], per_page=p["per_page"],
                                            sort=p.get("sort", "created_at"), order=p["order"],
                                            search=p.get("search"))
        return Reply(200, _listing([customer_json(c) for c in found], total, p))

    async def create_customer(self, call):
        created = await self.store.run(panel_customers.create_customer, self.store.uow(), self.clock,
                                       name=call.body["name"], email=call.body.get("email", ""),
                                       limits=call.body.get("limits"))
        return Reply(201, customer_json(created))

    async def get_customer(self, call):
        found = await self.store.run(panel_customers.get_customer, self.store.uow(write=False), call.params["id"])
        return Reply(200, customer_json(found))

    async def update_customer(self, call):
        found = await self.store.run(panel_customers.update_customer, self.store.uow(), call.params["id"], call.body)
        return Reply(200, customer_json(found))

    async def delete_customer(self, call):
        await self.store.run(panel_customers.delete_customer, self.store.uow(), call.params["id"])
        return Reply(204)

    async def list_templates(self, call):
        p = call.params
        chosen = [t for t in sorted(self.catalog.values(), key=lambda t: t["id"])
                  if p.get("category") in (None, t.get("category"))]
        page, per_page = p["page"], p["per_page"]
        return Reply(200, _listing([template_json(t) for t in chosen[(page - 1) * per_page:page * per_page]],
                                   len(chosen), p))
