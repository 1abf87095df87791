"""Partner API: usage and statements, priced from the ledger by the metered plugin."""
from __future__ import annotations

import csv
import io
import json
from datetime import datetime, timezone

import pytest
from freezegun import freeze_time

from app.pluginmanager import billing_models, make_plugin_manager
from core.partner import statements
from core.partner.billing import Period
from ports.clock import SystemClock

MODELS = billing_models(make_plugin_manager())
NOV = Period.parse("2026-11")


def recompute(store, clock, **kw):
    return statements.recompute(store.uow(), clock, MODELS, **kw)


@pytest.fixture
def billed(acme, clock):
    # the fake clock starts 2026-11-02 09:00 UTC; the contract costs 3000 cents a period
    acme.contract = acme.world.contract(acme.partner, currency="EUR", unit_price_cents=3000)
    customer = acme.customer()
    lic = acme.license(customer)["license"]
    return acme, lic


def test_usage_before_and_after_recompute(billed, store, clock):
    acme, lic = billed
    empty = acme.call("GET", "/v1/usage", expect=200).json
    assert empty == {"periodStart": "2026-11-01", "periodEnd": "2026-11-30", "computedAt": None, "totals": [],
                     "lines": []}
    recompute(store, clock)
    # issued on the 2nd, today is the 2nd: 1 day; 3000 * 1 / 30 = 100
    usage = acme.call("GET", "/v1/usage", expect=200).json
    assert usage["totals"] == [{"currency": "EUR", "amountCents": 100}]
    [line] = usage["lines"]
    assert line["contractId"] == acme.contract.id and line["model"] == "per_instance_metered"
    assert line["quantity"] == 0.0333 and line["unitPriceCents"] == 3000
    assert line["detail"] == [{"licenseId": lic["id"], "keyMasked": lic["keyMasked"], "days": 1, "amountCents": 100}]
    clock.advance(10 * 86400)
    assert acme.call("GET", "/v1/usage").json["computedAt"] == usage["computedAt"]  # the stored draft
    recompute(store, clock)
    # days 2..12 = 11; 3000 * 11 / 30 = 1100
    assert acme.call("GET", "/v1/usage").json["totals"] == [{"currency": "EUR", "amountCents": 1100}]


def test_usage_is_own_account_never_a_subtree_rollup(billed, reseller_factory, store, clock):
    acme, _ = billed
    child = reseller_factory("Child", parent=acme)
    child.license(child.customer())
    recompute(store, clock)
    assert len(acme.call("GET", "/v1/usage").json["lines"]) == 1
    assert child.call("GET", "/v1/usage").json["lines"][0]["contractId"] == child.contract.id


def test_finalize_list_get_export_and_correct(billed, reseller_factory, store, clock):
    acme, lic = billed
    child = reseller_factory("Child", parent=acme)
    clock.advance(31 * 86400)  # 2026-12-03
    recompute(store, clock, period=NOV)
    draft = statements.current_usage(store.uow(), clock, acme.id)  # December: nothing computed yet
    assert draft[1] is None
    final = statements.finalize(store.uow(), clock, acme.id, NOV, "ops@example")
    assert final.revision == 1 and final.status == "finalized"
    listed = acme.call("GET", "/v1/statements", expect=200).json
    assert [(s["id"], s["revision"], s["status"]) for s in listed] == [(final.id, 1, "finalized")]
    assert "lines" not in listed[0] and "partnerId" not in listed[0]
    full = acme.call("GET", f"/v1/statements/{final.id}", expect=200).json
    # days 2..30 = 29; 3000 * 29 / 30 = 2900
    assert full["totals"] == [{"currency": "EUR", "amountCents": 2900}]
    assert full["lines"][0]["detail"][0]["days"] == 29 and full["finalizedBy"] == "ops@example"
    assert "supersedesStatementId" not in full

    first_csv = acme.call("GET", f"/v1/statements/{final.id}/export", params={"format": "csv"}, expect=200)
    assert first_csv.headers["content-disposition"] == \
        f"attachment; filename=statement-{acme.id}-2026-11-r1.csv"
    rows = list(csv.reader(io.StringIO(first_csv.text)))
    assert rows == [["contractId", "model", "currency", "licenseId", "keyMasked", "days", "quantity",
                     "unitPriceCents", "amountCents"],
                    [acme.contract.id, "per_instance_metered", "EUR", lic["id"], lic["keyMasked"], "29", "0.9667",
                     "3000", "2900"]]
    as_json = acme.call("GET", f"/v1/statements/{final.id}/export", params={"format": "json"}, expect=200)
    assert as_json.headers["content-disposition"].endswith("-2026-11-r1.json")
    assert json.loads(as_json.text) == full
    for fmt, first in (("csv", first_csv), ("json", as_json)):
        again = acme.call("GET", f"/v1/statements/{final.id}/export", params={"format": fmt})
        assert again.content == first.content  # byte-identical

    # a transfer effective in the past changes November: correct it as revision 2
    target = child.customer()
    acme.call("POST", "/v1/transfers", json_body={
        "licenseId": lic["id"], "toPartnerId": child.id, "toCustomerId": target["id"],
        "toContractId": child.contract.id, "effectiveDate": "2026-11-20T00:00:00Z"}, expect=201)
    corrected = statements.correct(store.uow(), clock, MODELS, final.id, "ops@example")
    assert corrected.revision == 2 and corrected.supersedes_statement_id == final.id
    # days 2..19 = 18; 3000 * 18 / 30 = 1800
    assert corrected.totals == (("EUR", 1800),)
    listed = acme.call("GET", "/v1/statements").json
    assert [(s["revision"], s["status"]) for s in listed] == [(2, "finalized"), (1, "superseded")]
    assert listed[0]["supersedesStatementId"] == final.id
    old = acme.call("GET", f"/v1/statements/{final.id}").json
    assert old["status"] == "superseded" and old["totals"] == full["totals"] and old["lines"] == full["lines"]
    assert acme.call("GET", f"/v1/statements/{corrected.id}/export", params={"format": "csv"}).headers[
        "content-disposition"].endswith("-2026-11-r2.csv")
    with pytest.raises(Exception, match="only the latest"):
        statements.correct(store.uow(), clock, MODELS, final.id, "ops")


