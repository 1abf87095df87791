"""Partner API: customers, contacts and notes, every rule and error row."""
from __future__ import annotations

import json

import pytest

from tests.support.partners import UUID_RE

FULL = {
    "externalRef": "crm:42", "name": "Globex", "legalName": "Globex Corporation", "vatId": "DE123456789",
    "email": "billing@globex.example", "phone": "+49 30 1234", "billingStreet": "Main St 1",
    "billingPostalCode": "10115", "billingCity": "Berlin", "billingRegion": "BE", "billingCountry": "DE",
    "postalStreet": "PO Box 7", "postalPostalCode": "10117", "postalCity": "Berlin", "postalRegion": "BE",
    "postalCountry": "", "website": "https://globex.example", "ownerEmail": "owner@globex.example",
    "status": "prospect",
}


def test_create_with_every_field_and_read_back(acme):
    created = acme.customer(**{k: v for k, v in FULL.items() if k != "name"}, name="Globex")
    assert UUID_RE.match(created["id"]) and created["humanId"].startswith("C-")
    assert created["partnerId"] == acme.id
    for key, value in FULL.items():
        assert created[key] == value, key
    assert acme.call("GET", f"/v1/customers/{created['id']}", expect=200).json == created


def test_defaults_and_ignored_notes(acme):
    created = acme.customer("Initech", notes="should be ignored", author="x")
    assert created["status"] == "active" and created["email"] == "" and "notes" not in created
    patched = acme.call("PATCH", f"/v1/customers/{created['id']}", json_body={"notes": "ignored", "phone": "1"},
                        expect=200).json
    assert patched["phone"] == "1" and "notes" not in patched


def test_patch_changes_only_what_is_sent_and_never_the_human_id(acme):
    created = acme.customer("Initech", email="a@example.com", externalRef="ext-1")
    patched = acme.call("PATCH", f"/v1/customers/{created['id']}",
                        json_body={"status": "churned", "billingCountry": "FR", "humanId": "C-1"}, expect=200).json
    assert patched["status"] == "churned" and patched["billingCountry"] == "FR"
    assert patched["email"] == "a@example.com" and patched["externalRef"] == "ext-1"
    assert patched["humanId"] == created["humanId"]


@pytest.mark.parametrize("body, field", [
    ({"name": "x", "status": "gone"}, "status"),
    ({"name": "x", "billingCountry": "de"}, "billingCountry"),
    ({"name": "x", "postalCountry": "DEU"}, "postalCountry"),
    ({"name": "x", "billingCountry": "D1"}, "billingCountry"),
    ({"name": ""}, "name"),
    ({"name": "   "}, "name"),
    ({}, "name"),
    ({"name": 5}, "name"),
    ({"name": "x", "email": 7}, "email"),
    ({"name": "x", "partnerId": "not-a-uuid"}, "partnerId"),
])
def test_create_rejects_bad_fields(acme, body, field):
    result = acme.call("POST", "/v1/customers", json_body=body, expect=422)
    assert result.json["error"]["code"] == "unprocessable-entity" and field in result.json["error"]["message"]
    assert acme.call("GET", "/v1/customers").json["data"] == []


@pytest.mark.parametrize("body, field", [
    ({"status": "gone"}, "status"), ({"billingCountry": "de"}, "billingCountry"), ({"name": " "}, "name"),
])
def test_patch_rejects_bad_fields_and_changes_nothing(acme, body, field):
    created = acme.customer("Initech", status="prospect")
    result = acme.call("PATCH", f"/v1/customers/{created['id']}", json_body=body, expect=422)
    assert field in result.json["error"]["message"]
    assert acme.call("GET", f"/v1/customers/{created['id']}").json == created


def test_customer_under_a_sub_reseller(acme, reseller_factory):
    sub = reseller_factory("Sub", parent=acme)
    other = reseller_factory("Other")
    created = acme.customer("Deep", partnerId=sub.id)
    assert created["partnerId"] == sub.id
    assert sub.call("GET", f"/v1/customers/{created['id']}", expect=200).json["id"] == created["id"]
    acme.call("POST", "/v1/customers", json_body={"name": "x", "partnerId": other.id}, expect=404)
    acme.call("POST", "/v1/customers", json_body={"name": "x", "partnerId": "0d1f0c2a-0000-4000-8000-0000000000aa"},
              expect=404)
    sub.call("POST", "/v1/customers", json_body={"name": "x", "partnerId": acme.id}, expect=404)  # upward


def test_human_ids_are_unique_and_never_accepted(acme, reseller_factory):
    other = reseller_factory("Other")
    ids = {acme.customer(f"c{i}")["humanId"] for i in range(3)} | {other.customer("o")["humanId"]}
    assert len(ids) == 4
    created = acme.customer("x")
    acme.call("GET", f"/v1/customers/{created['humanId']}", expect=422)


