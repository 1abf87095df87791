"""Licenses, transfers and the activity ledger: every change goes through the license
service and the ledger in one transaction; refusals change nothing."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from core.partner import contracts, customers, editions, ledger, licenses, transfers
from core.errors import Conflict, Invalid, NotFound
from core.partner.scope import Page
from core.partner.licenses import LicenseSummary
from ports.licensing import LicenseServiceError
from tests.support.fakes import IntegrityError, caller_of


@pytest.fixture
def world(uow, clock):
    """A root partner with a sub-reseller, each with a customer and a contract."""
    editions.set_edition(uow, clock, "pro", "policy-pro")
    editions.set_edition(uow, clock, "basic", "policy-basic")
    root = caller_of(uow, clock, "Root")
    sub = caller_of(uow, clock, "Sub", parent=root)
    made = {}
    for who in (root, sub):
        made[who.partner.id] = (
            customers.create_customer(uow, clock, who, {"name": f"{who.partner.name} customer"}),
            contracts.create_contract(uow, clock, partner_id=who.partner.id, model="per-day", currency="EUR",
                                      unit_price_cents=100, known_models={"per-day"}))
    return root, sub, made


def _issue(uow, clock, service, world, who=None, edition="pro"):
    root, sub, made = world
    who = who or root
    customer, contract = made[who.partner.id]
    return licenses.issue_license(uow, clock, service, who, customer_id=customer.id, contract_id=contract.id,
                                  edition=edition)


def _events(uow, customer_id):
    with uow:
        return [e.event for e in uow.ledger.for_customer(customer_id, ledger.make_filter(), Page())]


def test_issue_stores_a_masked_key_and_records_the_ledger(uow, clock, service, world):
    root, sub, made = world
    lic, key = _issue(uow, clock, service, world)
    assert key.endswith(lic.key_masked[1:]) and key not in lic.key_masked and lic.key_masked.startswith("\u2026")
    assert (lic.state, lic.human_id, lic.license_service_license_id) == ("active", "L-1001", "svc-1")
    op, policy, metadata = service.calls[0]
    assert (op, policy, metadata["slipwayLicenseId"]) == ("issue", "policy-pro", lic.id)
    with uow:
        (event,) = uow.ledger.for_customer(lic.customer_id, ledger.make_filter(), Page())
    assert (event.event, event.actor, event.data["keyMasked"]) == ("license.issued", root.partner.id, lic.key_masked)
    assert licenses.get_license(uow, root, lic.id) == lic


def test_issue_refusals_store_nothing(uow, clock, service, world):
    root, sub, made = world
    customer, _ = made[root.partner.id]
    _, sub_contract = made[sub.partner.id]
    with pytest.raises(Invalid, match="unknown edition"):
        _issue(uow, clock, service, world, edition="gold")
    with pytest.raises(Invalid, match="different partners"):
        licenses.issue_license(uow, clock, service, root, customer_id=customer.id, contract_id=sub_contract.id,
                               edition="pro")
    with pytest.raises(NotFound):  # the sub-reseller cannot reach its parent's customer
        licenses.issue_license(uow, clock, service, sub, customer_id=customer.id, contract_id=sub_contract.id,
                               edition="pro")
    service.fail.add("issue")
    with pytest.raises(LicenseServiceError):
        _issue(uow, clock, service, world)
    assert licenses.list_licenses(uow, root, Page()) == [] and _events(uow, customer.id) == []


def test_a_failed_store_takes_the_issued_key_back(uow, clock, service, world, monkeypatch):
    root, sub, made = world

    def refuse(lic):
        raise IntegrityError("disk full")

    monkeypatch.setattr(uow.licenses, "add", refuse)
    with pytest.raises(IntegrityError):
        _issue(uow, clock, service, world)
    assert service.ops() == ["issue", "revoke"]
    assert _events(uow, made[root.partner.id][0].id) == []


def test_state_machine(uow, clock, service, world):
    root, *_ = world
    lic, _ = _issue(uow, clock, service, world)
    assert licenses.suspend_license(uow, clock, service, root, lic.id).state == "suspended"
    assert licenses.suspend_license(uow, clock, service, root, lic.id).state == "suspended"  # no-op
    with pytest.raises(Conflict):
        licenses.change_edition(uow, clock, service, root, lic.id, "basic")  # only active licenses
    assert licenses.resume_license(uow, clock, service, root, lic.id).state == "active"
    assert licenses.resume_license(uow, clock, service, root, lic.id).state == "active"  # no-op
    assert licenses.change_edition(uow, clock, service, root, lic.id, "basic").edition == "basic"
    ended = licenses.terminate_license(uow, clock, service, root, lic.id)
    assert ended.state == "terminated" and ended.terminated_at == clock.now()
    for change in (licenses.suspend_license, licenses.resume_license):
        with pytest.raises(Conflict):
            change(uow, clock, service, root, lic.id)
    assert licenses.terminate_license(uow, clock, service, root, lic.id) == ended  # no-op
    assert service.ops() == ["issue", "suspend", "reinstate", "change_policy", "revoke"]
    assert _events(uow, lic.customer_id) == ["license.terminated", "license.edition_changed", "license.resumed",
                                             "license.suspended", "license.issued"]


def test_a_service_refusal_rolls_the_change_back(uow, clock, service, world):
    root, *_ = world
    lic, _ = _issue(uow, clock, service, world)
    service.fail.add("suspend")
    with pytest.raises(LicenseServiceError):
        licenses.suspend_license(uow, clock, service, root, lic.id)
    assert licenses.get_license(uow, root, lic.id).state == "active"
    assert _events(uow, lic.customer_id) == ["license.issued"]


def test_operator_states(uow, clock, service, world):
    root, *_ = world
    lic, _ = _issue(uow, clock, service, world)
    with pytest.raises(Invalid):
        licenses.set_state(uow, clock, lic.id, "suspended")  # a partner's change, not the service's
    assert licenses.set_state(uow, clock, lic.id, "trial").state == "trial"
    with pytest.raises(NotFound):
        licenses.set_state(uow, clock, "nope", "trial")
    licenses.terminate_license(uow, clock, service, root, lic.id)
    with pytest.raises(Conflict, match="final"):
        licenses.set_state(uow, clock, lic.id, "active")


def test_licenses_are_scoped_to_the_subtree(uow, clock, service, world):
    root, sub, made = world
    mine, _ = _issue(uow, clock, service, world, who=sub)
    theirs, _ = _issue(uow, clock, service, world, who=root)
    assert {lic.id for lic in licenses.list_licenses(uow, root, Page())} == {mine.id, theirs.id}
    assert licenses.list_licenses(uow, sub, Page()) == [LicenseSummary.of(mine)]
    with pytest.raises(NotFound):
        licenses.terminate_license(uow, clock, service, sub, theirs.id)
    assert licenses.get_license(uow, root, theirs.id).state == "active"


def test_transfer_moves_the_license_with_two_ledger_events(uow, clock, service, world):
    root, sub, made = world
    lic, _ = _issue(uow, clock, service, world)
    clock.advance(86400 * 3)
    to_customer, to_contract = made[sub.partner.id]
    effective = clock.now() - timedelta(days=1)
    transfer, moved = transfers.transfer_license(uow, clock, root, license_id=lic.id, to_partner_id=sub.partner.id,
                                                 to_customer_id=to_customer.id, to_contract_id=to_contract.id,
                                                 reason="merger", effective_at=effective)
    assert (moved.partner_id, moved.customer_id, moved.contract_id) == (sub.partner.id, to_customer.id,
                                                                        to_contract.id)
    assert transfer.effective_date == effective.date() and transfer.human_id == "T-1001"
    assert _events(uow, lic.customer_id) == ["license.transferred_out", "license.issued"]
    assert _events(uow, to_customer.id) == ["license.transferred_in"]
    assert licenses.list_licenses(uow, sub, Page()) == [LicenseSummary.of(moved)]
    assert transfers.list_transfers(uow, sub, Page()) == [transfer]
    assert transfers.sync_transfer(uow, service, transfer, moved) is None
    assert service.calls[-1][0] == "update_metadata" and service.calls[-1][2]["partnerId"] == sub.partner.id


def test_transfer_refusals(uow, clock, service, world):
    root, sub, made = world
    lic, _ = _issue(uow, clock, service, world)
    own_customer, own_contract = made[root.partner.id]
    to_customer, to_contract = made[sub.partner.id]
    outsider = caller_of(uow, clock, "Outsider")

    def move(caller=root, partner=sub.partner.id, customer=to_customer.id, contract=to_contract.id, at=None):
        return transfers.transfer_license(uow, clock, caller, license_id=lic.id, to_partner_id=partner,
                                          to_customer_id=customer, to_contract_id=contract, effective_at=at)

    with pytest.raises(NotFound):
        move(partner=outsider.partner.id)
    with pytest.raises(NotFound):
        move(caller=sub)  # the license is above the sub-reseller
    with pytest.raises(Invalid) as raised:
        move(customer=own_customer.id)
    assert set(raised.value.fields) == {"toCustomerId"}
    with pytest.raises(Conflict, match="already belongs"):
        move(partner=root.partner.id, customer=own_customer.id, contract=own_contract.id)
    for at in (clock.now() - timedelta(days=2), clock.now() + timedelta(days=1)):
        with pytest.raises(Invalid, match="effectiveDate"):
            move(at=at)
    licenses.terminate_license(uow, clock, service, root, lic.id)
    with pytest.raises(Conflict, match="terminated"):
        move()
    assert transfers.list_transfers(uow, root, Page()) == []


def test_a_failed_sync_is_recorded_on_the_transfer_not_raised(uow, clock, service, world):
    root, sub, made = world
    lic, _ = _issue(uow, clock, service, world)
    to_customer, to_contract = made[sub.partner.id]
    transfer, moved = transfers.transfer_license(uow, clock, root, license_id=lic.id, to_partner_id=sub.partner.id,
                                                 to_customer_id=to_customer.id, to_contract_id=to_contract.id)
    service.fail.add("update_metadata")
    message = transfers.sync_transfer(uow, service, transfer, moved)
    assert "update_metadata refused" in message
    with uow:
        assert [t.sync_error for t in uow.transfers.sync_failures()] == [message]


def test_activity_filters_summary_and_export(uow, clock, service, world):
    root, sub, made = world
    lic, _ = _issue(uow, clock, service, world)
    for _ in range(2):
        clock.advance(3600)
        licenses.suspend_license(uow, clock, service, root, lic.id)
        clock.advance(3600)
        licenses.resume_license(uow, clock, service, root, lic.id)
    cid = lic.customer_id
    suspended = ledger.customer_activity(uow, root, cid, ledger.make_filter(event="license.suspended"), Page())
    assert len(suspended) == 2 and suspended[0].id > suspended[1].id
    since = datetime(2026, 11, 1, 10, 30, tzinfo=timezone.utc)
    assert len(ledger.customer_activity(uow, root, cid, ledger.make_filter(since=since), Page())) == 3
    assert ledger.customer_activity(uow, root, cid, ledger.make_filter(actor=""), Page()) == []  # none unattributed
    summary = ledger.customer_activity_summary(uow, root, cid, ledger.make_filter())
    assert summary["total"] == 5 and summary["by_event"]["license.resumed"] == 2
    assert summary["first_at"] < summary["last_at"]
    first = ledger.export_batches(uow, cid, ledger.make_filter(), None, 2)
    rest = ledger.export_batches(uow, cid, ledger.make_filter(), first[-1].id, 10)
    assert len(first) == 2 and len(rest) == 3 and rest[-1].event == "license.issued"
    assert ledger.export_count(uow, cid, ledger.make_filter()) == 5
    with pytest.raises(Invalid):
        ledger.make_filter(event="license.stolen")
    with pytest.raises(NotFound):
        ledger.customer_activity(uow, sub, cid, ledger.make_filter(), Page())
