"""Transfers: re-parent a license to another partner, customer and contract."""
from __future__ import annotations

import uuid
from dataclasses import dataclass, replace
from datetime import date, datetime

from core.partner import ledger
from core.errors import Conflict, Invalid, NotFound
from core import waits
from core.partner.licenses import FINAL, LICENSE_SERVICE, License, service_metadata
from core.partner.scope import Page, subtree, visible


@dataclass(frozen=True)
class Transfer:
    id: str
    human_id: str
    license_id: str
    from_partner_id: str
    from_customer_id: str
    from_contract_id: str
    to_partner_id: str
    to_customer_id: str
    to_contract_id: str
    reason: str
    effective_date: date
    created_at: datetime
    created_by: str | None
    sync_error: str | None = None


def transfer_license(uow, clock, caller, *, license_id: str, to_partner_id: str, to_customer_id: str,
                     to_contract_id: str, reason: str = "", effective_at: datetime | None = None
                     ) -> tuple[Transfer, License]:
    """Move the license in one transaction (license, transfer record, both ledger events).
    The license-service metadata sync is a separate, best-effort step: ``sync_transfer``."""
    today = clock.now().date()
    effective = effective_at.date() if effective_at is not None else today
    with uow:
        scope = subtree(uow, caller)
        lic = visible(uow.licenses.get(license_id, for_update=True), scope, "license", license_id)
        if to_partner_id not in scope:  # the subtree holds only existing partners
            raise NotFound(f"partner {to_partner_id} not found")
        customer = visible(uow.customers.get(to_customer_id), scope, "customer", to_customer_id)
        contract = visible(uow.contracts.get(to_contract_id), scope, "contract", to_contract_id)
        problems = {}
        if customer.partner_id != to_partner_id:
            problems["toCustomerId"] = "must belong to toPartnerId"
        if contract.partner_id != to_partner_id:
            problems["toContractId"] = "must belong to toPartnerId"
        if problems:
            raise Invalid("the target does not fit together", fields=problems)
        if lic.state == FINAL:
            raise Conflict("a terminated license cannot be transferred")
        if (lic.partner_id, lic.customer_id, lic.contract_id) == (to_partner_id, to_customer_id, to_contract_id):
            raise Conflict("the license already belongs to this partner, customer and contract")
        if not (lic.issued_at.date() <= effective <= today):
            raise Invalid("invalid effectiveDate",
                          fields={"effectiveDate": f"must lie between the license's issue date "
                                                   f"({lic.issued_at.date()}) and today ({today}), UTC"})
        transfer = Transfer(
            id=str(uuid.uuid4()), human_id=uow.human_ids.next("T"), license_id=lic.id,
            from_partner_id=lic.partner_id, from_customer_id=lic.customer_id, from_contract_id=lic.contract_id,
            to_partner_id=to_partner_id, to_customer_id=to_customer_id, to_contract_id=to_contract_id,
            reason=reason, effective_date=effective, created_at=clock.now(), created_by=caller.partner.id)
        moved = replace(lic, partner_id=to_partner_id, customer_id=to_customer_id, contract_id=to_contract_id)
        uow.licenses.update(moved)
        uow.transfers.add(transfer)
        data = {"transferId": transfer.id, "effectiveDate": effective.isoformat(),
                "fromPartnerId": lic.partner_id, "fromCustomerId": lic.customer_id,
                "fromContractId": lic.contract_id, "toPartnerId": to_partner_id,
                "toCustomerId": to_customer_id, "toContractId": to_contract_id}
        ledger.record(uow, clock, event="license.transferred_out", license=lic, actor=caller.partner.id, data=data)
        ledger.record(uow, clock, event="license.transferred_in", license=moved, actor=caller.partner.id,
                      data=data)
        uow.commit()
    return transfer, moved


def sync_transfer(uow, service, transfer: Transfer, moved) -> str | None:
    """Tell the license service the new owner; a failure is recorded on the transfer
    (``sync_error``, for the operator) and returned, never raised."""
    try:
        with waits.allowed(LICENSE_SERVICE):
            service.update_metadata(moved.license_service_license_id, service_metadata(moved))
        return None
    except Exception as exc:  # noqa: BLE001 - best effort by design: the move is already committed
        message = f"{type(exc).__name__}: {exc}"[:500]
        with uow:
            uow.transfers.set_sync_error(transfer.id, message)
            uow.commit()
        return message


def list_transfers(uow, caller, page: Page, *, license_id: str | None = None) -> list[Transfer]:
    with uow:
        return uow.transfers.list(subtree(uow, caller), page, license_id=license_id)
