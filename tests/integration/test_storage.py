"""The peewee adapter on a real database (SQLite here, PostgreSQL in CI's second run)."""
import pytest

from app.storage.migrations import LATEST, MIGRATIONS
from app.storage.store import SchemaOutOfDate, Store
from core.partner import partners, tokens
from tests.support.database import POSTGRES


def test_migrations_are_versioned_and_idempotent(database_url):
    store = Store(database_url)
    try:
        with pytest.raises(SchemaOutOfDate, match="slipway init"):
            store.require_current_schema()
        assert store.migrate() == [version for version, _, _ in MIGRATIONS]
        assert store.migrate() == []
        assert store.version() == LATEST
        store.require_current_schema()
    finally:
        store.close()


@pytest.mark.skipif(POSTGRES, reason="SQLite pragmas")
def test_sqlite_runs_in_wal_with_foreign_keys_and_a_busy_timeout(store):
    with store.uow():
        db = store.db
        assert db.execute_sql("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert db.execute_sql("PRAGMA foreign_keys").fetchone()[0] == 1
        assert db.execute_sql("PRAGMA busy_timeout").fetchone()[0] >= 5000


def test_foreign_keys_are_enforced(store, clock):
    import peewee

    from core.partner.identity import Token

    bogus = Token(id="2b3c4d5e-0000-4000-8000-000000000000", partner_id="9b3c4d5e-0000-4000-8000-000000000000",
                  label="x", token_prefix="abcdefgh", token_hash="0" * 64, scope="read", created_by=None,
                  created_at=clock.now())
    with pytest.raises(peewee.IntegrityError):
        with store.uow() as uow:
            uow.tokens.add(bogus)
            uow.commit()


def test_a_unit_of_work_without_commit_rolls_back(store, clock):
    from core.partner.identity import Partner

    partner = Partner(id="3b3c4d5e-0000-4000-8000-000000000000", name="x", type="reseller", parent_id=None,
                      created_at=clock.now())
    with store.uow() as uow:
        uow.partners.add(partner)
    with pytest.raises(RuntimeError):
        with store.uow() as uow:
            uow.partners.add(partner)
            raise RuntimeError("midway")
    with store.uow() as uow:
        assert uow.partners.get(partner.id) is None


def test_subtree_through_a_recursive_query(store, clock):
    root = partners.create_partner(store.uow(), clock, name="Op", type="root")
    a = partners.create_partner(store.uow(), clock, name="A", parent_id=root.id)
    b = partners.create_partner(store.uow(), clock, name="B", parent_id=a.id)
    c = partners.create_partner(store.uow(), clock, name="C", parent_id=b.id)
    partners.create_partner(store.uow(), clock, name="Other")
    with store.uow() as uow:
        assert uow.partners.subtree_ids(a.id) == {a.id, b.id, c.id}
        assert uow.partners.subtree_ids(root.id) == {root.id, a.id, b.id, c.id}
        assert uow.partners.subtree_ids(c.id) == {c.id}


def test_timestamps_round_trip_as_aware_utc(store, clock):
    partner = partners.create_partner(store.uow(), clock, name="Acme")
    token, secret = tokens.create_token(store.uow(), clock, partner_id=partner.id, label="x", scope="read",
                                        created_by=None)
    with store.uow() as uow:
        again = uow.tokens.get(token.id)
    assert again.created_at == clock.now() and again.created_at.tzinfo is not None


def test_token_hashes_are_unique_in_the_schema(store, clock):
    import dataclasses

    import peewee

    partner = partners.create_partner(store.uow(), clock, name="Acme")
    token, _ = tokens.create_token(store.uow(), clock, partner_id=partner.id, label="x", scope="read",
                                   created_by=None)
    clash = dataclasses.replace(token, id="4b3c4d5e-0000-4000-8000-000000000000")
    with pytest.raises(peewee.IntegrityError):
        with store.uow() as uow:
            uow.tokens.add(clash)
            uow.commit()


def test_an_unsupported_database_url_is_a_clear_error():
    from app.storage.database import DatabaseUrlError, open_database

    with pytest.raises(DatabaseUrlError, match="unsupported scheme 'mysql'"):
        open_database("mysql://root@localhost/db")


def test_migration_17_lets_a_service_have_several_route_records(database_url, clock):
    """A database made before migration 17 has a unique index on service_route.service_id;
    17 makes it a plain one and adds custom_domain (whose primary key is the name)."""
    from core.panel.routes import Route

    store = Store(database_url)
    try:
        store.migrate()
        db, m = store.db, store.models
        db.execute_sql("DROP INDEX IF EXISTS service_route_service_id")  # as migration 6 made it before 17
        db.execute_sql("CREATE UNIQUE INDEX service_route_service_id ON service_route (service_id)")
        m.SchemaVersion.delete().where(m.SchemaVersion.version == 17).execute()
        assert store.migrate() == [17]
        now = clock.now()
        with store.uow() as uow:
            uow.routes.replace_for("svc_1", [Route("a.test", "svc_1", "http://127.0.0.1:1", now, now),
                                             Route("web.apps.test", "svc_1", "http://127.0.0.1:1", now, now)])
            assert uow.custom_domains.claim("a.test", "svc_1", now) == "svc_1"
            assert uow.custom_domains.claim("a.test", "svc_2", now) == "svc_1"  # the first keeps it
            uow.commit()
        assert [r.hostname for r in store.uow(write=False).routes.all()] == ["a.test", "web.apps.test"]
    finally:
        store.close()
