"""Concurrent writers on the real database (PostgreSQL in CI's second run): the schema and
the transactions keep the invariants, not luck."""
from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

from core.partner import customers
from core.partner.identity import Caller


def _caller(world):
    partner = world.partner("Acme")
    token, _ = world.token(partner)
    return Caller(partner=partner, token=token)


def _all_at_once(n, fn):
    barrier = threading.Barrier(n)

    def go(i):
        barrier.wait()
        return fn(i)

    with ThreadPoolExecutor(max_workers=n) as pool:
        return list(pool.map(go, range(n)))


def test_setting_the_primary_contact_from_many_requests_leaves_exactly_one(store, world, clock):
    caller = _caller(world)
    customer = customers.create_customer(store.uow(), clock, caller, {"name": "Busy"})
    contacts = [customers.create_contact(store.uow(), clock, caller, customer.id, {"first_name": f"c{i}"})
                for i in range(12)]

    def promote(i):
        return customers.update_contact(store.uow(), clock, caller, customer.id, contacts[i].id,
                                        {"is_primary": True})

    results = _all_at_once(len(contacts), promote)
    assert all(r.is_primary for r in results)  # every request succeeded
    listed = customers.list_contacts(store.uow(write=False), caller, customer.id)
    assert sum(c.is_primary for c in listed) == 1 and listed[0].is_primary

    def create_primary(i):
        return customers.create_contact(store.uow(), clock, caller, customer.id,
                                        {"first_name": f"new{i}", "is_primary": True})

    _all_at_once(12, create_primary)
    listed = customers.list_contacts(store.uow(write=False), caller, customer.id)
    assert len(listed) == 24 and sum(c.is_primary for c in listed) == 1


def test_many_customers_at_once_get_distinct_human_ids(store, world, clock):
    caller = _caller(world)
    made = _all_at_once(24, lambda i: customers.create_customer(store.uow(), clock, caller, {"name": f"c{i}"}))
    assert len({c.human_id for c in made}) == 24
    assert all(c.human_id.startswith("C-") for c in made)


def test_only_one_process_recomputes_at_a_time(store, world, clock):
    """Another session holding the recompute lock makes this recompute skip its round
    (PostgreSQL's advisory lock; on SQLite the write transaction serializes instead)."""
    import pytest

    from app.pluginmanager import billing_models, make_plugin_manager
    from app.storage.database import is_postgres
    from core.partner import statements

    if not is_postgres(store.db):
        pytest.skip("advisory locks are PostgreSQL's")
    import psycopg2

    world.partner("Acme")
    other = psycopg2.connect(store.url)
    try:
        with other.cursor() as cur:
            cur.execute("SELECT pg_advisory_xact_lock(%s)", (0x51_1B_2A_02,))  # held until rollback
            done = statements.recompute(store.uow(), clock, billing_models(make_plugin_manager()))
            assert done["partners"] == [] and "another process" in done["skipped"]
        other.rollback()
        done = statements.recompute(store.uow(), clock, billing_models(make_plugin_manager()))
        assert len(done["partners"]) == 1
    finally:
        other.close()
