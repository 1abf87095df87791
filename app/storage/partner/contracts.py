"""peewee repository of the partners' billing contracts."""
from __future__ import annotations

from core.partner.contracts import Contract
from ports.storage.partner import ContractRepository


class PeeweeContracts(ContractRepository):
    def __init__(self, m):
        self.m = m

    def add(self, contract: Contract) -> None:
        self.m.Contract.insert(id=contract.id, partner=contract.partner_id, model=contract.model,
                               currency=contract.currency, unit_price_cents=contract.unit_price_cents,
                               created_at=contract.created_at).execute()

    @staticmethod
    def _entity(row) -> Contract:
        return Contract(id=row.id, partner_id=row.partner_id, model=row.model, currency=row.currency,
                        unit_price_cents=row.unit_price_cents, created_at=row.created_at)

    def get(self, contract_id: str) -> Contract | None:
        row = self.m.Contract.get_or_none(self.m.Contract.id == contract_id)
        return self._entity(row) if row else None

    def page(self, partner_id: str, page) -> list[Contract]:
        C = self.m.Contract
        rows = (C.select().where(C.partner == partner_id).order_by(C.created_at.desc(), C.id)
                .limit(page.limit).offset(page.offset))
        return [self._entity(r) for r in rows]

    def for_partner(self, partner_id: str) -> list[Contract]:
        C = self.m.Contract
        return [self._entity(r) for r in C.select().where(C.partner == partner_id).order_by(C.id)]