def test_statement_404_and_422_rows(billed, reseller_factory, store, clock):
    acme, _ = billed
    other = reseller_factory("Other")
    other.license(other.customer())
    recompute(store, clock)
    with store.db.connection_context():
        draft_id = store.models.Statement.get(store.models.Statement.partner == acme.id).id
    clock.advance(31 * 86400)
    recompute(store, clock, period=NOV)
    theirs = statements.finalize(store.uow(), clock, other.id, NOV, "ops")
    mine = statements.finalize(store.uow(), clock, acme.id, NOV, "ops")
    for sid in (draft_id, theirs.id, "0d1f0c2a-0000-4000-8000-0000000000aa"):
        acme.call("GET", f"/v1/statements/{sid}", expect=404)
        acme.call("GET", f"/v1/statements/{sid}/export", params={"format": "csv"}, expect=404)
    acme.call("GET", "/v1/statements/not-a-uuid", expect=422)
    for params in (None, {"format": "xml"}, {"format": ""}):
        result = acme.call("GET", f"/v1/statements/{mine.id}/export", params=params, expect=422)
        assert "format" in result.json["error"]["message"]
    assert [s["id"] for s in other.call("GET", "/v1/statements").json] == [theirs.id]


def test_finalized_statements_are_immutable_in_storage(billed, store, clock):
    import peewee

    acme, _ = billed
    clock.advance(31 * 86400)
    recompute(store, clock, period=NOV)
    final = statements.finalize(store.uow(), clock, acme.id, NOV, "ops")
    for statement in ("UPDATE statement SET totals = '[]'", "UPDATE statement SET status = 'draft'",
                      "DELETE FROM statement"):
        with pytest.raises(peewee.DatabaseError):
            with store.db.atomic():
                store.db.execute_sql(statement)
    # and a later recompute of that period leaves it alone
    recompute(store, clock, period=NOV)
    assert statements.get_statement(store.uow(), type("C", (), {"partner": acme.partner})(), final.id) == final


def test_finalize_rules(billed, store, clock):
    from core.errors import Conflict, NotFound

    acme, _ = billed
    with pytest.raises(NotFound, match="recompute"):
        statements.finalize(store.uow(), clock, acme.id, Period.parse("2026-10"), "ops")
    recompute(store, clock)
    statements.finalize(store.uow(), clock, acme.id, NOV, "ops")
    with pytest.raises(Conflict):
        statements.finalize(store.uow(), clock, acme.id, NOV, "ops")


def test_a_crash_midway_leaves_the_previous_draft(billed, store, clock):
    acme, _ = billed
    recompute(store, clock)
    before = acme.call("GET", "/v1/usage").json

    class Broken:
        name = "per_instance_metered"

        def price(self, *args):
            raise RuntimeError("crash midway")

    clock.advance(86400)
    with pytest.raises(RuntimeError):
        statements.recompute(store.uow(), clock, {"per_instance_metered": Broken()})
    assert acme.call("GET", "/v1/usage").json == before


def test_recompute_under_a_frozen_system_clock(billed, store):
    acme, lic = billed
    with freeze_time(datetime(2026, 11, 21, 12, 0, tzinfo=timezone.utc)):
        recompute(store, SystemClock())
    # issued the 2nd, today (frozen) the 21st: days 2..21 = 20; 3000 * 20 / 30 = 2000
    usage = acme.call("GET", "/v1/usage").json
    assert usage["totals"] == [{"currency": "EUR", "amountCents": 2000}]
    assert usage["computedAt"].startswith("2026-11-21T12:00:00")


def test_the_server_recomputes_on_start_up(billed, make_app):
    import asyncio

    from falcon import testing

    acme, _ = billed
    app = make_app(billing_interval=3600)
    headers = {"Authorization": f"Bearer {acme.secret}"}

    async def main():
        async with testing.ASGIConductor(app) as conductor:  # start-up starts the job
            for _ in range(200):
                usage = (await conductor.simulate_get("/v1/usage", headers=headers)).json
                if usage["computedAt"] is not None:
                    return usage
                await asyncio.sleep(0.05)
        raise AssertionError("the recompute job did not run")

    usage = asyncio.run(main())
    assert usage["totals"] == [{"currency": "EUR", "amountCents": 100}]
