"""Partner API: transfers, the activity ledger (list, summary, CSV export) and subtree scoping."""
from __future__ import annotations

import csv
import io
from datetime import timedelta

import pytest


@pytest.fixture
def family(reseller_factory):
    parent = reseller_factory("Parent")
    child = reseller_factory("Child", parent=parent)
    return parent, child


def _transfer(actor, lic, target, customer, contract=None, expect=201, **extra):
    body = {"licenseId": lic["id"], "toPartnerId": target.id, "toCustomerId": customer["id"],
            "toContractId": (contract or target.contract).id, "reason": "merger", **extra}
    return actor.call("POST", "/v1/transfers", json_body=body, expect=expect)


def test_transfer_moves_owner_keeps_key_and_records_both_ends(family, clock, app):
    parent, child = family
    old_customer = parent.customer("old")
    created = parent.license(old_customer)
    lic = created["license"]
    new_customer = child.customer("new")
    clock.advance(3600)
    result = _transfer(parent, lic, child, new_customer).json
    assert result["status"] == "completed"
    record = result["transfer"]
    assert record["humanId"].startswith("T-") and record["createdBy"] == parent.id
    assert (record["fromPartnerId"], record["fromCustomerId"], record["fromContractId"]) == \
        (parent.id, old_customer["id"], parent.contract.id)
    assert (record["toPartnerId"], record["toCustomerId"], record["toContractId"]) == \
        (child.id, new_customer["id"], child.contract.id)
    assert record["effectiveDate"] == clock.now().date().isoformat() and record["reason"] == "merger"
    moved = parent.call("GET", f"/v1/licenses/{lic['id']}", expect=200).json
    assert moved["partnerId"] == child.id and moved["customerId"] == new_customer["id"]
    assert moved["keyMasked"] == lic["keyMasked"] and moved["humanId"] == lic["humanId"]
    assert moved["licenseServiceLicenseId"] == lic["licenseServiceLicenseId"]
    out = parent.call("GET", f"/v1/customers/{old_customer['id']}/activity").json["data"]
    into = child.call("GET", f"/v1/customers/{new_customer['id']}/activity").json["data"]
    assert [e["event"] for e in out] == ["license.transferred_out", "license.issued"]
    assert [e["event"] for e in into] == ["license.transferred_in"]
    assert into[0]["partnerId"] == child.id and out[0]["partnerId"] == parent.id
    metadata = app.parts.license_service.status(lic["licenseServiceLicenseId"])["metadata"]
    assert metadata["customerId"] == new_customer["id"] and metadata["partnerId"] == child.id
    listed = child.call("GET", "/v1/transfers", expect=200).json["data"]
    assert [t["id"] for t in listed] == [record["id"]]
    assert parent.call("GET", "/v1/transfers", params={"licenseId": lic["id"]}).json["data"][0] == record


def test_effective_date_rules(family, clock):
    parent, child = family
    lic = parent.license(parent.customer())["license"]
    target = child.customer()
    issued = clock.now()
    clock.advance(3 * 86400)
    for when in (issued - timedelta(days=1), clock.now() + timedelta(days=1)):
        result = _transfer(parent, lic, child, target, expect=422, effectiveDate=when.isoformat())
        assert "effectiveDate" in result.json["error"]["message"]
    _transfer(parent, lic, child, target, expect=422, effectiveDate="yesterday")
    # normalized to its UTC date: 23:30 at UTC-05:00 is the next day in UTC
    local = (issued + timedelta(days=1)).replace(hour=23, minute=30).astimezone(
        __import__("datetime").timezone(timedelta(hours=-5)))
    record = _transfer(parent, lic, child, target, effectiveDate=local.isoformat()).json["transfer"]
    assert record["effectiveDate"] == (issued + timedelta(days=1)).date().isoformat()


