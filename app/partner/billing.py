"""Handlers of the partner API's usage and statements, and their JSON and CSV shapes."""
from __future__ import annotations

import csv
import io
import json

from app.http.pipeline import Reply
from app.http.timefmt import rfc3339
from core.partner import contracts, statements
from core.partner.scope import Page
from core.partner.billing import quantity

CSV_COLUMNS = ["contractId", "model", "currency", "licenseId", "keyMasked", "days", "quantity", "unitPriceCents",
               "amountCents"]


def contract_json(contract) -> dict:
    """A billing contract: its ids, currency and model with the model's settings (the
    metered model's ``unitPriceCents``)."""
    return {"id": contract.id, "partnerId": contract.partner_id, "model": contract.model,
            "currency": contract.currency, "unitPriceCents": contract.unit_price_cents,
            "createdAt": rfc3339(contract.created_at)}


def totals_json(totals) -> list:
    return [{"currency": currency, "amountCents": amount} for currency, amount in totals]


def line_json(line) -> dict:
    return {"contractId": line.contract_id, "model": line.model, "currency": line.currency,
            "quantity": float(line.quantity), "unitPriceCents": line.unit_price_cents,
            "amountCents": line.amount_cents,
            "detail": [{"licenseId": d.license_id, "keyMasked": d.key_masked, "days": d.days,
                        "amountCents": d.amount_cents} for d in line.detail]}


def statement_json(s, *, full: bool = True) -> dict:
    out = {"id": s.id}
    if full:
        out["partnerId"] = s.partner_id
    out.update({"periodStart": s.period.start.isoformat(), "periodEnd": s.period.end.isoformat(),
                "revision": s.revision, "status": s.status, "totals": totals_json(s.totals)})
    if full:
        out["lines"] = [line_json(line) for line in s.lines]
    out.update({"computedAt": rfc3339(s.computed_at), "finalizedBy": s.finalized_by,
                "finalizedAt": rfc3339(s.finalized_at)})
    if s.supersedes_statement_id:
        out["supersedesStatementId"] = s.supersedes_statement_id
    return out


def statement_csv(s) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for line in s.lines:
        for d in line.detail:
            writer.writerow([line.contract_id, line.model, line.currency, d.license_id, d.key_masked, d.days,
                             f"{quantity(d.days, s.period.days):.4f}", line.unit_price_cents, d.amount_cents])
    return out.getvalue()


class BillingHandlers:
    """The usage and statement operations of the partner API, one method each."""

    def __init__(self, store, clock):
        self.store, self.clock = store, clock

    def handlers(self) -> dict:
        return {"listContracts": self.list_contracts, "getUsage": self.get_usage, "listStatements": self.list_statements, "getStatement": self.get_statement,
                "exportStatement": self.export_statement}

    async def list_contracts(self, call):
        page = Page(limit=call.params.get("limit", 50), offset=call.params.get("offset", 0))
        found = await self.store.read_page(contracts.list_contracts, call.caller, page)
        return Reply(200, {"data": [contract_json(c) for c in found], "limit": page.limit, "offset": page.offset})

    async def get_usage(self, call):
        period, draft = await self.store.run(statements.current_usage, self.store.uow(write=False), self.clock,
                                             call.caller.partner.id)
        return Reply(200, {"periodStart": period.start.isoformat(), "periodEnd": period.end.isoformat(),
                           "computedAt": rfc3339(draft.computed_at) if draft else None,
                           "totals": totals_json(draft.totals) if draft else [],
                           "lines": [line_json(line) for line in draft.lines] if draft else []})

    async def list_statements(self, call):
        found = await self.store.run(statements.list_statements, self.store.uow(write=False), call.caller)
        return Reply(200, [statement_json(s, full=False) for s in found])

    async def get_statement(self, call):
        found = await self.store.run(statements.get_statement, self.store.uow(write=False), call.caller,
                                     call.params["statementId"])
        return Reply(200, statement_json(found))

    async def export_statement(self, call):
        s = await self.store.run(statements.get_statement, self.store.uow(write=False), call.caller,
                                 call.params["statementId"])
        fmt = call.params["format"]
        filename = f"statement-{s.partner_id}-{s.period.label}-r{s.revision}.{fmt}"
        if fmt == "csv":
            body, media = statement_csv(s), "text/csv; charset=utf-8"
        else:
            body, media = json.dumps(statement_json(s), separators=(",", ":")), "application/json"
        return Reply(200, body, content_type=media,
                     headers={"Content-Disposition": f"attachment; filename={filename}"})
