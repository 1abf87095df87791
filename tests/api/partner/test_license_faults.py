"""The license service failing: the API answers 503 and the database holds no half-done
change and no ledger event. Uses the keygen plugin against a fake service on loopback."""
from __future__ import annotations

import pytest

from tests.support.contract_client import ContractClient
from tests.fixtures.fake_keygen import FakeKeygen


@pytest.fixture
def keygen():
    with FakeKeygen(account="slipway", token="kg-secret") as fake:
        yield fake


@pytest.fixture
def reseller(make_app, world, keygen):
    from tests.support.partners import Reseller

    app = make_app(license_service="keygen", settings={
        "SLIPWAY_KEYGEN_URL": keygen.url, "SLIPWAY_KEYGEN_ACCOUNT": "slipway", "SLIPWAY_KEYGEN_TOKEN": "kg-secret",
        "SLIPWAY_KEYGEN_TIMEOUT": "2"})
    partner = world.partner("Acme")
    _, secret = world.token(partner)
    return Reseller(ContractClient(app), world, partner, secret, world.contract(partner))


def _counts(store):
    with store.db.connection_context():
        return (store.models.License.select().count(), store.models.LedgerEvent.select().count(),
                store.models.Transfer.select().count())


@pytest.mark.parametrize("mode", ["500", "drop"])
def test_issue_failure_leaves_nothing(reseller, keygen, store, mode):
    customer = reseller.customer()
    keygen.fail_next(1, mode)
    result = reseller.call("POST", "/v1/licenses", json_body={"customerId": customer["id"],
                                                              "contractId": reseller.contract.id,
                                                              "edition": "web-pro"}, expect=503)
    assert result.json["error"]["code"] == "service-unavailable"
    assert "kg-secret" not in result.text
    assert _counts(store) == (0, 0, 0)
    assert reseller.call("GET", f"/v1/customers/{customer['id']}/activity").json["data"] == []
    # and it works once the service is back, through the policy of the edition map
    created = reseller.license(customer, edition="web-pro")
    assert keygen.licenses[created["license"]["licenseServiceLicenseId"]].policy == "web-pro"


@pytest.mark.parametrize("operation, body", [("suspend", None), ("terminate", None),
                                             ("edition", {"edition": "power-user"})])
def test_change_failure_leaves_the_license_and_ledger_as_they_were(reseller, keygen, store, operation, body):
    customer = reseller.customer()
    lic = reseller.license(customer)["license"]
    before = _counts(store)
    keygen.fail_next(1)
    reseller.call("POST", f"/v1/licenses/{lic['id']}/{operation}", json_body=body, expect=503)
    assert reseller.call("GET", f"/v1/licenses/{lic['id']}").json == lic
    assert _counts(store) == before
    assert keygen.licenses[lic["licenseServiceLicenseId"]].status == "ACTIVE"
    after = reseller.call("POST", f"/v1/licenses/{lic['id']}/{operation}", json_body=body, expect=200).json
    assert after != lic


def test_resume_failure(reseller, keygen, store):
    lic = reseller.license(reseller.customer())["license"]
    reseller.call("POST", f"/v1/licenses/{lic['id']}/suspend", expect=200)
    before = _counts(store)
    keygen.fail_next(1, "drop")
    reseller.call("POST", f"/v1/licenses/{lic['id']}/resume", expect=503)
    assert reseller.call("GET", f"/v1/licenses/{lic['id']}").json["state"] == "suspended"
    assert _counts(store) == before


def test_transfer_completes_when_the_metadata_sync_fails_and_the_failure_is_recorded(reseller, keygen, store,
                                                                                   world):
    from tests.support.partners import Reseller

    child_partner = world.partner("Child", parent=reseller.partner)
    child = Reseller(reseller.client, world, child_partner, None, world.contract(child_partner))
    lic = reseller.license(reseller.customer())["license"]
    target = reseller.call("POST", "/v1/customers", json_body={"name": "t", "partnerId": child.id}, expect=201).json
    keygen.fail_all()
    result = reseller.call("POST", "/v1/transfers", json_body={
        "licenseId": lic["id"], "toPartnerId": child.id, "toCustomerId": target["id"],
        "toContractId": child.contract.id}, expect=201).json
    keygen.heal()
    assert result["status"] == "completed"
    assert reseller.call("GET", f"/v1/licenses/{lic['id']}").json["customerId"] == target["id"]
    with store.db.connection_context():
        row = store.models.Transfer.get_by_id(result["transfer"]["id"])
        assert row.sync_error and "LicenseServiceError" in row.sync_error and "kg-secret" not in row.sync_error
        events = [e.event for e in store.models.LedgerEvent.select().order_by(store.models.LedgerEvent.id)]
    assert events == ["license.issued", "license.transferred_out", "license.transferred_in"]
    # the metadata at the service still names the old owner: that is what the operator is told
    assert keygen.licenses[lic["licenseServiceLicenseId"]].metadata["customerId"] == lic["customerId"]


def test_transfer_syncs_metadata_when_the_service_answers(reseller, keygen, world):
    lic = reseller.license(reseller.customer())["license"]
    target = reseller.customer("new home")
    reseller.call("POST", "/v1/transfers", json_body={
        "licenseId": lic["id"], "toPartnerId": reseller.id, "toCustomerId": target["id"],
        "toContractId": reseller.contract.id}, expect=201)
    assert keygen.licenses[lic["licenseServiceLicenseId"]].metadata["customerId"] == target["id"]
