"""peewee repositories of the panel API: API keys and customers."""
from __future__ import annotations

import json

from core.panel_access import ApiKey
from core.panel_customers import PanelCustomer

SORTABLE = ("name", "created_at", "email")


class PeeweeApiKeys:
    def __init__(self, m):
        self.m = m

    def _entity(self, row) -> ApiKey:
        return ApiKey(id=row.id, name=row.name, role=row.role, secret_hash=row.secret_hash,
                      rate_limit_rpm=row.rate_limit_rpm, created_at=row.created_at, expires_at=row.expires_at,
                      denied_permissions=tuple(json.loads(row.denied_permissions)), customer_id=row.customer_id,
                      revoked_at=row.revoked_at)

    def add(self, key: ApiKey) -> None:
        self.m.PanelApiKey.insert(id=key.id, name=key.name, role=key.role, secret_hash=key.secret_hash,
                                  rate_limit_rpm=key.rate_limit_rpm, expires_at=key.expires_at,
                                  denied_permissions=json.dumps(list(key.denied_permissions)),
                                  customer=key.customer_id, created_at=key.created_at).execute()

    def get(self, key_id: str) -> ApiKey | None:
        row = self.m.PanelApiKey.get_or_none(self.m.PanelApiKey.id == key_id)
        return self._entity(row) if row else None

    def all(self) -> list[ApiKey]:
        K = self.m.PanelApiKey
        return [self._entity(r) for r in K.select().where(K.revoked_at.is_null()).order_by(K.created_at, K.id)]

    def revoke(self, key_id: str, at) -> None:
        K = self.m.PanelApiKey
        K.update(revoked_at=at).where(K.id == key_id).execute()

    def count_for_customer(self, customer_id: str) -> int:
        K = self.m.PanelApiKey
        return K.select().where((K.customer == customer_id) & K.revoked_at.is_null()).count()


class PeeweePanelCustomers:
    def __init__(self, m):
        self.m = m

    @staticmethod
    def _entity(row) -> PanelCustomer:
        return PanelCustomer(id=row.id, name=row.name, email=row.email, created_at=row.created_at)

    def add(self, c: PanelCustomer) -> None:
        self.m.PanelCustomer.insert(id=c.id, name=c.name, email=c.email, created_at=c.created_at).execute()

    def get(self, customer_id: str) -> PanelCustomer | None:
        row = self.m.PanelCustomer.get_or_none(self.m.PanelCustomer.id == customer_id)
        return self._entity(row) if row else None

    def page(self, *, page: int, per_page: int, sort: str, order: str, search: str | None):
        C = self.m.PanelCustomer
        query = C.select()
        if search:
            query = query.where(C.name.contains(search))
        column = getattr(C, sort if sort in SORTABLE else "created_at")
        ordering = [column.desc() if order == "desc" else column.asc(), C.id.desc() if order == "desc" else C.id]
        total = query.count()
        rows = query.order_by(*ordering).paginate(page, per_page)
        return [self._entity(r) for r in rows], total

    def update(self, c: PanelCustomer) -> None:
        self.m.PanelCustomer.update(name=c.name, email=c.email).where(self.m.PanelCustomer.id == c.id).execute()

    def delete(self, customer_id: str) -> None:
        self.m.PanelCustomer.delete().where(self.m.PanelCustomer.id == customer_id).execute()
