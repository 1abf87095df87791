"""Billing and statements: drafts priced from the ledger, finalized once, corrected as
new revisions; a transfer splits a period's days between owners."""
from __future__ import annotations

from datetime import date, datetime, timezone

import pytest

from core.partner import contracts, customers, editions, licenses, statements, transfers
from core.partner.billing import Period
from core.errors import Conflict, Invalid, NotFound
from tests.support.fakes import PerDayModel, caller_of

NOVEMBER = Period.parse("2026-11")
MODELS = {"per-day": PerDayModel()}


@pytest.fixture
def world(uow, clock):
    editions.set_edition(uow, clock, "pro", "policy-pro")
    root = caller_of(uow, clock, "Root")
    sub = caller_of(uow, clock, "Sub", parent=root)
    made = {}
    for who, price in ((root, 100), (sub, 70)):
        made[who.partner.id] = (
            customers.create_customer(uow, clock, who, {"name": f"{who.partner.name} customer"}),
            contracts.create_contract(uow, clock, partner_id=who.partner.id, model="per-day", currency="EUR",
                                      unit_price_cents=price, known_models={"per-day"}))
    return root, sub, made


def _issue(uow, clock, service, who, made):
    customer, contract = made[who.partner.id]
    return licenses.issue_license(uow, clock, service, who, customer_id=customer.id, contract_id=contract.id,
                                  edition="pro")[0]


def test_contract_rules(uow, clock, world):
    root, *_ = world
    with pytest.raises(Invalid, match="no loaded billing plugin"):
        contracts.create_contract(uow, clock, partner_id=root.partner.id, model="flat", currency="EUR",
                                  unit_price_cents=1, known_models={"per-day"})
    for currency, price in (("eur", 1), ("EUR", -1), ("EUR", True)):
        with pytest.raises(Invalid):
            contracts.create_contract(uow, clock, partner_id=root.partner.id, model="per-day", currency=currency,
                                      unit_price_cents=price, known_models={"per-day"})
    with pytest.raises(NotFound):
        contracts.create_contract(uow, clock, partner_id="00000000-0000-0000-0000-000000000000", model="per-day",
                                  currency="EUR", unit_price_cents=1, known_models={"per-day"})


def test_recompute_prices_days_so_far_and_a_transfer_splits_them(uow, clock, service, world):
    root, sub, made = world
    lic = _issue(uow, clock, service, root, made)  # 1 November
    clock.advance(86400 * 19)  # 20 November
    to_customer, to_contract = made[sub.partner.id]
    transfers.transfer_license(uow, clock, root, license_id=lic.id, to_partner_id=sub.partner.id,
                               to_customer_id=to_customer.id, to_contract_id=to_contract.id,
                               effective_at=datetime(2026, 11, 11, tzinfo=timezone.utc))
    result = statements.recompute(uow, clock, MODELS)
    assert result["period"] == "2026-11" and set(result["partners"]) == {root.partner.id, sub.partner.id}
    _, root_draft = statements.current_usage(uow, clock, root.partner.id)
    _, sub_draft = statements.current_usage(uow, clock, sub.partner.id)
    assert root_draft.totals == (("EUR", 10 * 100),)  # 1-10 November
    assert sub_draft.totals == (("EUR", 10 * 70),)  # 11-20 November
    assert root_draft.lines[0].detail[0].key_masked == lic.key_masked


def test_a_terminated_license_is_billed_up_to_its_last_day(uow, clock, service, world):
    root, sub, made = world
    lic = _issue(uow, clock, service, root, made)
    clock.advance(86400 * 4)  # terminated on 5 November: billed 1-5
    licenses.terminate_license(uow, clock, service, root, lic.id)
    clock.advance(86400 * 10)
    statements.recompute(uow, clock, MODELS, partner_id=root.partner.id)
    assert statements.current_usage(uow, clock, root.partner.id)[1].totals == (("EUR", 500),)


def test_recompute_refusals_and_the_lock(uow, clock, world):
    root, *_ = world
    with pytest.raises(Invalid):
        statements.recompute(uow, clock, MODELS, period=Period.parse("2026-12"))
    with pytest.raises(NotFound):
        statements.recompute(uow, clock, MODELS, partner_id="not-a-uuid")
    uow.store.recompute_lock_held = True  # another process is recomputing
    assert "skipped" in statements.recompute(uow, clock, MODELS)
    assert statements.current_usage(uow, clock, root.partner.id)[1] is None
    uow.store.recompute_lock_held = False
    with pytest.raises(Conflict, match="no loaded billing plugin"):
        statements.recompute(uow, clock, {})


def test_finalize_once_then_correct_as_new_revisions(uow, clock, service, world):
    root, sub, made = world
    _issue(uow, clock, service, root, made)
    clock.advance(86400 * 28)  # 29 November
    with pytest.raises(NotFound, match="no draft"):
        statements.finalize(uow, clock, root.partner.id, NOVEMBER, by="ops")
    statements.recompute(uow, clock, MODELS)
    final = statements.finalize(uow, clock, root.partner.id, NOVEMBER, by="ops")
    assert (final.revision, final.status, final.finalized_by) == (1, "finalized", "ops")
    with pytest.raises(Conflict, match="already finalized"):
        statements.finalize(uow, clock, root.partner.id, NOVEMBER, by="ops")
    clock.advance(86400)  # 30 November: a recompute leaves a finalized period alone
    statements.recompute(uow, clock, MODELS)
    assert statements.current_usage(uow, clock, root.partner.id)[1] is None
    corrected = statements.correct(uow, clock, MODELS, final.id, by="ops")
    assert (corrected.revision, corrected.supersedes_statement_id) == (2, final.id)
    assert corrected.totals == (("EUR", 3000),) and final.totals == (("EUR", 2900),)
    with pytest.raises(Conflict, match="latest revision"):
        statements.correct(uow, clock, MODELS, final.id, by="ops")
    listed = statements.list_statements(uow, root)
    assert [(s.revision, s.status) for s in listed] == [(2, "finalized"), (1, "superseded")]


def test_statements_are_the_partners_own_and_drafts_are_not_shown(uow, clock, service, world):
    root, sub, made = world
    _issue(uow, clock, service, sub, made)
    clock.advance(86400)
    statements.recompute(uow, clock, MODELS)
    draft = statements.current_usage(uow, clock, sub.partner.id)[1]
    assert statements.list_statements(uow, sub) == []
    with pytest.raises(NotFound):
        statements.get_statement(uow, sub, draft.id)
    with pytest.raises(NotFound):
        statements.correct(uow, clock, MODELS, draft.id, by="ops")
    final = statements.finalize(uow, clock, sub.partner.id, NOVEMBER, by="ops")
    assert statements.get_statement(uow, sub, final.id) == final
    with pytest.raises(NotFound):  # not even the parent reads a sub-reseller's statement
        statements.get_statement(uow, root, final.id)


def test_period_parsing():
    assert (NOVEMBER.start, NOVEMBER.end, NOVEMBER.days) == (date(2026, 11, 1), date(2026, 11, 30), 30)
    for text in ("2026-1", "26-11", "2026-13"):
        with pytest.raises(ValueError):
            Period.parse(text)
