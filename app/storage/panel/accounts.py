"""peewee repositories of the panel API: API keys and customers."""
from __future__ import annotations

import json

from peewee import fn

from app.storage.queries import _for_update
from core.panel.access import ApiKey
from core.panel.customers import Limits, PanelCustomer

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
        # every request with a key runs this (app.storage.readpath): SQL built once per store
        K = self.m.PanelApiKey
        sql = self.m.statements.sql("panel-key-by-id", lambda: K.select(
            K.id, K.name, K.role, K.secret_hash, K.rate_limit_rpm, K.created_at, K.expires_at,
            K.denied_permissions, K.customer, K.revoked_at).where(K.id == "?"))

        def read():
            rows = self.m.statements.rows(sql, (key_id,))
            return self._key(rows[0]) if rows else None

        return self.m.statements.kept(("panel-key-by-id", key_id), read)

    def _key(self, row) -> ApiKey:
        dt = self.m.PanelApiKey.created_at.python_value
        return ApiKey(id=row[0], name=row[1], role=row[2], secret_hash=row[3], rate_limit_rpm=row[4],
                      created_at=dt(row[5]), expires_at=dt(row[6]), denied_permissions=tuple(json.loads(row[7])),
                      customer_id=row[8], revoked_at=dt(row[9]))

    def get_many(self, key_ids) -> dict:
        """{key id: key} of those of ``key_ids`` that exist, one query per 500 ids."""
        K, ids, found = self.m.PanelApiKey, sorted(set(key_ids)), {}
        for start in range(0, len(ids), 500):
            for row in K.select().where(K.id.in_(ids[start:start + 500])):
                found[row.id] = self._entity(row)
        return found

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
        return PanelCustomer(id=row.id, name=row.name, email=row.email, created_at=row.created_at,
                             limits=Limits(services=row.max_services, memory_mb=row.max_memory_mb,
                                           millicpus=row.max_millicpus, containers=row.max_containers))

    @staticmethod
    def _limits(c: PanelCustomer) -> dict:
        return {"max_services": c.limits.services, "max_memory_mb": c.limits.memory_mb,
                "max_millicpus": c.limits.millicpus, "max_containers": c.limits.containers}

    def add(self, c: PanelCustomer) -> None:
        self.m.PanelCustomer.insert(id=c.id, name=c.name, email=c.email, created_at=c.created_at,
                                    **self._limits(c)).execute()

    def get(self, customer_id: str, for_update: bool = False) -> PanelCustomer | None:
        """``for_update``: lock the row until the transaction ends (PostgreSQL; SQLite's
        write transactions are serialised anyway)."""
        C = self.m.PanelCustomer
        query = C.select().where(C.id == customer_id)
        row = (_for_update(query, C._meta.database) if for_update else query).first()
        return self._entity(row) if row else None

    def usage(self, customer_id: str) -> tuple[int, int, int, int]:
        """(services, memory MB, millicpus, containers) the customer's services count, summed."""
        S = self.m.Service
        count, memory, milli, containers = (S.select(fn.COUNT(S.id), fn.COALESCE(fn.SUM(S.memory_mb), 0),
                                                     fn.COALESCE(fn.SUM(S.millicpus), 0),
                                                     fn.COALESCE(fn.SUM(S.containers), 0))
                                            .where(S.customer == customer_id).tuples().first())
        return int(count), int(memory), int(milli), int(containers)

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
        self.m.PanelCustomer.update(name=c.name, email=c.email, **self._limits(c)).where(
            self.m.PanelCustomer.id == c.id).execute()

    def delete(self, customer_id: str) -> None:
        # its revoked keys go with it (their foreign key would refuse the delete); the use
        # case refuses while a live key remains
        K, S = self.m.PanelApiKey, self.m.PanelKeySession
        revoked = K.select(K.id).where((K.customer == customer_id) & K.revoked_at.is_null(False))
        S.delete().where(S.api_key.in_(revoked)).execute()  # their browser sessions first
        K.delete().where((K.customer == customer_id) & K.revoked_at.is_null(False)).execute()
        self.m.PanelCustomer.delete().where(self.m.PanelCustomer.id == customer_id).execute()
