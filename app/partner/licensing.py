"""Handlers of the partner API's customers, contacts, notes, licenses, transfers and
activity, and the JSON (and CSV) shapes they answer with."""
from __future__ import annotations

import csv
import functools
import io
import re
from datetime import datetime

from app.http.errors import ApiError
from app.http.pipeline import Reply, time_param
from app.http.timefmt import parse_rfc3339, rfc3339
from core.partner import customers, ledger, licenses, transfers
from core.partner.ledger import EXPORT_ROW_LIMIT
from core.partner.scope import Page

_CAMEL = re.compile(r"_([a-z])")
_SNAKE = re.compile(r"(?<!^)([A-Z])")


@functools.lru_cache(maxsize=None)
def camel(name: str) -> str:
    return _CAMEL.sub(lambda m: m.group(1).upper(), name)


def snake(name: str) -> str:
    return _SNAKE.sub(lambda m: "_" + m.group(1).lower(), name)


def _json(entity, names, **extra) -> dict:
    out = {}
    for name in names:
        value = getattr(entity, name)
        out[camel(name)] = rfc3339(value) if isinstance(value, datetime) else value
    out.update(extra)
    return out


_CUSTOMER_OUT = ("id", "human_id", "partner_id", "created_at") + customers.EDITABLE
_CONTACT_OUT = ("id", "human_id", "customer_id", "created_at", "updated_at") + customers.CONTACT_EDITABLE


def customer_json(c) -> dict:
    return _json(c, _CUSTOMER_OUT)


def contact_json(c) -> dict:
    return _json(c, _CONTACT_OUT)


def note_json(n) -> dict:
    return {"id": n.id, "customerId": n.customer_id, "author": n.author, "body": n.body, "at": rfc3339(n.at)}


def license_json(lic) -> dict:
    # spelled out: list pages build fifty of these per request
    return {"id": lic.id, "humanId": lic.human_id, "partnerId": lic.partner_id, "customerId": lic.customer_id,
            "contractId": lic.contract_id, "licenseServiceLicenseId": lic.license_service_license_id,
            "keyMasked": lic.key_masked, "edition": lic.edition, "state": lic.state,
            "externalBillingRef": lic.external_billing_ref, "metadata": lic.metadata,
            "issuedAt": rfc3339(lic.issued_at), "terminatedAt": rfc3339(lic.terminated_at)}


def transfer_json(t) -> dict:
    out = _json(t, ("id", "human_id", "license_id", "from_partner_id", "from_customer_id", "from_contract_id",
                    "to_partner_id", "to_customer_id", "to_contract_id", "reason", "created_at", "created_by"))
    out["effectiveDate"] = t.effective_date.isoformat()
    return out


def event_json(e) -> dict:
    return {"id": e.id, "event": e.event, "at": rfc3339(e.at), "actor": e.actor, "partnerId": e.partner_id,
            "customerId": e.customer_id, "licenseId": e.license_id, "data": e.data}


def _page(params) -> Page:
    return Page(limit=params.get("limit", 50), offset=params.get("offset", 0))


def _paged(items, page: Page, to_json) -> dict:
    return {"data": [to_json(i) for i in items], "limit": page.limit, "offset": page.offset}


def _effective(value: str | None) -> datetime | None:
    if value is None:
        return None
    try:
        return parse_rfc3339(value)
    except ValueError as exc:
        raise ApiError(422, f"effectiveDate: not a usable date-time: {exc}") from None


def _filters(call) -> ledger.ActivityFilter:
    params = call.params
    return ledger.make_filter(event=params.get("event"), actor=params.get("actor"),
                              since=time_param(call, "from"), until=time_param(call, "to"))


def _fields(body: dict) -> dict:
    return {snake(k): v for k, v in body.items()}


