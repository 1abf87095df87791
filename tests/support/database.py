"""Which database the tests run on, emptying a PostgreSQL one, one PostgreSQL database
per pytest-xdist worker, and the migrated template each test's store starts from."""
from __future__ import annotations

import os
import shutil
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

POSTGRES = (os.environ.get("SLIPWAY_DATABASE_URL") or "").startswith(("postgresql://", "postgres://"))


def _reset_postgres(url: str) -> None:
    import psycopg2

    conn = psycopg2.connect(url)
    conn.autocommit = True
    with conn.cursor() as cur:
        cur.execute("DROP SCHEMA IF EXISTS public CASCADE; CREATE SCHEMA public;")
    conn.close()


def worker_database(url: str, worker: str) -> str:
    """The URL of the database that xdist worker ``worker`` (``gw0``, ``gw1``...) owns: the
    database of ``url`` with ``_<worker>`` appended, created on first use. Every test
    empties its database, so workers sharing one would empty each other's."""
    import psycopg2

    parts = urlsplit(url)
    name = f"{parts.path.lstrip('/')}_{worker}"
    conn = psycopg2.connect(url)
    conn.autocommit = True
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,))
            if cur.fetchone() is None:
                cur.execute(f'CREATE DATABASE "{name}"')
    finally:
        conn.close()
    return urlunsplit(parts._replace(path=f"/{name}"))


def plugin_migrations() -> list:
    """Each license service plugin's migration, as ``slipway init`` runs them."""
    from app.pluginmanager import license_services, make_plugin_manager

    return [factory.migrate for factory in license_services(make_plugin_manager()).values()]


def _migrate(url: str) -> None:
    from app.storage.store import Store

    store = Store(url, threads=1)
    try:
        store.migrate(plugin_migrations())
    finally:
        store.close()


def sqlite_template(directory: Path) -> Path:
    """A SQLite file migrated to the latest schema, in ``directory``: made once per test
    process; each test's database is a copy (``copy_sqlite``). Left in rollback-journal
    mode, so the one file holds everything (no ``-wal`` beside it to copy)."""
    import sqlite3

    path = directory / "migrated.db"
    _migrate(f"sqlite:///{path}")
    conn = sqlite3.connect(path)
    try:
        conn.execute("PRAGMA journal_mode=delete")  # checkpoints and removes the WAL
    finally:
        conn.close()
    return path


def copy_sqlite(template: Path, path: Path) -> None:
    """``path`` becomes a copy of the migrated ``template`` (the store turns WAL on again)."""
    shutil.copyfile(template, path)


def _admin(url: str):
    """An autocommit connection to the server's ``postgres`` database: neither the test
    database (dropped) nor the template (which must have no other session to be copied)."""
    import psycopg2

    conn = psycopg2.connect(urlunsplit(urlsplit(url)._replace(path="/postgres")))
    conn.autocommit = True
    return conn


def _name(url: str) -> str:
    return urlsplit(url).path.lstrip("/")


def postgres_template(url: str) -> str:
    """A database beside ``url``'s (``<name>_template``) migrated to the latest schema:
    made once per test process; each test's database is created from it
    (``recreate_from_template``). Returns its name."""
    template = f"{_name(url)}_template"
    conn = _admin(url)
    try:
        with conn.cursor() as cur:
            cur.execute(f'DROP DATABASE IF EXISTS "{template}" WITH (FORCE)')
            cur.execute(f'CREATE DATABASE "{template}"')
    finally:
        conn.close()
    _migrate(urlunsplit(urlsplit(url)._replace(path=f"/{template}")))
    return template


def recreate_from_template(url: str, template: str) -> None:
    """``url``'s database dropped (its sessions ended) and created again as a copy of
    ``template``: a migrated database in the time of a file copy instead of a migration."""
    conn = _admin(url)
    try:
        with conn.cursor() as cur:
            cur.execute(f'DROP DATABASE IF EXISTS "{_name(url)}" WITH (FORCE)')
            cur.execute(f'CREATE DATABASE "{_name(url)}" TEMPLATE "{template}"')
    finally:
        conn.close()


def drop_database(url: str, name: str) -> None:
    conn = _admin(url)
    try:
        with conn.cursor() as cur:
            cur.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        conn.close()


def make_policy_due(database_url: str, service_id: str) -> None:
    """The service's backup policy's next run, moved into the past: a scheduler that looks
    now finds the run due (tests wait for that state instead of a cron minute)."""
    from datetime import datetime

    from app.storage.database import open_database

    db = open_database(database_url)
    try:
        with db.connection_context():
            db.execute_sql(f"UPDATE backup_policy SET next_run_at = {db.param} WHERE service_id = {db.param}",
                           (datetime(2000, 1, 1), service_id))
    finally:
        db.close_all() if hasattr(db, "close_all") else db.close()
