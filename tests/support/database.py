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


#: what makes two databases' schemas the same for the tests: every column (its type,
#: nullability, default, position), index, constraint, trigger, function of ``public``,
#: and the migrations recorded; one query, a few milliseconds
_SCHEMA_FINGERPRINT = """
SELECT md5(concat_ws('|',
  (SELECT string_agg(c.relname || '.' || a.attname || ':' || format_type(a.atttypid, a.atttypmod) || ':'
                     || a.attnotnull || ':' || coalesce(pg_get_expr(d.adbin, d.adrelid), ''), ','
                     ORDER BY c.relname, a.attnum)
     FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
     LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
    WHERE c.relnamespace = 'public'::regnamespace AND c.relkind IN ('r', 'p', 'v', 'm', 'S')
      AND a.attnum > 0 AND NOT a.attisdropped),
  (SELECT string_agg(indexdef, ',' ORDER BY indexname) FROM pg_indexes WHERE schemaname = 'public'),
  (SELECT string_agg(conrelid::regclass::text || conname || pg_get_constraintdef(oid), ',' ORDER BY conrelid::regclass::text, conname)
     FROM pg_constraint WHERE connamespace = 'public'::regnamespace),
  (SELECT string_agg(tgrelid::regclass::text || pg_get_triggerdef(oid), ',' ORDER BY tgrelid::regclass::text, tgname)
     FROM pg_trigger WHERE NOT tgisinternal),
  (SELECT string_agg(proname || md5(prosrc), ',' ORDER BY proname) FROM pg_proc
    WHERE pronamespace = 'public'::regnamespace),
  (SELECT string_agg(version::text, ',' ORDER BY version) FROM slipway_schema)))
"""


class _Template:
    """What a test database must hold to equal the migrated template: the schema's
    fingerprint, the rows of each table that has any (the migrations' seed rows) and
    each sequence's position. Read once per test process."""

    def __init__(self, name: str, fingerprint: str, tables: list, rows: dict, sequences: dict):
        self.name, self.fingerprint, self.tables, self.rows, self.sequences = name, fingerprint, tables, rows, sequences


_templates: dict = {}


def _read_template(url: str, template: str) -> _Template:
    import psycopg2

    conn = psycopg2.connect(urlunsplit(urlsplit(url)._replace(path=f"/{template}")))
    try:
        with conn.cursor() as cur:
            cur.execute(_SCHEMA_FINGERPRINT)
            fingerprint = cur.fetchone()[0]
            cur.execute("SELECT quote_ident(tablename) FROM pg_tables WHERE schemaname = 'public' ORDER BY 1")
            tables = [t for (t,) in cur.fetchall()]
            rows = {}
            for table in tables:
                cur.execute(f"SELECT * FROM {table}")
                found = cur.fetchall()
                if found:
                    rows[table] = ([d.name for d in cur.description], found)
            cur.execute("SELECT quote_ident(sequencename), coalesce(last_value, start_value), last_value IS NOT NULL "
                        "FROM pg_sequences WHERE schemaname = 'public'")
            sequences = {name: (value, called) for name, value, called in cur.fetchall()}
    finally:
        conn.close()
    return _Template(template, fingerprint, tables, rows, sequences)


def reset_from_template(url: str, template: str) -> None:
    """``url``'s database made equal to the migrated ``template``, the fast way when its
    schema already is the template's (every row deleted, the template's rows and
    sequence positions put back: milliseconds), else by :func:`recreate_from_template`
    (a second or two: a test changed the schema, or emptied it). Sessions still on the
    database are ended first."""
    import psycopg2
    from psycopg2 import sql

    known = _templates.get((url, template))
    if known is None:
        known = _templates[(url, template)] = _read_template(url, template)
    try:
        conn = psycopg2.connect(url)
    except psycopg2.OperationalError:  # no such database yet
        recreate_from_template(url, template)
        return
    try:
        conn.autocommit = True
        with conn.cursor() as cur:
            cur.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                        "WHERE datname = current_database() AND pid <> pg_backend_pid()")
            cur.execute("SELECT to_regclass('public.slipway_schema') IS NOT NULL")
            same = cur.fetchone()[0]
            if same:
                cur.execute(_SCHEMA_FINGERPRINT)
                same = cur.fetchone()[0] == known.fingerprint
            if same:
                conn.autocommit = False
                # replica: no trigger fires (the append-only rules, foreign keys) while emptying
                cur.execute("SET LOCAL session_replication_role = replica")
                cur.execute("; ".join(f"DELETE FROM {t}" for t in known.tables))
                for table, (columns, rows) in known.rows.items():
                    insert = sql.SQL("INSERT INTO {} ({}) VALUES ({})").format(
                        sql.SQL(table), sql.SQL(", ").join(map(sql.Identifier, columns)),
                        sql.SQL(", ").join(sql.Placeholder() * len(columns)))
                    cur.executemany(insert, rows)
                for sequence, (value, called) in known.sequences.items():
                    cur.execute(f"SELECT setval('{sequence}', %s, %s)", (value, called))
                conn.commit()
    finally:
        conn.close()
    if not same:
        recreate_from_template(url, template)


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


def _make_due(database_url: str, table: str, key: str, value: str) -> None:
    """The row's ``next_run_at`` moved into the past: a scheduler that looks now finds its
    run due (tests wait for that state instead of a cron minute)."""
    from datetime import datetime

    from app.storage.database import open_database

    db = open_database(database_url)
    try:
        with db.connection_context():
            db.execute_sql(f"UPDATE {table} SET next_run_at = {db.param} WHERE {key} = {db.param}",
                           (datetime(2000, 1, 1), value))
    finally:
        db.close_all() if hasattr(db, "close_all") else db.close()


def make_policy_due(database_url: str, service_id: str) -> None:
    """The service's backup policy's next run, moved into the past (``_make_due``)."""
    _make_due(database_url, "backup_policy", "service_id", service_id)


def make_task_due(database_url: str, task_id: str) -> None:
    """The scheduled task's next run, moved into the past (``_make_due``)."""
    _make_due(database_url, "service_task", "id", task_id)


def age_worker_leases(database_url: str) -> None:
    """Every worker lease's last beat moved ``core.panel.leases.STALE_S`` + 1 s back: what a
    minute without beats does to the lease of a process that was killed (tests wait for
    that state instead of for the minute). Only while no live process holds a lease in the
    database: a live one would beat again within ``HEARTBEAT_S``, but its jobs could be
    taken back before it does."""
    from datetime import datetime, timedelta, timezone

    from app.storage.database import open_database
    from core.panel.leases import STALE_S

    aged = datetime.now(timezone.utc).replace(tzinfo=None) - timedelta(seconds=STALE_S + 1)
    db = open_database(database_url)
    try:
        with db.connection_context():
            db.execute_sql(f"UPDATE worker_lease SET heartbeat_at = {db.param}", (aged,))
    finally:
        db.close_all() if hasattr(db, "close_all") else db.close()