def test_transfer_conflicts_and_mismatches(family, reseller_factory, store, clock):
    parent, child = family
    stranger = reseller_factory("Stranger")
    customer = parent.customer()
    lic = parent.license(customer)["license"]
    child_customer = child.customer()
    # to the current owner, customer and contract
    _transfer(parent, lic, parent, customer, expect=409)
    # target customer or contract not of toPartnerId
    result = _transfer(parent, lic, child, customer, expect=422)
    assert "toCustomerId" in result.json["error"]["message"]
    result = _transfer(parent, lic, child, child_customer, contract=parent.contract, expect=422)
    assert "toContractId" in result.json["error"]["message"]
    # outside the subtree: 404
    _transfer(parent, lic, stranger, stranger.customer(), expect=404)
    _transfer(child, lic, child, child_customer, expect=404)  # the license is above the child
    for field in ("licenseId", "toPartnerId", "toCustomerId", "toContractId"):
        body = {"licenseId": lic["id"], "toPartnerId": child.id, "toCustomerId": child_customer["id"],
                "toContractId": child.contract.id, field: "0d1f0c2a-0000-4000-8000-0000000000aa"}
        parent.call("POST", "/v1/transfers", json_body=body, expect=404)
        body[field] = "nope"
        parent.call("POST", "/v1/transfers", json_body=body, expect=422)
    parent.call("POST", f"/v1/licenses/{lic['id']}/terminate", expect=200)
    _transfer(parent, lic, child, child_customer, expect=409)
    assert parent.call("GET", "/v1/transfers").json["data"] == []


def test_transfer_list_covers_either_end_and_validates(family, reseller_factory):
    parent, child = family
    lic = child.license(child.customer())["license"]
    _transfer(parent, lic, parent, parent.customer())
    assert len(child.call("GET", "/v1/transfers").json["data"]) == 1  # from-end in its subtree
    assert len(parent.call("GET", "/v1/transfers").json["data"]) == 1
    assert reseller_factory("Stranger").call("GET", "/v1/transfers").json["data"] == []
    parent.call("GET", "/v1/transfers", params={"licenseId": "L-1"}, expect=422)
    parent.call("GET", "/v1/transfers", params={"offset": "x"}, expect=422)


# --- activity -------------------------------------------------------------------------------


def test_activity_filters_summary_and_pagination(acme, clock, store):
    from core.partner import licenses as use_cases

    customer = acme.customer()
    lic = acme.license(customer)["license"]
    start = clock.now()
    clock.advance(60)
    acme.call("POST", f"/v1/licenses/{lic['id']}/suspend", expect=200)
    clock.advance(60)
    acme.call("POST", f"/v1/licenses/{lic['id']}/resume", expect=200)
    clock.advance(60)
    use_cases.set_state(store.uow(), clock, lic["id"], "trial")
    base = f"/v1/customers/{customer['id']}/activity"
    events = acme.call("GET", base).json["data"]
    assert [e["event"] for e in events] == ["license.state_changed", "license.resumed", "license.suspended",
                                            "license.issued"]
    assert events == sorted(events, key=lambda e: -e["id"])
    assert [e["event"] for e in acme.call("GET", base, params={"event": "license.resumed"}).json["data"]] == \
        ["license.resumed"]
    assert len(acme.call("GET", base, params={"actor": acme.id}).json["data"]) == 3
    assert [e["event"] for e in acme.call("GET", base, params={"actor": ""}).json["data"]] == \
        ["license.state_changed"]
    window = {"from": (start + timedelta(seconds=60)).isoformat(), "to": (start + timedelta(seconds=120)).isoformat()}
    assert [e["event"] for e in acme.call("GET", base, params=window).json["data"]] == ["license.suspended"]
    page = acme.call("GET", base, params={"limit": "2", "offset": "1"}).json
    assert [e["event"] for e in page["data"]] == ["license.resumed", "license.suspended"]
    for bad in ({"event": "license.exploded"}, {"from": "last tuesday"}, {"to": "2026-13-01T00:00:00Z"},
                {"offset": "-1"}):
        acme.call("GET", base, params=bad, expect=422)
    summary = acme.call("GET", f"{base}/summary", expect=200).json
    assert summary["customerId"] == customer["id"] and summary["total"] == 4
    assert summary["byEvent"] == {"license.issued": 1, "license.suspended": 1, "license.resumed": 1,
                                  "license.state_changed": 1}
    assert summary["firstAt"] < summary["lastAt"]
    filtered = acme.call("GET", f"{base}/summary", params={"actor": ""}).json
    assert filtered["total"] == 1 and filtered["byEvent"] == {"license.state_changed": 1}
    empty = acme.call("GET", f"{base}/summary", params={"event": "license.transferred_in"}).json
    assert empty == {"customerId": customer["id"], "total": 0, "byEvent": {}, "firstAt": None, "lastAt": None}
    acme.call("GET", f"{base}/summary", params={"event": "nope"}, expect=422)


