"""The migration chain against the database itself (SQLite here, PostgreSQL in CI's
``-m storage`` pass): a database made at any earlier version and upgraded has the
schema a new one gets, and the newest schema is what the models declare (a model
changed without a migration fails here). Schemas are read back from the database
(tests/support/schema.py): tables, columns with their types, nullability and defaults,
indexes (unique, partial), constraints, foreign keys and triggers."""
from __future__ import annotations

import contextlib
import os

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


# --- migration 37: the fields a deploy method keeps, in one JSON column ----------------------

#: a service of each built-in method as migration 36 kept it: (id, method, template_id,
#: git_url, git_branch, ai_url), and the source each keeps from migration 37 on
SERVICES_AT_36 = (
    ("svc_template", "template", "static-site", None, None, None, {}),
    ("svc_compose", "compose", None, None, None, None, {}),
    ("svc_git", "git", None, "https://deploy:t0ken-t0ken@git.example.org/acme/site.git", "main", None,
     {"git_url": "https://deploy:t0ken-t0ken@git.example.org/acme/site.git", "git_branch": "main"}),
    ("svc_git_default", "git", None, "ssh://git@git.example.org/acme/site.git", None, None,
     {"git_url": "ssh://git@git.example.org/acme/site.git"}),
    ("svc_ai", "ai", None, None, "release", "https://git.example.org/acme/app.git",
     {"ai_url": "https://git.example.org/acme/app.git", "git_branch": "release"}),
)
_OLD_COLUMNS = ("git_url", "git_branch", "ai_url")


def _sources(db) -> dict:
    import json

    return {row[0]: json.loads(row[1]) for row in db.execute_sql('SELECT "id", "deploy_source" FROM "service"')}


def _at_36(db) -> None:
    """Services of every built-in method in ``db`` at schema 36, as that schema kept them."""
    p = db.param
    db.execute_sql(f'INSERT INTO "panel_customer" ("id", "name", "email", "created_at") VALUES ({p}, {p}, {p}, {p})',
                   ("cus_old", "Old", "ops@old.test", "2026-01-01 00:00:00"))
    for service_id, method, template_id, git_url, git_branch, ai_url, _ in SERVICES_AT_36:
        db.execute_sql(
            'INSERT INTO "service" ("id", "name", "customer_id", "deploy_method", "status", "template_id", '
            '"compose", "variables", "url", "created_at", "updated_at", "health_status", "health_failures", '
            f'"git_url", "git_branch", "ai_url") VALUES ({", ".join([p] * 16)})',
            (service_id, service_id.replace("_", "-"), "cus_old", method, "stopped", template_id,
             "services:\n  web:\n    image: localhost/busybox:latest\n", "{}", "", "2026-01-01 00:00:00",
             "2026-01-01 00:00:00", "unknown", 0, git_url, git_branch, ai_url))


def test_migration_37_moves_each_services_source_into_one_column(make_database):
    """A database at 36 with services of the four methods: 37 moves each one's git_url,
    git_branch and ai_url that has a value into ``deploy_source`` and drops the columns;
    running it again changes nothing."""
    db = make_database("schema_at_36")
    migrate(db, upto=36)
    _at_36(db)
    assert migrate(db, upto=37) == [37]
    assert not set(_OLD_COLUMNS) & {column.name for column in db.get_columns("service")}
    assert _sources(db) == {service_id: kept for service_id, *_, kept in SERVICES_AT_36}
    assert migrate(db, upto=37) == [] and _sources(db) == {service_id: kept for service_id, *_, kept in SERVICES_AT_36}


def test_after_migration_37_each_service_reads_and_answers_its_source(database_url, clock):
    """The same database read through the app: each service's ``source`` is what it kept,
    and its detail answers ``git_url`` (credentials shown as ``***``), ``git_branch`` and
    ``ai_url`` at the top level as before (null where it keeps none)."""
    from app.config import Config
    from app.factory import create_app
    from app.storage.store import Store
    from core.panel import access
    from core.redaction import redact_url
    from tests.support.contract_client import ContractClient

    db = db_url.connect(database_url)
    with db.connection_context():
        migrate(db, upto=36)
        _at_36(db)
    store = Store(database_url, threads=1)
    try:
        store.migrate()
        with store.uow() as uow:
            for service_id, *_, kept in SERVICES_AT_36:
                assert uow.services.get(service_id).source == kept
        _, admin = access.create_api_key(store.uow(), clock, name="admin", role="admin", rate_limit_rpm=10000)
        client = ContractClient(create_app(Config(database_url=store.url, clock=clock, deploy_worker=False,
                                                  billing_interval=0, runtime_url=None), store=store))
        for service_id, _, _, git_url, git_branch, ai_url, _ in SERVICES_AT_36:
            detail = client.get(f"/api/services/{service_id}", token=admin, expect=200).json
            assert (detail["git_url"], detail["git_branch"], detail["ai_url"]) == (redact_url(git_url), git_branch,
                                                                                  ai_url)
            assert "t0ken-t0ken" not in repr(detail)
    finally:
        store.close()