def test_list_pagination_filters_and_order(acme, clock):
    made = []
    for i in range(5):
        clock.advance(1)
        made.append(acme.customer(f"c{i}", status="prospect" if i % 2 else "active", externalRef=f"r{i}"))
    listed = acme.call("GET", "/v1/customers", expect=200).json
    assert [c["id"] for c in listed["data"]] == [c["id"] for c in reversed(made)]  # newest first
    assert listed["limit"] == 50 and listed["offset"] == 0
    page = acme.call("GET", "/v1/customers", params={"limit": "2", "offset": "1"}, expect=200).json
    assert [c["id"] for c in page["data"]] == [made[3]["id"], made[2]["id"]] and page["limit"] == 2
    for bad in ("0", "201", "-1", "abc"):
        assert acme.call("GET", "/v1/customers", params={"limit": bad}, expect=200).json["limit"] == 50
    for bad in ("-1", "abc", "1.5"):
        acme.call("GET", "/v1/customers", params={"offset": bad}, expect=422)
    prospects = acme.call("GET", "/v1/customers", params={"status": "prospect"}).json["data"]
    assert {c["id"] for c in prospects} == {made[1]["id"], made[3]["id"]}
    assert [c["id"] for c in acme.call("GET", "/v1/customers", params={"externalRef": "r4"}).json["data"]] == \
        [made[4]["id"]]
    acme.call("GET", "/v1/customers", params={"status": "gone"}, expect=422)


def test_delete_customer(acme):
    created = acme.customer("Soon gone")
    acme.call("DELETE", f"/v1/customers/{created['id']}", expect=204)
    acme.call("GET", f"/v1/customers/{created['id']}", expect=404)
    acme.call("DELETE", f"/v1/customers/{created['id']}", expect=404)
    assert acme.call("GET", "/v1/customers").json["data"] == []


def test_delete_refused_while_a_license_is_live(acme, world, store, clock):
    from core.partner import licenses

    customer = acme.customer("Licensed")
    lic = acme.license(customer)["license"]
    result = acme.call("DELETE", f"/v1/customers/{customer['id']}", expect=409)
    assert result.json["error"]["code"] == "conflict"
    acme.call("POST", f"/v1/licenses/{lic['id']}/suspend", expect=200)
    acme.call("DELETE", f"/v1/customers/{customer['id']}", expect=409)
    licenses.set_state(store.uow(), clock, lic["id"], "expired")
    acme.call("DELETE", f"/v1/customers/{customer['id']}", expect=204)


def test_delete_allowed_when_licenses_are_terminated(acme):
    customer = acme.customer("Licensed")
    lic = acme.license(customer)["license"]
    acme.call("POST", f"/v1/licenses/{lic['id']}/terminate", expect=200)
    acme.call("DELETE", f"/v1/customers/{customer['id']}", expect=204)


# --- contacts -----------------------------------------------------------------------------


def _contacts(acme, customer):
    return acme.call("GET", f"/v1/customers/{customer['id']}/contacts", expect=200).json


def test_contacts_primary_first_and_demotion(acme, clock):
    customer = acme.customer()
    base = f"/v1/customers/{customer['id']}/contacts"
    first = acme.call("POST", base, json_body={"firstName": "Ada", "isPrimary": True}, expect=201).json
    assert first["humanId"].startswith("P-") and first["isPrimary"] and first["customerId"] == customer["id"]
    clock.advance(1)
    second = acme.call("POST", base, json_body={"lastName": "Hopper", "email": "g@h.example"}, expect=201).json
    clock.advance(1)
    third = acme.call("POST", base, json_body={"firstName": "Linus", "isPrimary": True}, expect=201).json
    listed = _contacts(acme, customer)
    assert [c["id"] for c in listed] == [third["id"], first["id"], second["id"]]
    assert [c["isPrimary"] for c in listed] == [True, False, False]
    promoted = acme.call("PATCH", f"{base}/{second['id']}", json_body={"isPrimary": True}, expect=200).json
    assert promoted["isPrimary"] and promoted["email"] == "g@h.example"
    assert [c["id"] for c in _contacts(acme, customer) if c["isPrimary"]] == [second["id"]]


def test_contact_patch_changes_only_the_fields_sent(acme):
    customer = acme.customer()
    base = f"/v1/customers/{customer['id']}/contacts"
    contact = acme.call("POST", base, json_body={"firstName": "Ada", "lastName": "Lovelace", "title": "Dr",
                                                 "locale": "en-GB", "notes": "prefers email"}, expect=201).json
    patched = acme.call("PATCH", f"{base}/{contact['id']}", json_body={"phone": "+44 1"}, expect=200).json
    assert patched["phone"] == "+44 1" and patched["title"] == "Dr" and patched["notes"] == "prefers email"
    assert patched["humanId"] == contact["humanId"]
    acme.call("PATCH", f"{base}/{contact['id']}", json_body={"firstName": "", "lastName": ""}, expect=422)
    acme.call("PATCH", f"{base}/{contact['id']}", json_body={"isPrimary": "yes"}, expect=422)


