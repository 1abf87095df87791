"""Migration 18: the ledger's internal ``reach_customer_id`` (the customer whose activity
an event belongs to; never in an answer). Filled for a database that had events before
it, kept by the database for every insert whoever writes it, and the ledger stays
append-only for every column an answer shows."""
from __future__ import annotations

import peewee
import pytest


def _drop_reach_triggers(store):
    postgres = isinstance(store.db, peewee.PostgresqlDatabase)
    for trigger, table in (("ledger_event_reach", "ledger_event"), ("ledger_event_reach_kept", "ledger_event"),
                           ("license_moved", "license")):
        store.db.execute_sql(f"DROP TRIGGER IF EXISTS {trigger}" + (f" ON {table}" if postgres else ""))


def test_migration_18_fills_the_reach_of_older_events(acme, store, clock):
    customer = acme.customer()
    lic = acme.license(customer)["license"]
    M = store.models
    with store.db.connection_context():
        _drop_reach_triggers(store)
        M.LedgerEvent.update(reach_customer_id=None).execute()  # as written before migration 18
        M.LedgerEvent.insert(event="license.suspended", at=clock.now(), actor=None, partner_id=acme.id,
                             customer_id=None, license_id=lic["id"], data="{}").execute()
        assert M.LedgerEvent.select().where(M.LedgerEvent.reach_customer_id.is_null(False)).count() == 0
        M.SchemaVersion.delete().where(M.SchemaVersion.version == 18).execute()
    assert store.migrate() == [18]
    with store.db.connection_context():
        reach = {(e.customer_id, e.reach_customer_id) for e in M.LedgerEvent.select()}
    assert reach == {(customer["id"], customer["id"]), (None, customer["id"])}
    assert store.migrate() == []
    events = acme.call("GET", f"/v1/customers/{customer['id']}/activity").json["data"]
    assert [e["customerId"] for e in events] == [None, customer["id"]]
    assert all("reach_customer_id" not in e and "reachCustomerId" not in e for e in events)
    # the triggers are back: a new event without a customer reaches the license's
    with store.db.connection_context():
        M.LedgerEvent.insert(event="license.resumed", at=clock.now(), actor=None, partner_id=acme.id,
                             customer_id=None, license_id=lic["id"], data="{}").execute()
        newest = M.LedgerEvent.select().order_by(M.LedgerEvent.id.desc()).get()
    assert newest.reach_customer_id == customer["id"]


def test_the_reach_column_holds_only_what_the_database_computes(acme, store, clock):
    """An insert naming another customer's id gets its own; an UPDATE to another value is
    refused (no row is moved into someone else's activity), one to the same value passes."""
    customer, other = acme.customer(), acme.customer("Other")
    lic = acme.license(customer)["license"]
    M = store.models
    with store.db.connection_context():
        M.LedgerEvent.insert(event="license.suspended", at=clock.now(), actor=None, partner_id=acme.id,
                             customer_id=None, license_id=lic["id"], data="{}",
                             reach_customer_id=other["id"]).execute()
        assert {e.reach_customer_id for e in M.LedgerEvent.select()} == {customer["id"]}
        with pytest.raises(peewee.DatabaseError, match="append-only"):
            with store.db.atomic():
                M.LedgerEvent.update(reach_customer_id=other["id"]).execute()
        with pytest.raises(peewee.DatabaseError, match="append-only"):
            with store.db.atomic():
                M.LedgerEvent.update(reach_customer_id=None).execute()
        assert M.LedgerEvent.update(reach_customer_id=customer["id"]).execute() == 2
    assert acme.call("GET", f"/v1/customers/{other['id']}/activity").json["data"] == []


def test_every_column_but_the_reach_is_append_only():
    """A column added to the ledger later is refused changes too, unless listed here."""
    from app.storage.migrations import LEDGER_COLUMNS
    from app.storage.models import define_models

    columns = {f.column_name for f in define_models(peewee.SqliteDatabase(None)).LedgerEvent._meta.sorted_fields}
    assert set(LEDGER_COLUMNS) == columns - {"reach_customer_id"}


@pytest.mark.parametrize("column, value", [("data", "{}"), ("customer_id", None), ("event", "x"),
                                           ("license_id", "other"), ("actor", None), ("id", 999999),
                                           ("partner_id", "other")])
def test_the_ledger_refuses_to_change_what_an_answer_shows(acme, store, column, value):
    acme.license(acme.customer())
    M = store.models
    with store.db.connection_context():
        for change in (M.LedgerEvent.update(**{column: value}), M.LedgerEvent.delete()):
            with pytest.raises(peewee.DatabaseError, match="append-only"):
                with store.db.atomic():
                    change.execute()
        assert M.LedgerEvent.select().count() == 1