class LicensingHandlers:
    """The partner API's customers, contacts, notes, activity, licenses and transfers, one
    method per operation; ``handlers()`` maps their operation ids to them. ``license_service``
    is the configured license service (``ports.licensing``) that issued keys are synced to."""

    def __init__(self, store, clock, license_service):
        self.store, self.clock, self.license_service = store, clock, license_service

    def handlers(self) -> dict:
        return {
            "listCustomers": self.list_customers, "createCustomer": self.create_customer,
            "getCustomer": self.get_customer, "updateCustomer": self.update_customer,
            "deleteCustomer": self.delete_customer,
            "listContacts": self.list_contacts, "createContact": self.create_contact,
            "updateContact": self.update_contact, "deleteContact": self.delete_contact,
            "listNotes": self.list_notes, "createNote": self.create_note,
            "listActivity": self.list_activity, "getActivitySummary": self.activity_summary,
            "exportActivity": self.export_activity,
            "listLicenses": self.list_licenses, "createLicense": self.create_license, "getLicense": self.get_license,
            "suspendLicense": self.suspend_license, "resumeLicense": self.resume_license,
            "terminateLicense": self.terminate_license, "changeLicenseEdition": self.change_edition,
            "listTransfers": self.list_transfers, "createTransfer": self.create_transfer,
        }

    def run(self, work, *args, **kwargs):
        """``work`` in a database thread (``Store.run``)."""
        return self.store.run(work, *args, **kwargs)

    def uow(self, call):
        return self.store.uow(write=call.op.scope == "write")

    # --- customers ---------------------------------------------------------------------

    async def list_customers(self, call):
        page = _page(call.params)
        found = await self.store.read_page(customers.list_customers, call.caller, page,
                               status=call.params.get("status"), external_ref=call.params.get("externalRef"))
        return Reply(200, _paged(found, page, customer_json))

    async def create_customer(self, call):
        body = dict(call.body)
        partner_id = body.pop("partnerId", None)
        created = await self.run(customers.create_customer, self.uow(call), self.clock, call.caller, _fields(body),
                                 partner_id=partner_id)
        return Reply(201, customer_json(created))

    async def get_customer(self, call):
        return Reply(200, customer_json(await self.run(customers.get_customer, self.uow(call), call.caller,
                                                       call.params["customerId"])))

    async def update_customer(self, call):
        updated = await self.run(customers.update_customer, self.uow(call), call.caller, call.params["customerId"],
                                 _fields(call.body))
        return Reply(200, customer_json(updated))

    async def delete_customer(self, call):
        await self.run(customers.delete_customer, self.uow(call), self.clock, call.caller, call.params["customerId"])
        return Reply(204)

    # --- contacts and notes --------------------------------------------------------------

    async def list_contacts(self, call):
        found = await self.run(customers.list_contacts, self.uow(call), call.caller, call.params["customerId"])
        return Reply(200, [contact_json(c) for c in found])

    async def create_contact(self, call):
        created = await self.run(customers.create_contact, self.uow(call), self.clock, call.caller,
                                 call.params["customerId"], _fields(call.body))
        return Reply(201, contact_json(created))

    async def update_contact(self, call):
        updated = await self.run(customers.update_contact, self.uow(call), self.clock, call.caller,
                                 call.params["customerId"], call.params["contactId"], _fields(call.body))
        return Reply(200, contact_json(updated))

    async def delete_contact(self, call):
        await self.run(customers.delete_contact, self.uow(call), call.caller, call.params["customerId"],
                       call.params["contactId"])
        return Reply(204)

    async def list_notes(self, call):
        found = await self.run(customers.list_notes, self.uow(call), call.caller, call.params["customerId"])
        return Reply(200, [note_json(n) for n in found])

    async def create_note(self, call):
        note = await self.run(customers.add_note, self.uow(call), self.clock, call.caller, call.params["customerId"],
                              call.body["body"])
        return Reply(201, note_json(note))

    # --- activity --------------------------------------------------------------------------

    async def list_activity(self, call):
        page = _page(call.params)
        found = await self.store.read_page(ledger.customer_activity, call.caller, call.params["customerId"],
                               _filters(call), page)
        return Reply(200, _paged(found, page, event_json))

    async def activity_summary(self, call):
        summary = await self.run(ledger.customer_activity_summary, self.uow(call), call.caller,
                                 call.params["customerId"], _filters(call))
        return Reply(200, {"customerId": summary["customer_id"], "total": summary["total"],
                           "byEvent": summary["by_event"], "firstAt": rfc3339(summary["first_at"]),
                           "lastAt": rfc3339(summary["last_at"])})

    async def export_activity(self, call):
        customer_id, filters = call.params["customerId"], _filters(call)
        await self.run(ledger.check_customer_visible, self.uow(call), call.caller, customer_id)
        total = await self.run(ledger.export_count, self.uow(call), customer_id, filters)

        async def rows():
            out = io.StringIO()
            writer = csv.writer(out, lineterminator="\n")
            writer.writerow(["id", "at", "event", "actor", "partnerId", "customerId", "licenseId", "data"])
            yield out.getvalue().encode()
            sent, before = 0, None
            while sent < EXPORT_ROW_LIMIT:
                batch = await self.run(ledger.export_batches, self.uow(call), customer_id, filters, before,
                                       min(1000, EXPORT_ROW_LIMIT - sent))
                if not batch:
                    break
                out.seek(0)
                out.truncate()
                writer.writerows([e.id, rfc3339(e.at), e.event, e.actor or "", e.partner_id, e.customer_id or "",
                                  e.license_id, e.data] for e in batch)
                yield out.getvalue().encode()
                sent += len(batch)
                before = batch[-1].id

        return Reply(200, rows(), content_type="text/csv; charset=utf-8", headers={
            "X-Export-Row-Limit": str(EXPORT_ROW_LIMIT), "X-Export-Total": str(total),
            "X-Export-Truncated": "true" if total > EXPORT_ROW_LIMIT else "false",
            "Content-Disposition": f"attachment; filename=activity-{customer_id}.csv"})

    # --- licenses --------------------------------------------------------------------------

    async def list_licenses(self, call):
        page = _page(call.params)
        found = await self.store.read_page(licenses.list_licenses, call.caller, page,
                               customer_id=call.params.get("customerId"), state=call.params.get("state"),
                               edition=call.params.get("edition"))
        return Reply(200, _paged(found, page, license_json))

    async def create_license(self, call):
        b = call.body
        lic, key = await self.run(licenses.issue_license, self.uow(call), self.clock, self.license_service, call.caller,
                                  customer_id=b["customerId"], contract_id=b["contractId"], edition=b["edition"],
                                  external_billing_ref=b.get("externalBillingRef", ""), metadata=b.get("metadata", ""))
        return Reply(201, {"license": license_json(lic), "key": key})

    async def get_license(self, call):
        return Reply(200, license_json(await self.run(licenses.get_license, self.uow(call), call.caller,
                                                      call.params["licenseId"])))

    # --- transfers -------------------------------------------------------------------------

    async def list_transfers(self, call):
        page = _page(call.params)
        found = await self.store.read_page(transfers.list_transfers, call.caller, page,
                               license_id=call.params.get("licenseId"))
        return Reply(200, _paged(found, page, transfer_json))

    async def create_transfer(self, call):
        b = call.body
        transfer, moved = await self.run(
            transfers.transfer_license, self.uow(call), self.clock, call.caller, license_id=b["licenseId"],
            to_partner_id=b["toPartnerId"], to_customer_id=b["toCustomerId"], to_contract_id=b["toContractId"],
            reason=b.get("reason", ""), effective_at=_effective(b.get("effectiveDate")))
        await self.run(transfers.sync_transfer, self.uow(call), self.license_service, transfer, moved)
        return Reply(201, {"status": "completed", "transfer": transfer_json(transfer)})

    async def _change(self, call, use_case, *extra):
        args = [call.body[name] for name in extra]
        lic = await self.run(use_case, self.uow(call), self.clock, self.license_service, call.caller,
                             call.params["licenseId"], *args)
        return Reply(200, license_json(lic))

    async def suspend_license(self, call):
        return await self._change(call, licenses.suspend_license)

    async def resume_license(self, call):
        return await self._change(call, licenses.resume_license)

    async def terminate_license(self, call):
        return await self._change(call, licenses.terminate_license)

    async def change_edition(self, call):
        return await self._change(call, licenses.change_edition, "edition")
