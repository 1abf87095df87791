"""The migration chain against the database itself (SQLite here, PostgreSQL in CI's
``-m storage`` pass): a database made at any earlier version and upgraded has the
schema a new one gets, and the newest schema is what the models declare (a model
changed without a migration fails here). Schemas are read back from the database
(tests/support/schema.py): tables, columns with their types, nullability and defaults,
indexes (unique, partial), constraints, foreign keys and triggers."""
from __future__ import annotations

import contextlib

import peewee
import pytest
from playhouse import db_url

from app.storage.database import SQLITE_PRAGMAS
from app.storage.migrations import LATEST, MIGRATIONS, current_version, migrate
from app.storage.models import define_models
from tests.support.database import POSTGRES
from tests.support.schema import differences, schema_of

pytestmark = pytest.mark.storage

#: what migrations make that no model declares: the partial unique indexes that hold one
#: primary contact and one draft / revision of a statement, and billing's ledger index
MIGRATION_ONLY_INDEXES = {
    "contact": {"contact_one_primary"},
    "statement": {"statement_one_draft", "statement_one_revision"},
    "ledger_event": {"ledger_event_ownership"},
}


@pytest.fixture
def make_database(database_url, tmp_path):
    """``make_database(name)``: an empty database of its own, on the database the tests
    run on (PostgreSQL: a schema of that name in the test database; SQLite: a file)."""
    with contextlib.ExitStack() as stack:
        def make(name: str) -> peewee.Database:
            if POSTGRES:
                admin = db_url.connect(database_url)
                admin.execute_sql(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')
                admin.execute_sql(f'CREATE SCHEMA "{name}"')
                stack.callback(lambda: (admin.execute_sql(f'DROP SCHEMA IF EXISTS "{name}" CASCADE'),
                                        admin.close()))
                db = db_url.connect(database_url, options=f"-csearch_path={name}")
            else:
                db = peewee.SqliteDatabase(str(tmp_path / f"{name}.db"), pragmas=SQLITE_PRAGMAS)
            db.connect()
            stack.callback(db.close)
            return db

        yield make


def _migrated(db, upto=None) -> dict:
    migrate(db, upto=upto)
    return schema_of(db)


VERSIONS = [version for version, _, _ in MIGRATIONS]


def test_the_versions_rise_from_one_to_latest():
    """In order, from 1; a number may be missing while the change that holds it is not
    merged yet (changes made side by side are given their numbers in advance)."""
    assert VERSIONS[0] == 1 and VERSIONS[-1] == LATEST
    assert VERSIONS == sorted(set(VERSIONS))


@pytest.mark.parametrize("version", [0, *VERSIONS[:-1]])
def test_a_database_at_each_earlier_version_upgrades_to_the_new_schema(make_database, version):
    fresh = _migrated(make_database("schema_fresh"))
    old = make_database("schema_old")
    migrate(old, upto=version)
    assert current_version(old) == version
    assert migrate(old) == [v for v in VERSIONS if v > version]
    assert current_version(old) == LATEST
    assert differences(schema_of(old), fresh) == []


def test_the_newest_schema_is_what_the_models_declare(make_database):
    """Everything the models declare, as the migrations made it; beyond it only the
    migrations' own triggers, trigger functions and MIGRATION_ONLY_INDEXES."""
    migrated = _migrated(make_database("schema_migrated"))
    declared_db = make_database("schema_declared")
    models = define_models(declared_db)
    declared_db.create_tables([m for m in vars(models).values() if isinstance(m, type)
                               and issubclass(m, peewee.Model)])
    declared = schema_of(declared_db)

    migrated.pop("(functions)", None)
    declared.pop("(functions)", None)
    for table, parts in migrated.items():
        parts["triggers"] = {}
        for name in MIGRATION_ONLY_INDEXES.get(table, ()):
            assert parts["indexes"].pop(name, None) is not None, f"{table}: no index {name}"
    assert differences(migrated, declared) == []


def test_the_migrations_read_no_model():
    """The rule of app/storage/migrations.py: each migration freezes its DDL."""
    import app.storage.migrations as module

    source = open(module.__file__).read()
    assert "app.storage.models" not in source.split('"""', 2)[2]
    assert "define_models" not in source
