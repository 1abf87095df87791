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


def licensing_handlers(store, clock, license_service) -> dict:
    run = store.run

    def uow(call):
        return store.uow(write=call.op.scope == "write")

    # --- customers ---------------------------------------------------------------------

    async def list_customers(call):
        page = _page(call.params)
        found = await run(customers.list_customers, uow(call), call.caller, page,
                          status=call.params.get("status"), external_ref=call.params.get("externalRef"))
        return Reply(200, _paged(found, page, customer_json))

    async def create_customer(call):
        body = dict(call.body)
        partner_id = body.pop("partnerId", None)
        created = await run(customers.create_customer, uow(call), clock, call.caller, _fields(body),
                            partner_id=partner_id)
        return Reply(201, customer_json(created))

    async def get_customer(call):
        return Reply(200, customer_json(await run(customers.get_customer, uow(call), call.caller,
                                                  call.params["customerId"])))

    async def update_customer(call):
        updated = await run(customers.update_customer, uow(call), call.caller, call.params["customerId"],
                            _fields(call.body))
        return Reply(200, customer_json(updated))

    async def delete_customer(call):
        await run(customers.delete_customer, uow(call), clock, call.caller, call.params["customerId"])
        return Reply(204)

    # --- contacts and notes --------------------------------------------------------------

    async def list_contacts(call):
        found = await run(customers.list_contacts, uow(call), call.caller, call.params["customerId"])
        return Reply(200, [contact_json(c) for c in found])

    async def create_contact(call):
        created = await run(customers.create_contact, uow(call), clock, call.caller, call.params["customerId"],
                            _fields(call.body))
        return Reply(201, contact_json(created))

    async def update_contact(call):
        updated = await run(customers.update_contact, uow(call), clock, call.caller, call.params["customerId"],
                            call.params["contactId"], _fields(call.body))
        return Reply(200, contact_json(updated))

    async def delete_contact(call):
        await run(customers.delete_contact, uow(call), call.caller, call.params["customerId"],
                  call.params["contactId"])
        return Reply(204)

    async def list_notes(call):
        found = await run(customers.list_notes, uow(call), call.caller, call.params["customerId"])
        return Reply(200, [note_json(n) for n in found])

    async def create_note(call):
        note = await run(customers.add_note, uow(call), clock, call.caller, call.params["customerId"],
                         call.body["body"])
        return Reply(201, note_json(note))

    # --- activity --------------------------------------------------------------------------

    async def list_activity(call):
        page = _page(call.params)
        found = await run(ledger.customer_activity, uow(call), call.caller, call.params["customerId"],
                          _filters(call), page)
        return Reply(200, _paged(found, page, event_json))

    async def activity_summary(call):
        summary = await run(ledger.customer_activity_summary, uow(call), call.caller, call.params["customerId"],
                            _filters(call))
        return Reply(200, {"customerId": summary["customer_id"], "total": summary["total"],
                           "byEvent": summary["by_event"], "firstAt": rfc3339(summary["first_at"]),
                           "lastAt": rfc3339(summary["last_at"])})

    async def export_activity(call):
        customer_id, filters = call.params["customerId"], _filters(call)
        await run(ledger.check_customer_visible, uow(call), call.caller, customer_id)
        total = await run(ledger.export_count, uow(call), customer_id, filters)

        async def rows():
            out = io.StringIO()
            writer = csv.writer(out, lineterminator="\n")
            writer.writerow(["id", "at", "event", "actor", "partnerId", "customerId", "licenseId", "data"])
            yield out.getvalue().encode()
            sent, before = 0, None
            while sent < EXPORT_ROW_LIMIT:
                batch = await run(ledger.export_batches, uow(call), customer_id, filters, before,
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

    async def list_licenses(call):
        page = _page(call.params)
        found = await run(licenses.list_licenses, uow(call), call.caller, page,
                          customer_id=call.params.get("customerId"), state=call.params.get("state"),
                          edition=call.params.get("edition"))
        return Reply(200, _paged(found, page, license_json))

    async def create_license(call):
        b = call.body
        lic, key = await run(licenses.issue_license, uow(call), clock, license_service, call.caller,
                             customer_id=b["customerId"], contract_id=b["contractId"], edition=b["edition"],
                             external_billing_ref=b.get("externalBillingRef", ""), metadata=b.get("metadata", ""))
        return Reply(201, {"license": license_json(lic), "key": key})

    async def get_license(call):
        return Reply(200, license_json(await run(licenses.get_license, uow(call), call.caller,
                                                 call.params["licenseId"])))

    def change(use_case, *extra):
        async def handler(call):
            args = [call.body[name] for name in extra]
            lic = await run(use_case, uow(call), clock, license_service, call.caller, call.params["licenseId"],
                            *args)
            return Reply(200, license_json(lic))

        return handler

    # --- transfers -------------------------------------------------------------------------

    async def list_transfers(call):
        page = _page(call.params)
        found = await run(transfers.list_transfers, uow(call), call.caller, page,
                          license_id=call.params.get("licenseId"))
        return Reply(200, _paged(found, page, transfer_json))

    async def create_transfer(call):
        b = call.body
        transfer, moved = await run(
            transfers.transfer_license, uow(call), clock, call.caller, license_id=b["licenseId"],
            to_partner_id=b["toPartnerId"], to_customer_id=b["toCustomerId"], to_contract_id=b["toContractId"],
            reason=b.get("reason", ""), effective_at=_effective(b.get("effectiveDate")))
        await run(transfers.sync_transfer, uow(call), license_service, transfer, moved)
        return Reply(201, {"status": "completed", "transfer": transfer_json(transfer)})

    return {
        "listCustomers": list_customers, "createCustomer": create_customer, "getCustomer": get_customer,
        "updateCustomer": update_customer, "deleteCustomer": delete_customer,
        "listContacts": list_contacts, "createContact": create_contact, "updateContact": update_contact,
        "deleteContact": delete_contact, "listNotes": list_notes, "createNote": create_note,
        "listActivity": list_activity, "getActivitySummary": activity_summary,
        "exportActivity": export_activity,
        "listLicenses": list_licenses, "createLicense": create_license, "getLicense": get_license,
        "suspendLicense": change(licenses.suspend_license), "resumeLicense": change(licenses.resume_license),
        "terminateLicense": change(licenses.terminate_license),
        "changeLicenseEdition": change(licenses.change_edition, "edition"),
        "listTransfers": list_transfers, "createTransfer": create_transfer,
    }