def _back_to_36(url: str) -> None:
    """Put a database made by this code (at 37 and later) back into the shape schema 36
    had: the three columns made again (as migration 9 made them) and filled from
    ``deploy_source``, which goes, and 37 not recorded; the services' rows, containers and
    releases stay as the deploys left them."""
    import json

    db = db_url.connect(url)
    with db.connection_context(), db.atomic():
        for name, kind in (("git_url", "TEXT"), ("git_branch", "VARCHAR(255)"), ("ai_url", "TEXT")):
            db.execute_sql(f'ALTER TABLE "service" ADD COLUMN "{name}" {kind}')
        p = db.param
        for service_id, text in db.execute_sql('SELECT "id", "deploy_source" FROM "service"').fetchall():
            kept = json.loads(text) if text else {}
            db.execute_sql(f'UPDATE "service" SET "git_url" = {p}, "git_branch" = {p}, "ai_url" = {p} WHERE "id" = {p}',
                           (kept.get("git_url"), kept.get("git_branch"), kept.get("ai_url"), service_id))
        db.execute_sql('ALTER TABLE "service" DROP COLUMN "deploy_source"')
        db.execute_sql('DELETE FROM "slipway_schema" WHERE "version" >= 37')


@pytest.mark.runtime
def test_services_of_the_four_methods_redeploy_after_migration_37(start_panel, migrated_database_url, tmp_path):
    """On the real engine: a service of each built-in method deployed and running, its
    database put back to schema 36, upgraded by ``slipway init``; each answers its
    source as before and redeploys (a git and an ai service clone their kept repository
    again)."""
    from tests.support.git_repos import BUSYBOX, CONTAINERFILE, _create, repository
    from tests.support.panel_server import _until
    from tests.support.processes import slipway

    client, customer, made = start_panel()
    git_url, _ = repository(tmp_path / "repo", {"Containerfile": CONTAINERFILE, "index.html": "<h1>git</h1>\n"})
    site_url, _ = repository(tmp_path / "site", {"index.html": "<h1>ai</h1>\n"})
    ids = {
        "template": _create(client, customer, made, "m-template", deploy_method="template",
                            template_id="static-site", variables={"IMAGE": BUSYBOX, "TITLE": "Upgraded"}),
        "compose": _create(client, customer, made, "m-compose", deploy_method="compose",
                           compose=f"services:\n  web:\n    image: {BUSYBOX}\n    command: [httpd, -f, -p, '8080']\n"
                                   "    ports: ['8080']\n"),
        "git": _create(client, customer, made, "m-git", deploy_method="git", git_url=git_url, git_branch="main"),
        "ai": _create(client, customer, made, "m-ai", deploy_method="ai", ai_url=site_url),
    }
    before = {method: _until(client, service_id, "running", seconds=180) for method, service_id in ids.items()}
    _jobs_done(tmp_path / "work")
    start_panel.stop(client)

    _back_to_36(migrated_database_url)
    slipway(migrated_database_url, "init")  # migration 37, as an upgrade runs it

    client, _, _ = start_panel()
    for method, service_id in ids.items():
        detail = client.get(f"/api/services/{service_id}").json()
        for field in ("git_url", "git_branch", "ai_url", "commit", "release"):
            assert detail[field] == before[method][field], (method, field)
        assert client.post(f"/api/services/{service_id}/redeploy").json()["status"] == "deploying", method
    for method, service_id in ids.items():
        detail = _until(client, service_id, "running", seconds=180)
        assert detail["release"] == before[method]["release"] + 1, method
    _jobs_done(tmp_path / "work")


def _jobs_done(work, seconds: float = 120) -> None:
    """Until every deploy job's work directory is gone: a service is ``running`` before its
    job has retired the old set and removed its directory, and a server stopped meanwhile
    leaves the directory behind (CI saw it once)."""
    import time

    deadline = time.monotonic() + seconds
    while work.exists() and os.listdir(work):
        assert time.monotonic() < deadline, os.listdir(work)
        time.sleep(0.2)