@pytest.mark.parametrize("body", [{}, {"firstName": ""}, {"firstName": " ", "lastName": ""}, {"title": "Dr"},
                                  {"firstName": 1}])
def test_contact_needs_a_name(acme, body):
    customer = acme.customer()
    result = acme.call("POST", f"/v1/customers/{customer['id']}/contacts", json_body=body, expect=422)
    assert result.json["error"]["code"] == "unprocessable-entity"
    assert _contacts(acme, customer) == []


def test_contact_of_another_customer_is_404(acme):
    one, two = acme.customer("one"), acme.customer("two")
    contact = acme.call("POST", f"/v1/customers/{one['id']}/contacts", json_body={"firstName": "A"},
                        expect=201).json
    acme.call("PATCH", f"/v1/customers/{two['id']}/contacts/{contact['id']}", json_body={"title": "x"},
              expect=404)
    acme.call("DELETE", f"/v1/customers/{two['id']}/contacts/{contact['id']}", expect=404)
    acme.call("DELETE", f"/v1/customers/{one['id']}/contacts/{contact['id']}", expect=204)
    acme.call("DELETE", f"/v1/customers/{one['id']}/contacts/{contact['id']}", expect=404)
    acme.call("DELETE", f"/v1/customers/{one['id']}/contacts/nope", expect=422)


def test_the_database_refuses_two_primaries(acme, store):
    import peewee

    customer = acme.customer()
    base = f"/v1/customers/{customer['id']}/contacts"
    a = acme.call("POST", base, json_body={"firstName": "A", "isPrimary": True}, expect=201).json
    b = acme.call("POST", base, json_body={"firstName": "B"}, expect=201).json
    with pytest.raises(peewee.IntegrityError):
        with store.db.connection_context():
            store.models.Contact.update(is_primary=True).where(store.models.Contact.id == b["id"]).execute()
    assert [c["id"] for c in _contacts(acme, customer) if c["isPrimary"]] == [a["id"]]


# --- notes ---------------------------------------------------------------------------------


def test_notes_are_appended_newest_first_with_the_partner_as_author(acme, clock):
    customer = acme.customer()
    base = f"/v1/customers/{customer['id']}/notes"
    for i in range(55):
        clock.advance(1)
        note = acme.call("POST", base, json_body={"body": f"note {i}", "author": "mallory"}, expect=201).json
        assert note["author"] == acme.id and note["customerId"] == customer["id"]
    listed = acme.call("GET", base, expect=200).json
    assert len(listed) == 50 and listed[0]["body"] == "note 54" and listed[-1]["body"] == "note 5"


@pytest.mark.parametrize("body", [{"body": ""}, {"body": "  \n\t"}, {}, {"body": 3}])
def test_empty_notes_are_422(acme, body):
    customer = acme.customer()
    acme.call("POST", f"/v1/customers/{customer['id']}/notes", json_body=body, expect=422)
    assert acme.call("GET", f"/v1/customers/{customer['id']}/notes").json == []


def test_notes_have_no_update_or_delete_path(acme, store, client):
    import peewee

    from app.storage.partner.licensing import PeeweeNotes

    customer = acme.customer()
    base = f"/v1/customers/{customer['id']}/notes"
    note = acme.call("POST", base, json_body={"body": "kept"}, expect=201).json
    for method in ("PATCH", "DELETE", "PUT"):
        acme.call(method, base, json_body={"body": "x"} if method != "DELETE" else None, expect=405)
        acme.call(method, f"{base}/{note['id']}", expect=404)
    assert not any(hasattr(PeeweeNotes, name) for name in ("update", "delete", "remove", "edit"))
    for statement in ("UPDATE note SET body = 'changed'", "DELETE FROM note"):
        with pytest.raises(peewee.DatabaseError):
            with store.db.atomic():
                store.db.execute_sql(statement)
    assert acme.call("GET", base).json[0]["body"] == "kept"


def test_read_scope_cannot_write_customers(acme, world):
    _, reader = world.token(acme.partner, scope="read")
    customer = acme.customer()
    for method, path, body in [("POST", "/v1/customers", {"name": "x"}),
                               ("PATCH", f"/v1/customers/{customer['id']}", {"name": "y"}),
                               ("DELETE", f"/v1/customers/{customer['id']}", None),
                               ("POST", f"/v1/customers/{customer['id']}/contacts", {"firstName": "x"}),
                               ("POST", f"/v1/customers/{customer['id']}/notes", {"body": "x"})]:
        acme.client.request(method, path, token=reader, json_body=body, expect=403)
    acme.client.get(f"/v1/customers/{customer['id']}", token=reader, expect=200)


def test_malformed_customer_bodies(acme):
    acme.call("POST", "/v1/customers", body="{", headers={"Content-Type": "application/json"}, expect=400)
    acme.call("POST", "/v1/customers", body=json.dumps({"name": "x"}), headers={"Content-Type": "text/plain"},
              expect=415)
