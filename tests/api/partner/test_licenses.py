"""Partner API: licenses through the embedded license service, the state rules, editions."""
from __future__ import annotations

import pytest

from core.partner import licenses as license_use_cases


def _activity(acme, customer, **params):
    return acme.call("GET", f"/v1/customers/{customer['id']}/activity", params=params or None, expect=200).json["data"]


def test_issue_returns_the_key_once_and_a_verifiable_signature(acme, app):
    from plugins.license_embedded import verify_key

    customer = acme.customer()
    created = acme.license(customer, externalBillingRef="inv-7", metadata="rack 4")
    lic, key = created["license"], created["key"]
    assert lic["humanId"].startswith("L-") and lic["state"] == "active" and lic["edition"] == "web-host"
    assert lic["partnerId"] == acme.id and lic["customerId"] == customer["id"]
    assert lic["contractId"] == acme.contract.id
    assert lic["externalBillingRef"] == "inv-7" and lic["metadata"] == "rack 4" and lic["terminatedAt"] is None
    assert lic["keyMasked"] == "\u2026" + key[-6:]
    service = app.parts.license_service
    payload = verify_key(key, service.public_key())
    assert payload["lid"] == lic["licenseServiceLicenseId"] and payload["policy"] == "web-host"
    with pytest.raises(ValueError):
        verify_key(key[:-2] + ("AA" if not key.endswith("AA") else "BB"), service.public_key())
    fetched = acme.call("GET", f"/v1/licenses/{lic['id']}", expect=200).json
    assert fetched == lic and key not in str(acme.call("GET", "/v1/licenses").json)
    [event] = _activity(acme, customer)
    assert event["event"] == "license.issued" and event["actor"] == acme.id and event["licenseId"] == lic["id"]


@pytest.mark.parametrize("body, status", [
    ({"contractId": "x"}, 422),
    ({"customerId": "not-a-uuid"}, 422),
    ({"edition": "enterprise-ultra"}, 422),
    ({"edition": ""}, 422),
    ({"customerId": "0d1f0c2a-0000-4000-8000-0000000000aa"}, 404),
    ({"contractId": "0d1f0c2a-0000-4000-8000-0000000000aa"}, 404),
])
def test_issue_rejects_bad_references(acme, body, status):
    customer = acme.customer()
    request = {"customerId": customer["id"], "contractId": acme.contract.id, "edition": "web-pro", **body}
    acme.call("POST", "/v1/licenses", json_body=request, expect=status)
    assert acme.call("GET", "/v1/licenses").json["data"] == []


def test_customer_and_contract_of_different_partners_is_422(acme, reseller_factory):
    sub = reseller_factory("Sub", parent=acme)
    customer = acme.customer()
    result = acme.call("POST", "/v1/licenses", json_body={"customerId": customer["id"], "contractId": sub.contract.id,
                                                          "edition": "web-host"}, expect=422)
    assert "contractId" in result.json["error"]["message"]


def test_foreign_customer_or_contract_is_404(acme, reseller_factory):
    other = reseller_factory("Other")
    theirs = other.customer()
    mine = acme.customer()
    acme.call("POST", "/v1/licenses", json_body={"customerId": theirs["id"], "contractId": acme.contract.id,
                                                 "edition": "web-host"}, expect=404)
    acme.call("POST", "/v1/licenses", json_body={"customerId": mine["id"], "contractId": other.contract.id,
                                                 "edition": "web-host"}, expect=404)


def test_parent_issues_for_a_sub_resellers_customer(acme, reseller_factory):
    sub = reseller_factory("Sub", parent=acme)
    customer = sub.customer()
    lic = acme.license(customer, contract=sub.contract)["license"]
    assert lic["partnerId"] == sub.id


def test_state_machine(acme, app, store, clock):
    service = app.parts.license_service
    customer = acme.customer()
    lic = acme.license(customer)["license"]
    path = f"/v1/licenses/{lic['id']}"

    def state():
        return service.status(lic["licenseServiceLicenseId"])["status"]

    assert acme.call("POST", f"{path}/suspend", expect=200).json["state"] == "suspended" and state() == "suspended"
    assert acme.call("POST", f"{path}/suspend", expect=200).json["state"] == "suspended"  # no-op
    acme.call("POST", f"{path}/edition", json_body={"edition": "web-pro"}, expect=409)
    assert acme.call("POST", f"{path}/resume", expect=200).json["state"] == "active" and state() == "active"
    assert acme.call("POST", f"{path}/resume", expect=200).json["state"] == "active"  # no-op
    changed = acme.call("POST", f"{path}/edition", json_body={"edition": "power-user"}, expect=200).json
    assert changed["edition"] == "power-user" and service.status(lic["licenseServiceLicenseId"])["policy"] == \
        "power-user"
    acme.call("POST", f"{path}/edition", json_body={"edition": "power-user"}, expect=200)  # same: no-op
    acme.call("POST", f"{path}/edition", json_body={"edition": "nonsense"}, expect=422)
    terminated = acme.call("POST", f"{path}/terminate", expect=200).json
    assert terminated["state"] == "terminated" and terminated["terminatedAt"] == terminated["terminatedAt"]
    assert terminated["terminatedAt"] is not None and state() == "revoked"
    assert acme.call("POST", f"{path}/terminate", expect=200).json["state"] == "terminated"  # no-op
    for op, body in (("suspend", None), ("resume", None), ("edition", {"edition": "web-pro"})):
        result = acme.call("POST", f"{path}/{op}", json_body=body, expect=409)
        assert result.json["error"]["code"] == "conflict"
    events = [e["event"] for e in reversed(_activity(acme, customer))]
    assert events == ["license.issued", "license.suspended", "license.resumed", "license.edition_changed",
                      "license.terminated"]