def test_older_events_without_a_customer_are_found_through_licenses(acme, store, clock):
    customer = acme.customer()
    lic = acme.license(customer)["license"]
    with store.db.connection_context():
        store.models.LedgerEvent.insert(event="license.suspended", at=clock.now(), actor=None,
                                        partner_id=acme.id, customer_id=None, license_id=lic["id"],
                                        data="{}").execute()
    events = acme.call("GET", f"/v1/customers/{customer['id']}/activity").json["data"]
    assert [e["customerId"] for e in events] == [None, customer["id"]]


def test_older_events_without_a_customer_follow_their_license_when_it_moves(family, store, clock):
    """An event written without a customer reference belongs to the activity of its
    license's customer, whoever that is now: after a transfer, the new customer's (list,
    summary and export), no longer the old one's. The event itself is unchanged."""
    parent, child = family
    old, new = parent.customer("old"), child.customer("new")
    lic = parent.license(old)["license"]
    with store.db.connection_context():
        store.models.LedgerEvent.insert(event="license.suspended", at=clock.now(), actor=None,
                                        partner_id=parent.id, customer_id=None, license_id=lic["id"],
                                        data='{"old":true}').execute()

    def legacy(actor, customer):
        base = f"/v1/customers/{customer['id']}/activity"
        listed = [e for e in actor.call("GET", base).json["data"] if e["customerId"] is None]
        summary = actor.call("GET", f"{base}/summary", params={"event": "license.suspended"}).json["total"]
        exported = actor.call("GET", f"{base}/export").text.count('{""old"":true}')
        return len(listed), summary, exported

    assert legacy(parent, old) == (1, 1, 1)
    clock.advance(60)
    _transfer(parent, lic, child, new)
    assert legacy(parent, old) == (0, 0, 0)
    assert legacy(child, new) == (1, 1, 1)
    moved = [e for e in child.call("GET", f"/v1/customers/{new['id']}/activity").json["data"]
             if e["customerId"] is None][0]
    assert (moved["event"], moved["partnerId"], moved["data"]) == ("license.suspended", parent.id, {"old": True})


def test_export_csv_with_truncation_headers(acme, store, clock):
    customer = acme.customer()
    lic = acme.license(customer)["license"]
    with store.db.atomic():
        store.models.LedgerEvent.insert_many(
            [{"event": "license.suspended", "at": clock.now(), "actor": acme.id, "partner_id": acme.id,
              "customer_id": customer["id"], "license_id": lic["id"], "data": '{"n":%d}' % i} for i in range(5200)]
        ).execute()
    base = f"/v1/customers/{customer['id']}/activity/export"
    result = acme.call("GET", base, expect=200)
    assert result.headers["content-type"].startswith("text/csv")
    assert result.headers["x-export-row-limit"] == "5000"
    assert result.headers["x-export-total"] == "5201" and result.headers["x-export-truncated"] == "true"
    rows = list(csv.reader(io.StringIO(result.text)))
    assert rows[0] == ["id", "at", "event", "actor", "partnerId", "customerId", "licenseId", "data"]
    assert len(rows) == 5001 and rows[1][7] == '{"n":5199}'
    ids = [int(r[0]) for r in rows[1:]]
    assert ids == sorted(ids, reverse=True)
    small = acme.call("GET", base, params={"event": "license.issued"}, expect=200)
    assert small.headers["x-export-total"] == "1" and small.headers["x-export-truncated"] == "false"
    assert len(list(csv.reader(io.StringIO(small.text)))) == 2
    acme.call("GET", base, params={"event": "bogus"}, expect=422)


