"""Billing contracts: operator data tying a partner to a billing model and a price."""
from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from datetime import datetime

from core.errors import Invalid, NotFound
from core.partner.partners import is_uuid

_CURRENCY = re.compile(r"^[A-Z]{3}$")


@dataclass(frozen=True)
class Contract:
    id: str
    partner_id: str
    model: str
    currency: str
    unit_price_cents: int
    created_at: datetime


def list_contracts(uow, caller, page) -> list[Contract]:
    """A page of the caller's own partner's contracts, newest first (a parent's contracts
    are not its sub-resellers', and theirs are not shown to it: each partner's own)."""
    with uow:
        return uow.contracts.page(caller.partner.id, page)


def create_contract(uow, clock, *, partner_id: str, model: str, currency: str, unit_price_cents: int,
                    known_models: set[str]) -> Contract:
    """Create a contract; its model must be provided by a loaded billing plugin."""
    if model not in known_models:
        known = ", ".join(sorted(known_models)) or "none"
        raise Invalid(f"no loaded billing plugin provides model {model!r} (loaded: {known})",
                      fields={"model": "unknown billing model"})
    if not _CURRENCY.match(currency or ""):
        raise Invalid("currency must be a three-letter upper-case ISO 4217 code", fields={"currency": "invalid"})
    if not isinstance(unit_price_cents, int) or isinstance(unit_price_cents, bool) or unit_price_cents < 0:
        raise Invalid("unit price must be a non-negative integer of cents", fields={"unitPriceCents": "invalid"})
    if not is_uuid(partner_id):
        raise Invalid("partner must be a partner id (UUID)", fields={"partner": "not a UUID"})
    contract = Contract(id=str(uuid.uuid4()), partner_id=partner_id, model=model, currency=currency,
                        unit_price_cents=unit_price_cents, created_at=clock.now())
    with uow:
        if uow.partners.get(partner_id) is None:
            raise NotFound(f"partner {partner_id} not found")
        uow.contracts.add(contract)
        uow.commit()
    return contract
