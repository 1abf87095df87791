"""Usage and statements: drafts recomputed from the ledger, finalized by the operator,
corrected as new revisions. Finalized statements never change (only their status moves
to ``superseded`` when a correction replaces them)."""
from __future__ import annotations

import uuid
from dataclasses import dataclass, replace
from datetime import date, datetime

from core.partner.billing import Period
from core.errors import Conflict, Invalid, NotFound
from core.partner.partners import is_uuid

DRAFT, FINALIZED, SUPERSEDED = "draft", "finalized", "superseded"


@dataclass(frozen=True)
class Statement:
    id: str
    partner_id: str
    period: Period
    revision: int | None  # None for the draft
    status: str
    totals: tuple  # ((currency, amount_cents), ...) sorted by currency
    lines: tuple  # ports.billing.Line, sorted by contract id
    computed_at: datetime
    finalized_by: str | None = None
    finalized_at: datetime | None = None
    supersedes_statement_id: str | None = None


def totals_of(lines) -> tuple:
    sums: dict[str, int] = {}
    for line in lines:
        sums[line.currency] = sums.get(line.currency, 0) + line.amount_cents
    return tuple(sorted(sums.items()))


def price_partner(uow, models: dict, partner_id: str, period: Period, today: date) -> tuple:
    """Every contract of the partner priced by its model, from the ledger's histories."""
    under: dict[str, list] = {}  # contract id -> the histories of licenses ever under it, in ledger order
    for history, contract_ids in uow.ledger.histories_for_partner(partner_id):
        for contract_id in contract_ids:
            under.setdefault(contract_id, []).append(history)
    lines = []
    for contract in uow.contracts.for_partner(partner_id):
        model = models.get(contract.model)
        if model is None:
            raise Conflict(f"contract {contract.id}: no loaded billing plugin provides {contract.model!r}")
        line = model.price(contract, period, under.get(contract.id, []), today)
        if line.detail or line.amount_cents:
            lines.append(line)
    return tuple(sorted(lines, key=lambda line: line.contract_id))


def recompute(uow, clock, models: dict, *, partner_id: str | None = None, period: Period | None = None) -> dict:
    """Rebuild the drafts of one period (the current one by default).

    Pricing reads in one transaction; the drafts are then replaced together in a short
    second one, so writers are not held up for the length of the pricing and a crash
    midway leaves the previous drafts as they were. Both phases take the recompute lock
    (an advisory lock on PostgreSQL): another process recomputing makes this one skip.
    Periods already finalized for a partner are left alone (corrections are ``correct``'s).
    """
    now = clock.now()
    today = now.date()
    period = period or Period.containing(today)
    if period.start > today:
        raise Invalid("the period has not started yet", fields={"period": "must not be in the future"})
    skipped = {"period": period.label, "skipped": "another process is recomputing", "partners": []}
    with uow.reading():
        if not uow.statements.try_lock_recompute():
            return skipped
        if partner_id is not None:
            if not is_uuid(partner_id) or uow.partners.get(partner_id) is None:
                raise NotFound(f"partner {partner_id} not found")
            partner_ids = [partner_id]
        else:
            partner_ids = uow.partners.all_ids()
        drafts = []
        for pid in partner_ids:
            if uow.statements.latest_finalized(pid, period) is not None:
                continue
            lines = price_partner(uow, models, pid, period, today)
            drafts.append(Statement(id=str(uuid.uuid4()), partner_id=pid, period=period, revision=None,
                                    status=DRAFT, totals=totals_of(lines), lines=lines, computed_at=now))
    with uow:
        if not uow.statements.try_lock_recompute():
            return skipped
        for draft in drafts:
            if uow.statements.latest_finalized(draft.partner_id, period) is None:  # finalized meanwhile?
                uow.statements.replace_draft(draft)
        uow.commit()
    return {"period": period.label, "partners": [d.partner_id for d in drafts], "computedAt": now}


def current_usage(uow, clock, partner_id: str) -> tuple[Period, Statement | None]:
    period = Period.containing(clock.now().date())
    with uow:
        return period, uow.statements.draft(partner_id, period)


def finalize(uow, clock, partner_id: str, period: Period, by: str) -> Statement:
    with uow:
        if not is_uuid(partner_id) or uow.partners.get(partner_id) is None:
            raise NotFound(f"partner {partner_id} not found")
        if uow.statements.latest_finalized(partner_id, period) is not None:
            raise Conflict(f"{period.label} is already finalized for this partner: use `statement correct`")
        draft = uow.statements.draft(partner_id, period)
        if draft is None:
            raise NotFound(f"no draft for {period.label}: run `slipway billing recompute --partner {partner_id} "
                           f"--period {period.label}` first")
        final = replace(draft, revision=1, status=FINALIZED, finalized_by=by, finalized_at=clock.now())
        uow.statements.finalize_draft(final)
        uow.commit()
    return final


def correct(uow, clock, models: dict, statement_id: str, by: str) -> Statement:
    """Price the statement's period again as revision n+1; the old one becomes superseded."""
    now = clock.now()
    with uow:
        old = uow.statements.get(statement_id) if is_uuid(statement_id) else None
        if old is None or old.status == DRAFT:
            raise NotFound(f"statement {statement_id} not found")
        if old.status != FINALIZED:
            raise Conflict("only the latest revision can be corrected")
        lines = price_partner(uow, models, old.partner_id, old.period, now.date())
        new = Statement(id=str(uuid.uuid4()), partner_id=old.partner_id, period=old.period,
                        revision=old.revision + 1, status=FINALIZED, totals=totals_of(lines), lines=lines,
                        computed_at=now, finalized_by=by, finalized_at=now, supersedes_statement_id=old.id)
        uow.statements.supersede(old.id)
        uow.statements.add(new)
        uow.commit()
    return new


def list_statements(uow, caller) -> list[Statement]:
    with uow:
        return uow.statements.visible_for(caller.partner.id)


def get_statement(uow, caller, statement_id: str) -> Statement:
    with uow:
        found = uow.statements.get(statement_id)
    if found is None or found.status == DRAFT or found.partner_id != caller.partner.id:
        raise NotFound(f"statement {statement_id} not found")
    return found