def test_ledger_is_append_only_in_the_database(acme, store):
    import peewee

    acme.license(acme.customer())
    for statement in ("UPDATE ledger_event SET event = 'x'", "DELETE FROM ledger_event"):
        with pytest.raises(peewee.DatabaseError):
            with store.db.atomic():
                store.db.execute_sql(statement)


# --- scoping ----------------------------------------------------------------------------------


def test_two_partners_in_different_subtrees_see_404_for_each_other(reseller_factory):
    alpha, beta = reseller_factory("Alpha"), reseller_factory("Beta")
    things = {}
    for who in (alpha, beta):
        customer = who.customer()
        contact = who.call("POST", f"/v1/customers/{customer['id']}/contacts", json_body={"firstName": "X"},
                           expect=201).json
        lic = who.license(customer)["license"]
        target = who.customer("target")
        transfer = _transfer(who, lic, who, target).json["transfer"]
        things[who.id] = (customer, contact, lic, transfer)
    for me, them in ((alpha, beta), (beta, alpha)):
        customer, contact, lic, transfer = things[them.id]
        c = f"/v1/customers/{customer['id']}"
        for method, path, body in [
            ("GET", c, None), ("PATCH", c, {"name": "x"}), ("DELETE", c, None),
            ("GET", f"{c}/contacts", None), ("POST", f"{c}/contacts", {"firstName": "x"}),
            ("PATCH", f"{c}/contacts/{contact['id']}", {"title": "x"}),
            ("DELETE", f"{c}/contacts/{contact['id']}", None),
            ("GET", f"{c}/notes", None), ("POST", f"{c}/notes", {"body": "x"}),
            ("GET", f"{c}/activity", None), ("GET", f"{c}/activity/summary", None),
            ("GET", f"{c}/activity/export", None),
            ("GET", f"/v1/licenses/{lic['id']}", None), ("POST", f"/v1/licenses/{lic['id']}/suspend", None),
            ("POST", f"/v1/licenses/{lic['id']}/resume", None), ("POST", f"/v1/licenses/{lic['id']}/terminate", None),
            ("POST", f"/v1/licenses/{lic['id']}/edition", {"edition": "web-pro"}),
        ]:
            result = me.call(method, path, json_body=body, expect=404)
            assert result.json == {"error": {"code": "not-found", "message": result.json["error"]["message"]}}
        assert me.call("GET", "/v1/licenses", params={"customerId": customer["id"]}).json["data"] == []
        assert transfer["id"] not in [t["id"] for t in me.call("GET", "/v1/transfers").json["data"]]
        assert customer["id"] not in [x["id"] for x in me.call("GET", "/v1/customers").json["data"]]
        assert lic["id"] not in [x["id"] for x in me.call("GET", "/v1/licenses").json["data"]]
    # and nothing changed for the owners
    for who in (alpha, beta):
        customer, contact, lic, _ = things[who.id]
        assert who.call("GET", f"/v1/licenses/{lic['id']}").json["state"] == "active"
        assert who.call("GET", f"/v1/customers/{customer['id']}/notes").json == []


def test_a_child_cannot_see_its_parents_things(family):
    parent, child = family
    customer = parent.customer()
    child.call("GET", f"/v1/customers/{customer['id']}", expect=404)
    sub_customer = child.customer()
    parent.call("GET", f"/v1/customers/{sub_customer['id']}", expect=200)  # but the parent sees down