def test_trial_and_expired_rules(acme, store, clock):
    customer = acme.customer()
    lic = acme.license(customer)["license"]
    path = f"/v1/licenses/{lic['id']}"
    license_use_cases.set_state(store.uow(), clock, lic["id"], "trial")
    acme.call("POST", f"{path}/resume", expect=409)
    acme.call("POST", f"{path}/edition", json_body={"edition": "web-pro"}, expect=409)
    assert acme.call("POST", f"{path}/suspend", expect=200).json["state"] == "suspended"
    license_use_cases.set_state(store.uow(), clock, lic["id"], "expired")
    acme.call("POST", f"{path}/suspend", expect=409)
    acme.call("POST", f"{path}/resume", expect=409)
    assert acme.call("POST", f"{path}/terminate", expect=200).json["state"] == "terminated"
    changes = _activity(acme, customer, event="license.state_changed")
    assert [e["data"] for e in reversed(changes)] == [{"from": "active", "to": "trial"},
                                                      {"from": "suspended", "to": "expired"}]
    assert all(e["actor"] is None for e in changes)
    assert len(_activity(acme, customer, actor="")) == 2


def test_list_filters_and_pagination(acme, clock):
    one, two = acme.customer("one"), acme.customer("two")
    made = []
    for i, customer in enumerate([one, two, one]):
        clock.advance(1)
        made.append(acme.license(customer, edition=["web-host", "web-pro", "web-host"][i])["license"])
    acme.call("POST", f"/v1/licenses/{made[0]['id']}/suspend", expect=200)
    listed = acme.call("GET", "/v1/licenses", expect=200).json
    assert [x["id"] for x in listed["data"]] == [m["id"] for m in reversed(made)]
    by_customer = acme.call("GET", "/v1/licenses", params={"customerId": one["id"]}).json["data"]
    assert {x["id"] for x in by_customer} == {made[0]["id"], made[2]["id"]}
    assert [x["id"] for x in acme.call("GET", "/v1/licenses", params={"state": "suspended"}).json["data"]] == \
        [made[0]["id"]]
    assert [x["id"] for x in acme.call("GET", "/v1/licenses", params={"edition": "web-pro"}).json["data"]] == \
        [made[1]["id"]]
    page = acme.call("GET", "/v1/licenses", params={"limit": "1", "offset": "1"}).json
    assert [x["id"] for x in page["data"]] == [made[1]["id"]]
    acme.call("GET", "/v1/licenses", params={"state": "sleeping"}, expect=422)
    acme.call("GET", "/v1/licenses", params={"customerId": "C-1001"}, expect=422)
    acme.call("GET", "/v1/licenses", params={"offset": "-5"}, expect=422)
    assert acme.call("GET", "/v1/licenses", params={"limit": "500"}).json["limit"] == 50


def test_license_ids_must_be_uuids(acme):
    for op in ("", "/suspend", "/resume", "/terminate"):
        method = "GET" if not op else "POST"
        acme.call(method, f"/v1/licenses/L-1001{op}", expect=422)
        acme.call(method, f"/v1/licenses/0d1f0c2a-0000-4000-8000-0000000000aa{op}", expect=404)


def test_read_token_cannot_change_licenses(acme, world):
    _, reader = world.token(acme.partner, scope="read")
    lic = acme.license(acme.customer())["license"]
    for op in ("suspend", "resume", "terminate"):
        acme.client.post(f"/v1/licenses/{lic['id']}/{op}", token=reader, expect=403)
    acme.client.post(f"/v1/licenses/{lic['id']}/edition", token=reader, json_body={"edition": "web-pro"},
                     expect=403)
    acme.client.post("/v1/licenses", token=reader, json_body={}, expect=403)
    assert acme.client.get(f"/v1/licenses/{lic['id']}", token=reader, expect=200).json["state"] == "active"
