"""Versioned, idempotent schema migrations, run by ``slipway init``.

Each migration runs in its own transaction and records its version in
``slipway_schema``; on PostgreSQL an advisory lock keeps two concurrent ``init`` runs
from racing. Running ``init`` again applies nothing.

The rule: **each migration freezes its DDL; never import models in a migration.** A
migration states, in itself, exactly the tables, columns, indexes and triggers it makes
or changes at its version: SQL written out (with the few types that differ between
SQLite and PostgreSQL as ``{timestamp}``-style names, ``_TYPES``), or peewee's schema
migrator given field definitions written out in the migration. Nothing here reads
``app.storage.models``: a migration built from the live models would make, on a new
database, a table that a database upgraded from its version never gets (as migration 5
once made ``service`` with the columns of migrations 9, 11, 16 and 19). A shipped
migration is never edited (databases exist at every version): a schema change is a new
migration, and the model follows it. tests/integration/test_schema_migrations.py holds
the chain to that: for every earlier version, a database made at it and upgraded equals
a new one, and the newest schema equals what the models declare.

A migration that adds a column adds it only when the table lacks it: databases made by
earlier code at an older version may have it already (their tables were once made from
the models of the day).
"""
from __future__ import annotations

import json
import os
from datetime import datetime, timezone

import peewee

from app.storage.database import is_postgres

_LOCK_KEY = 0x51_1B_2A_01  # advisory lock id for migrations

#: the column types that differ between the dialects, as peewee 4.5 wrote them when the
#: migrations were made (frozen with them: never change one)
_TYPES = {
    "sqlite": {"timestamp": "DATETIME", "bigint": "INTEGER", "boolean": "INTEGER", "blob": "BLOB",
               "bigserial": "INTEGER", "serial": "INTEGER"},
    "postgres": {"timestamp": "TIMESTAMP", "bigint": "BIGINT", "boolean": "BOOLEAN", "blob": "BYTEA",
                 "bigserial": "BIGSERIAL", "serial": "SERIAL"},
}


def _run(db, statements) -> None:
    """Run ``statements``, their ``{type}`` names written for this database."""
    types = _TYPES["postgres" if is_postgres(db) else "sqlite"]
    for statement in statements:
        db.execute_sql(statement.format(**types))


def _add_columns(db, table: str, columns: dict) -> None:
    """Add those of ``columns`` (name -> a peewee field written out in the migration) that
    ``table`` lacks, through peewee's schema migrator (a NOT NULL column: added, filled
    with its default, then made NOT NULL; on SQLite by copying the table)."""
    from playhouse.migrate import SchemaMigrator, migrate as apply

    have = {column.name for column in db.get_columns(table)}
    migrator = SchemaMigrator.from_database(db)
    changes = [migrator.add_column(table, name, field) for name, field in columns.items() if name not in have]
    if changes:
        apply(*changes)


def _now() -> datetime:
    """Now, as the tables keep time: naive UTC."""
    return datetime.now(timezone.utc).replace(tzinfo=None)


_SCHEMA_TABLE = ('CREATE TABLE IF NOT EXISTS "slipway_schema" ("version" INTEGER NOT NULL PRIMARY KEY, '
                 '"description" TEXT NOT NULL, "applied_at" {timestamp} NOT NULL)')

_V1 = (
    'CREATE TABLE IF NOT EXISTS "partner" ("id" VARCHAR(36) NOT NULL PRIMARY KEY, "name" TEXT NOT NULL, '
     '"type" VARCHAR(16) NOT NULL, "parent_id" VARCHAR(36), "created_at" {timestamp} NOT NULL, '
     'FOREIGN KEY ("parent_id") REFERENCES "partner" ("id") ON DELETE RESTRICT)',
    'CREATE INDEX IF NOT EXISTS "partner_parent_id" ON "partner" ("parent_id")',
    'CREATE TABLE IF NOT EXISTS "api_token" ("id" VARCHAR(36) NOT NULL PRIMARY KEY, '
     '"partner_id" VARCHAR(36) NOT NULL, "label" TEXT NOT NULL, "token_prefix" VARCHAR(8) NOT NULL, '
     '"token_hash" VARCHAR(64) NOT NULL, "scope" VARCHAR(8) NOT NULL, "created_by" VARCHAR(36), '
     '"created_at" {timestamp} NOT NULL, "last_used_at" {timestamp}, "revoked_at" {timestamp}, '
     'FOREIGN KEY ("partner_id") REFERENCES "partner" ("id") ON DELETE RESTRICT)',
    'CREATE INDEX IF NOT EXISTS "api_token_partner_id" ON "api_token" ("partner_id")',
    'CREATE UNIQUE INDEX IF NOT EXISTS "api_token_token_hash" ON "api_token" ("token_hash")',
    'CREATE INDEX IF NOT EXISTS "api_token_partner_id_created_at" ON "api_token" ("partner_id", "created_at")',
    'CREATE TABLE IF NOT EXISTS "contract" ("id" VARCHAR(36) NOT NULL PRIMARY KEY, '
     '"partner_id" VARCHAR(36) NOT NULL, "model" VARCHAR(64) NOT NULL, "currency" VARCHAR(3) NOT NULL, '
     '"unit_price_cents" {bigint} NOT NULL, "created_at" {timestamp} NOT NULL, '
     'FOREIGN KEY ("partner_id") REFERENCES "partner" ("id") ON DELETE RESTRICT)',
    'CREATE INDEX IF NOT EXISTS "contract_partner_id" ON "contract" ("partner_id")',
)


def _v1_identity(db):
    _run(db, _V1)


DEFAULT_EDITIONS = ("web-host", "web-pro", "power-user")
APPEND_ONLY = ("note", "ledger_event")


#: the columns of the ledger's events (every one but the internal reach_customer_id, which
#: follows a moved license, migration 18): no UPDATE may name them
LEDGER_COLUMNS = ("id", "event", "at", "actor", "partner_id", "customer_id", "license_id", "data")


def _append_only(db, table: str, columns: tuple[str, ...] = ()) -> None:
    """The database itself refuses to change or remove rows of ``table`` (with
    ``columns``: to change those columns; an UPDATE of any other is let through)."""
    update = f"UPDATE OF {', '.join(columns)}" if columns else "UPDATE"
    if is_postgres(db):
        db.execute_sql(
            "CREATE OR REPLACE FUNCTION slipway_append_only() RETURNS trigger AS $$ BEGIN "
            "RAISE EXCEPTION '%% is append-only', TG_TABLE_NAME; END $$ LANGUAGE plpgsql")
        db.execute_sql(f"DROP TRIGGER IF EXISTS {table}_append_only ON {table}")
        db.execute_sql(f"CREATE TRIGGER {table}_append_only BEFORE {update} OR DELETE ON {table} "
                       "FOR EACH ROW EXECUTE FUNCTION slipway_append_only()")
    else:
        for action, when in (("UPDATE", update), ("DELETE", "DELETE")):
            db.execute_sql(f"CREATE TRIGGER IF NOT EXISTS {table}_no_{action.lower()} BEFORE {when} ON {table} "
                           f"BEGIN SELECT RAISE(ABORT, '{table} is append-only'); END")


_V2 = (
    'CREATE TABLE IF NOT EXISTS "customer" ("id" VARCHAR(36) NOT NULL PRIMARY KEY, "human_id" VARCHAR(24) NOT NULL, '
     '"partner_id" VARCHAR(36) NOT NULL, "name" TEXT NOT NULL, "external_ref" TEXT NOT NULL, '
     '"legal_name" TEXT NOT NULL, "vat_id" TEXT NOT NULL, "email" TEXT NOT NULL, "phone" TEXT NOT NULL, '
     '"billing_street" TEXT NOT NULL, "billing_postal_code" TEXT NOT NULL, "billing_city" TEXT NOT NULL, '
     '"billing_region" TEXT NOT NULL, "billing_country" VARCHAR(2) NOT NULL, "postal_street" TEXT NOT NULL, '
     '"postal_postal_code" TEXT NOT NULL, "postal_city" TEXT NOT NULL, "postal_region" TEXT NOT NULL, '
     '"postal_country" VARCHAR(2) NOT NULL, "website" TEXT NOT NULL, "owner_email" TEXT NOT NULL, '
     '"status" VARCHAR(16) NOT NULL, "created_at" {timestamp} NOT NULL, "deleted_at" {timestamp}, '
     'FOREIGN KEY ("partner_id") REFERENCES "partner" ("id") ON DELETE RESTRICT)',
    'CREATE UNIQUE INDEX IF NOT EXISTS "customer_human_id" ON "customer" ("human_id")',
    'CREATE INDEX IF NOT EXISTS "customer_partner_id" ON "customer" ("partner_id")',
    'CREATE INDEX IF NOT EXISTS "customer_external_ref" ON "customer" ("external_ref")',
    'CREATE INDEX IF NOT EXISTS "customer_partner_id_created_at_id" ON "customer" ("partner_id", "created_at", "id")',
    'CREATE INDEX IF NOT EXISTS "customer_created_at_id" ON "customer" ("created_at", "id")',
    'CREATE TABLE IF NOT EXISTS "contact" ("id" VARCHAR(36) NOT NULL PRIMARY KEY, "human_id" VARCHAR(24) NOT NULL, '
     '"customer_id" VARCHAR(36) NOT NULL, "first_name" TEXT NOT NULL, "last_name" TEXT NOT NULL, '
     '"title" TEXT NOT NULL, "email" TEXT NOT NULL, "phone" TEXT NOT NULL, "locale" TEXT NOT NULL, '
     '"notes" TEXT NOT NULL, "is_primary" {boolean} NOT NULL, "created_at" {timestamp} NOT NULL, '
     '"updated_at" {timestamp} NOT NULL, FOREIGN KEY ("customer_id") REFERENCES "customer" ("id") ON DELETE CASCADE)',
    'CREATE UNIQUE INDEX IF NOT EXISTS "contact_human_id" ON "contact" ("human_id")',
    'CREATE INDEX IF NOT EXISTS "contact_customer_id" ON "contact" ("customer_id")',
    'CREATE TABLE IF NOT EXISTS "edition" ("name" VARCHAR(64) NOT NULL PRIMARY KEY, "policy" TEXT NOT NULL, '
     '"updated_at" {timestamp} NOT NULL)',
    'CREATE TABLE IF NOT EXISTS "human_id_counter" ("kind" VARCHAR(1) NOT NULL PRIMARY KEY, '
     '"value" {bigint} NOT NULL)',
    'CREATE TABLE IF NOT EXISTS "ledger_event" ("id" {bigserial} NOT NULL PRIMARY KEY, '
     '"event" VARCHAR(40) NOT NULL, "at" {timestamp} NOT NULL, "actor" VARCHAR(36), '
     '"partner_id" VARCHAR(36) NOT NULL, "customer_id" VARCHAR(36), "license_id" VARCHAR(36) NOT NULL, '
     '"data" TEXT NOT NULL)',
    'CREATE INDEX IF NOT EXISTS "ledger_event_customer_id_id" ON "ledger_event" ("customer_id", "id")',
    'CREATE INDEX IF NOT EXISTS "ledger_event_license_id_id" ON "ledger_event" ("license_id", "id")',
    'CREATE TABLE IF NOT EXISTS "license" ("id" VARCHAR(36) NOT NULL PRIMARY KEY, "human_id" VARCHAR(24) NOT NULL, '
     '"partner_id" VARCHAR(36) NOT NULL, "customer_id" VARCHAR(36) NOT NULL, "contract_id" VARCHAR(36) NOT NULL, '
     '"license_service_license_id" VARCHAR(64) NOT NULL, "key_masked" VARCHAR(16) NOT NULL, '
     '"edition" VARCHAR(64) NOT NULL, "state" VARCHAR(16) NOT NULL, "external_billing_ref" TEXT NOT NULL, '
     '"metadata" TEXT NOT NULL, "issued_at" {timestamp} NOT NULL, "terminated_at" {timestamp}, '
     'FOREIGN KEY ("partner_id") REFERENCES "partner" ("id") ON DELETE RESTRICT, '
     'FOREIGN KEY ("customer_id") REFERENCES "customer" ("id") ON DELETE RESTRICT, '
     'FOREIGN KEY ("contract_id") REFERENCES "contract" ("id") ON DELETE RESTRICT)',
    'CREATE UNIQUE INDEX IF NOT EXISTS "license_human_id" ON "license" ("human_id")',
    'CREATE INDEX IF NOT EXISTS "license_partner_id" ON "license" ("partner_id")',
    'CREATE INDEX IF NOT EXISTS "license_customer_id" ON "license" ("customer_id")',
    'CREATE INDEX IF NOT EXISTS "license_contract_id" ON "license" ("contract_id")',
    'CREATE INDEX IF NOT EXISTS "license_partner_id_issued_at_id" ON "license" ("partner_id", "issued_at", "id")',
    'CREATE INDEX IF NOT EXISTS "license_issued_at_id" ON "license" ("issued_at", "id")',
    'CREATE INDEX IF NOT EXISTS "license_customer_id_issued_at_id" ON "license" ("customer_id", "issued_at", "id")',
    'CREATE TABLE IF NOT EXISTS "note" ("id" {bigserial} NOT NULL PRIMARY KEY, "customer_id" VARCHAR(36) NOT NULL, '
     '"author" TEXT NOT NULL, "body" TEXT NOT NULL, "at" {timestamp} NOT NULL)',
    'CREATE INDEX IF NOT EXISTS "note_customer_id_id" ON "note" ("customer_id", "id")',
    'CREATE TABLE IF NOT EXISTS "transfer" ("id" VARCHAR(36) NOT NULL PRIMARY KEY, "human_id" VARCHAR(24) NOT NULL, '
     '"license_id" VARCHAR(36) NOT NULL, "from_partner_id" VARCHAR(36) NOT NULL, '
     '"from_customer_id" VARCHAR(36) NOT NULL, "from_contract_id" VARCHAR(36) NOT NULL, '
     '"to_partner_id" VARCHAR(36) NOT NULL, "to_customer_id" VARCHAR(36) NOT NULL, '
     '"to_contract_id" VARCHAR(36) NOT NULL, "reason" TEXT NOT NULL, "effective_date" DATE NOT NULL, '
     '"created_at" {timestamp} NOT NULL, "created_by" VARCHAR(36), "sync_error" TEXT, '
     'FOREIGN KEY ("license_id") REFERENCES "license" ("id") ON DELETE RESTRICT)',
    'CREATE UNIQUE INDEX IF NOT EXISTS "transfer_human_id" ON "transfer" ("human_id")',
    'CREATE INDEX IF NOT EXISTS "transfer_license_id" ON "transfer" ("license_id")',
    'CREATE INDEX IF NOT EXISTS "transfer_created_at_id" ON "transfer" ("created_at", "id")',
    'CREATE INDEX IF NOT EXISTS "transfer_from_partner_id_created_at" ON "transfer" ("from_partner_id", '
     '"created_at")',
    'CREATE INDEX IF NOT EXISTS "transfer_to_partner_id_created_at" ON "transfer" ("to_partner_id", "created_at")',
    'CREATE INDEX IF NOT EXISTS "transfer_license_id_created_at" ON "transfer" ("license_id", "created_at")',
)


def _v2_licensing(db):
    _run(db, _V2)
    # at most one primary contact per customer, held by the database
    db.execute_sql("CREATE UNIQUE INDEX IF NOT EXISTS contact_one_primary ON contact (customer_id) "
                   "WHERE is_primary")
    for table in APPEND_ONLY:
        _append_only(db, table)
    p = db.param
    for kind in "CLTP":
        db.execute_sql(f"INSERT INTO human_id_counter (kind, value) VALUES ({p}, {p}) ON CONFLICT DO NOTHING",
                       (kind, 1000))
    now = _now()
    for name in DEFAULT_EDITIONS:
        db.execute_sql(f"INSERT INTO edition (name, policy, updated_at) VALUES ({p}, {p}, {p}) "
                       "ON CONFLICT DO NOTHING", (name, name, now))


_STATEMENT_FROZEN = ("lines", "totals", "revision", "computed_at", "finalized_by", "finalized_at",
                     "partner_id", "period_start", "period_end", "supersedes_statement_id", "id")

_V3 = (
    'CREATE TABLE IF NOT EXISTS "statement" ("id" VARCHAR(36) NOT NULL PRIMARY KEY, '
     '"partner_id" VARCHAR(36) NOT NULL, "period_start" DATE NOT NULL, "period_end" DATE NOT NULL, '
     '"revision" INTEGER, "status" VARCHAR(16) NOT NULL, "totals" TEXT NOT NULL, "lines" TEXT NOT NULL, '
     '"computed_at" {timestamp} NOT NULL, "finalized_by" TEXT, "finalized_at" {timestamp}, '
     '"supersedes_statement_id" VARCHAR(36), '
     'FOREIGN KEY ("partner_id") REFERENCES "partner" ("id") ON DELETE RESTRICT)',
    'CREATE INDEX IF NOT EXISTS "statement_partner_id" ON "statement" ("partner_id")',
    'CREATE INDEX IF NOT EXISTS "statement_partner_id_period_start_revision" ON "statement" ("partner_id", '
     '"period_start", "revision")',
)


def _v3_billing(db):
    _run(db, _V3)
    db.execute_sql("CREATE UNIQUE INDEX IF NOT EXISTS statement_one_draft ON statement (partner_id, period_start) "
                   "WHERE status = 'draft'")
    db.execute_sql("CREATE UNIQUE INDEX IF NOT EXISTS statement_one_revision ON statement "
                   "(partner_id, period_start, revision) WHERE revision IS NOT NULL")
    db.execute_sql("CREATE INDEX IF NOT EXISTS ledger_event_ownership ON ledger_event "
                   "(partner_id, event, license_id)")
    # finalized statements are immutable: only finalized -> superseded, nothing else changes
    if is_postgres(db):
        same = " AND ".join(f"NEW.{c} IS NOT DISTINCT FROM OLD.{c}" for c in _STATEMENT_FROZEN)
        db.execute_sql(
            "CREATE OR REPLACE FUNCTION slipway_statement_frozen() RETURNS trigger AS $$ BEGIN "
            "IF OLD.status = 'draft' THEN RETURN COALESCE(NEW, OLD); END IF; "
            f"IF TG_OP = 'UPDATE' AND OLD.status = 'finalized' AND NEW.status = 'superseded' AND {same} "
            "THEN RETURN NEW; END IF; "
            "RAISE EXCEPTION 'finalized statements are immutable'; END $$ LANGUAGE plpgsql")
        db.execute_sql("DROP TRIGGER IF EXISTS statement_frozen ON statement")
        db.execute_sql("CREATE TRIGGER statement_frozen BEFORE UPDATE OR DELETE ON statement "
                       "FOR EACH ROW EXECUTE FUNCTION slipway_statement_frozen()")
    else:
        same = " AND ".join(f"NEW.{c} IS OLD.{c}" for c in _STATEMENT_FROZEN)
        db.execute_sql("CREATE TRIGGER IF NOT EXISTS statement_frozen_update BEFORE UPDATE ON statement "
                       f"WHEN OLD.status <> 'draft' AND NOT (OLD.status = 'finalized' AND NEW.status = 'superseded' "
                       f"AND {same}) BEGIN SELECT RAISE(ABORT, 'finalized statements are immutable'); END")
        db.execute_sql("CREATE TRIGGER IF NOT EXISTS statement_frozen_delete BEFORE DELETE ON statement "
                       "WHEN OLD.status <> 'draft' BEGIN SELECT RAISE(ABORT, 'finalized statements are immutable'); END")

_V4 = (
    'CREATE TABLE IF NOT EXISTS "panel_customer" ("id" VARCHAR(40) NOT NULL PRIMARY KEY, "name" TEXT NOT NULL, '
     '"email" TEXT NOT NULL, "created_at" {timestamp} NOT NULL)',
    'CREATE INDEX IF NOT EXISTS "panel_customer_created_at_id" ON "panel_customer" ("created_at", "id")',
    'CREATE TABLE IF NOT EXISTS "panel_api_key" ("id" VARCHAR(16) NOT NULL PRIMARY KEY, "name" TEXT NOT NULL, '
     '"role" VARCHAR(16) NOT NULL, "secret_hash" VARCHAR(64) NOT NULL, "rate_limit_rpm" INTEGER NOT NULL, '
     '"expires_at" {timestamp}, "denied_permissions" TEXT NOT NULL, "customer_id" VARCHAR(40), '
     '"created_at" {timestamp} NOT NULL, "revoked_at" {timestamp}, '
     'FOREIGN KEY ("customer_id") REFERENCES "panel_customer" ("id") ON DELETE RESTRICT)',
    'CREATE INDEX IF NOT EXISTS "panel_api_key_customer_id" ON "panel_api_key" ("customer_id")',
)


def _v4_panel_access(db):
    _run(db, _V4)

_V5 = (
    'CREATE TABLE IF NOT EXISTS "deploy_job" ("id" VARCHAR(40) NOT NULL PRIMARY KEY, '
     '"service_id" VARCHAR(40) NOT NULL, "kind" VARCHAR(16) NOT NULL, "state" VARCHAR(16) NOT NULL, '
     '"step" VARCHAR(32) NOT NULL, "error" TEXT, "created_at" {timestamp} NOT NULL, '
     '"updated_at" {timestamp} NOT NULL)',
    'CREATE INDEX IF NOT EXISTS "deploy_job_service_id" ON "deploy_job" ("service_id")',
    'CREATE INDEX IF NOT EXISTS "deploy_job_state" ON "deploy_job" ("state")',
    'CREATE TABLE IF NOT EXISTS "service" ("id" VARCHAR(40) NOT NULL PRIMARY KEY, "name" VARCHAR(63) NOT NULL, '
     '"customer_id" VARCHAR(40) NOT NULL, "deploy_method" VARCHAR(32) NOT NULL, "status" VARCHAR(16) NOT NULL, '
     '"template_id" VARCHAR(64), "compose" TEXT NOT NULL, "variables" TEXT NOT NULL, "url" TEXT NOT NULL, '
     '"created_at" {timestamp} NOT NULL, "updated_at" {timestamp} NOT NULL, "deployed_at" {timestamp}, '
     '"health_status" VARCHAR(16) NOT NULL, "health_checked_at" {timestamp}, "health_failures" INTEGER NOT NULL, '
     'FOREIGN KEY ("customer_id") REFERENCES "panel_customer" ("id") ON DELETE RESTRICT)',
    'CREATE UNIQUE INDEX IF NOT EXISTS "service_name" ON "service" ("name")',
    'CREATE INDEX IF NOT EXISTS "service_customer_id" ON "service" ("customer_id")',
    'CREATE TABLE IF NOT EXISTS "service_event" ("id" {bigserial} NOT NULL PRIMARY KEY, '
     '"service_id" VARCHAR(40) NOT NULL, "type" VARCHAR(16) NOT NULL, "status" VARCHAR(16) NOT NULL, '
     '"message" TEXT NOT NULL, "timestamp" {timestamp} NOT NULL)',
    'CREATE INDEX IF NOT EXISTS "service_event_service_id_id" ON "service_event" ("service_id", "id")',
)


def _v5_services(db):
    """Services as migration 5 made them: the columns of git and AI deploys (9), of
    customer limits (11, 19) and of releases (16) come with their migrations."""
    _run(db, _V5)

_V6 = (
    'CREATE TABLE IF NOT EXISTS "service_route" ("hostname" VARCHAR(253) NOT NULL PRIMARY KEY, '
     '"service_id" VARCHAR(40) NOT NULL, "target" VARCHAR(255) NOT NULL, "created_at" {timestamp} NOT NULL, '
     '"updated_at" {timestamp} NOT NULL)',
    'CREATE UNIQUE INDEX IF NOT EXISTS "service_route_service_id" ON "service_route" ("service_id")',
)


def _v6_routes(db):
    """One route record per service then: migration 17 makes the index a plain one."""
    _run(db, _V6)

_V7 = (
    'CREATE TABLE IF NOT EXISTS "panel_login" ("state_hash" VARCHAR(64) NOT NULL PRIMARY KEY, '
     '"nonce" VARCHAR(128) NOT NULL, "code_verifier" VARCHAR(128) NOT NULL, "next_path" TEXT NOT NULL, '
     '"expires_at" {timestamp} NOT NULL)',
    'CREATE INDEX IF NOT EXISTS "panel_login_expires_at" ON "panel_login" ("expires_at")',
    'CREATE TABLE IF NOT EXISTS "panel_user" ("email" VARCHAR(320) NOT NULL PRIMARY KEY, '
     '"role" VARCHAR(16) NOT NULL, "customer_id" VARCHAR(40), "created_at" {timestamp} NOT NULL, '
     '"updated_at" {timestamp} NOT NULL, '
     'FOREIGN KEY ("customer_id") REFERENCES "panel_customer" ("id") ON DELETE CASCADE)',
    'CREATE INDEX IF NOT EXISTS "panel_user_customer_id" ON "panel_user" ("customer_id")',
    'CREATE TABLE IF NOT EXISTS "panel_session" ("id" VARCHAR(64) NOT NULL PRIMARY KEY, '
     '"email" VARCHAR(320) NOT NULL, "created_at" {timestamp} NOT NULL, "expires_at" {timestamp} NOT NULL, '
     '"revoked_at" {timestamp}, FOREIGN KEY ("email") REFERENCES "panel_user" ("email") ON DELETE CASCADE)',
    'CREATE INDEX IF NOT EXISTS "panel_session_email" ON "panel_session" ("email")',
    'CREATE INDEX IF NOT EXISTS "panel_session_expires_at" ON "panel_session" ("expires_at")',
)


def _v7_panel_sessions(db):
    _run(db, _V7)

_V8 = (
    'CREATE TABLE IF NOT EXISTS "backup" ("id" VARCHAR(40) NOT NULL PRIMARY KEY, "service_id" VARCHAR(40) NOT NULL, '
     '"status" VARCHAR(16) NOT NULL, "progress" INTEGER NOT NULL, "size_bytes" {bigint} NOT NULL, '
     '"sha256" VARCHAR(64), "volumes" TEXT NOT NULL, "error" TEXT, "created_at" {timestamp} NOT NULL, '
     '"updated_at" {timestamp} NOT NULL, "completed_at" {timestamp}, "restore_status" VARCHAR(16), '
     '"restore_progress" INTEGER NOT NULL, "restore_requested_at" {timestamp}, "restore_completed_at" {timestamp}, '
     '"restore_error" TEXT, "restore_containers" TEXT, '
     'FOREIGN KEY ("service_id") REFERENCES "service" ("id") ON DELETE CASCADE)',
    'CREATE INDEX IF NOT EXISTS "backup_service_id" ON "backup" ("service_id")',
    'CREATE INDEX IF NOT EXISTS "backup_status" ON "backup" ("status")',
    'CREATE INDEX IF NOT EXISTS "backup_restore_status" ON "backup" ("restore_status")',
    'CREATE INDEX IF NOT EXISTS "backup_service_id_created_at" ON "backup" ("service_id", "created_at")',
)


def _v8_backups(db):
    _run(db, _V8)


def _v9_service_sources(db):
    """Columns of git and AI deploys on ``service``."""
    _add_columns(db, "service", {"git_url": peewee.TextField(null=True),
                                 "git_branch": peewee.CharField(max_length=255, null=True),
                                 "ai_url": peewee.TextField(null=True),
                                 "source_commit": peewee.CharField(max_length=64, null=True)})

_V10 = (
    'CREATE TABLE IF NOT EXISTS "worker_lease" ("worker_id" VARCHAR(40) NOT NULL PRIMARY KEY, '
     '"heartbeat_at" {timestamp} NOT NULL)',
)


def _v10_worker_leases(db):
    _run(db, _V10)
    _add_columns(db, "deploy_job", {"owner": peewee.CharField(max_length=40, null=True)})
    _add_columns(db, "backup", {"owner": peewee.CharField(max_length=40, null=True)})


def _measure_services(db, where: str, measure) -> None:
    """``measure(compose, variables)`` -> the columns to set, for each service ``where``."""
    p = db.param
    for service_id, compose, variables in db.execute_sql(
            f"SELECT id, compose, variables FROM service WHERE {where}").fetchall():
        values = measure(compose, json.loads(variables or "{}"))
        assignments = ", ".join(f"{column} = {p}" for column in values)
        db.execute_sql(f"UPDATE service SET {assignments} WHERE id = {p}", (*values.values(), service_id))


def _v11_customer_limits(db):
    """Customers' own limits, and on each service what it counts against them. Services
    that exist already are measured from their kept compose (a component without
    ``mem_limit`` / ``cpus`` counts ``SLIPWAY_DEFAULT_MEMORY_MB`` / ``SLIPWAY_DEFAULT_CPUS``;
    no compose yet, one such component)."""
    from app.config import ConfigError, container_defaults
    from core.panel.customers import Quota
    from core.panel.compose import parse_compose

    _add_columns(db, "panel_customer", {"max_services": peewee.IntegerField(null=True),
                                        "max_memory_mb": peewee.BigIntegerField(null=True),
                                        "max_millicpus": peewee.BigIntegerField(null=True)})
    _add_columns(db, "service", {
        "memory_mb": peewee.BigIntegerField(default=0, constraints=[peewee.SQL("DEFAULT 0")]),
        "millicpus": peewee.BigIntegerField(default=0, constraints=[peewee.SQL("DEFAULT 0")])})
    try:
        memory_mb, cpus = container_defaults(os.environ)
    except ConfigError:  # the server refuses to start with these anyway; measure with the defaults
        memory_mb, cpus = 512, 1.0
    quota = Quota(container_memory_mb=memory_mb, container_cpus=cpus, read_compose=parse_compose)

    def measure(compose, variables):
        footprint = quota.footprint_of_compose(compose, variables) or quota.footprint(())
        return {"memory_mb": footprint.memory_mb, "millicpus": footprint.millicpus}

    _measure_services(db, "memory_mb = 0 AND millicpus = 0", measure)


def _v12_job_attempts(db):
    _add_columns(db, "deploy_job", {"attempts": peewee.IntegerField(default=0)})

_V13 = (
    'CREATE TABLE IF NOT EXISTS "panel_key_session" ("id" VARCHAR(64) NOT NULL PRIMARY KEY, '
     '"api_key_id" VARCHAR(16) NOT NULL, "created_at" {timestamp} NOT NULL, "expires_at" {timestamp} NOT NULL, '
     '"revoked_at" {timestamp}, FOREIGN KEY ("api_key_id") REFERENCES "panel_api_key" ("id") ON DELETE CASCADE)',
    'CREATE INDEX IF NOT EXISTS "panel_key_session_api_key_id" ON "panel_key_session" ("api_key_id")',
    'CREATE INDEX IF NOT EXISTS "panel_key_session_expires_at" ON "panel_key_session" ("expires_at")',
)


def _v13_key_sessions(db):
    _run(db, _V13)

_V14 = (
    'CREATE TABLE IF NOT EXISTS "idempotency_key" ("id" {serial} NOT NULL PRIMARY KEY, '
     '"credential" VARCHAR(80) NOT NULL, "idempotency_key" VARCHAR(255) NOT NULL, "method" VARCHAR(8) NOT NULL, '
     '"path" TEXT NOT NULL, "fingerprint" VARCHAR(64) NOT NULL, "attempt" VARCHAR(32) NOT NULL, '
     '"state" VARCHAR(16) NOT NULL, "status" INTEGER, "content_type" TEXT, "headers" TEXT, "body" {blob}, '
     '"created_at" {timestamp} NOT NULL, "claimed_at" {timestamp} NOT NULL)',
    'CREATE INDEX IF NOT EXISTS "idempotency_key_created_at" ON "idempotency_key" ("created_at")',
    'CREATE UNIQUE INDEX IF NOT EXISTS "idempotency_key_credential_idempotency_key" ON "idempotency_key" ("credential", '
     '"idempotency_key")',
)


def _v14_idempotency_keys(db):
    _run(db, _V14)

_V15 = (
    'CREATE TABLE IF NOT EXISTS "webhook_endpoint" ("id" VARCHAR(36) NOT NULL PRIMARY KEY, '
     '"partner_id" VARCHAR(36) NOT NULL, "url" TEXT NOT NULL, "events" TEXT NOT NULL, "secret" VARCHAR(80) NOT NULL, '
     '"created_at" {timestamp} NOT NULL, FOREIGN KEY ("partner_id") REFERENCES "partner" ("id") ON DELETE RESTRICT)',
    'CREATE INDEX IF NOT EXISTS "webhook_endpoint_partner_id" ON "webhook_endpoint" ("partner_id")',
    'CREATE TABLE IF NOT EXISTS "webhook_delivery" ("id" VARCHAR(36) NOT NULL PRIMARY KEY, '
     '"endpoint_id" VARCHAR(36) NOT NULL, "event_id" {bigint} NOT NULL, "event" VARCHAR(40) NOT NULL, '
     '"status" VARCHAR(16) NOT NULL, "attempts" INTEGER NOT NULL, "last_status_code" INTEGER, "last_error" TEXT, '
     '"created_at" {timestamp} NOT NULL, "delivered_at" {timestamp}, "next_attempt_at" {timestamp} NOT NULL, '
     '"claimed_by" VARCHAR(40), "claimed_until" {timestamp}, '
     'FOREIGN KEY ("endpoint_id") REFERENCES "webhook_endpoint" ("id") ON DELETE CASCADE)',
    'CREATE INDEX IF NOT EXISTS "webhook_delivery_endpoint_id" ON "webhook_delivery" ("endpoint_id")',
    'CREATE INDEX IF NOT EXISTS "webhook_delivery_endpoint_id_event_id" ON "webhook_delivery" ("endpoint_id", '
     '"event_id")',
    'CREATE INDEX IF NOT EXISTS "webhook_delivery_status_next_attempt_at" ON "webhook_delivery" ("status", '
     '"next_attempt_at")',
)


def _v15_webhooks(db):
    _run(db, _V15)

_V16 = (
    'CREATE TABLE IF NOT EXISTS "service_release" ("id" VARCHAR(40) NOT NULL PRIMARY KEY, '
     '"service_id" VARCHAR(40) NOT NULL, "number" INTEGER NOT NULL, "deploy_job_id" VARCHAR(40) NOT NULL, '
     '"images" TEXT NOT NULL, "compose" TEXT NOT NULL, "variables" TEXT NOT NULL, "source_commit" VARCHAR(64), '
     '"created_at" {timestamp} NOT NULL, "created_by" VARCHAR(80) NOT NULL)',
    'CREATE UNIQUE INDEX IF NOT EXISTS "service_release_service_id_number" ON "service_release" ("service_id", '
     '"number")',
)


def _v16_releases(db):
    _run(db, _V16)
    _add_columns(db, "service", {"release_number": peewee.IntegerField(null=True)})
    _add_columns(db, "deploy_job", {
        "release_id": peewee.CharField(max_length=40, null=True),
        "target_release_id": peewee.CharField(max_length=40, null=True),
        "cancel_requested": peewee.BooleanField(default=False, constraints=[peewee.SQL("DEFAULT FALSE")]),
        "finished_at": peewee.DateTimeField(null=True),
        "created_by": peewee.CharField(max_length=80, default="system",
                                       constraints=[peewee.SQL("DEFAULT 'system'")])})

_V17 = (
    'CREATE TABLE IF NOT EXISTS "custom_domain" ("hostname" VARCHAR(253) NOT NULL PRIMARY KEY, '
     '"service_id" VARCHAR(40) NOT NULL, "created_at" {timestamp} NOT NULL)',
    'CREATE INDEX IF NOT EXISTS "custom_domain_service_id" ON "custom_domain" ("service_id")',
)


def _v17_custom_domains(db):
    """Custom domains; a service may have several route records (its name under the base
    domain and one per custom domain): the unique index on ``service_route.service_id``
    (migration 6) becomes a plain one."""
    _run(db, _V17)
    db.execute_sql("DROP INDEX IF EXISTS service_route_service_id")
    db.execute_sql("CREATE INDEX IF NOT EXISTS service_route_service_id ON service_route (service_id)")


_REACH = "COALESCE({event}.customer_id, (SELECT l.customer_id FROM license l WHERE l.id = {event}.license_id))"


def _fill_ledger_reach(db) -> None:
    db.execute_sql("UPDATE ledger_event SET reach_customer_id = customer_id WHERE customer_id IS NOT NULL")
    db.execute_sql("UPDATE ledger_event SET reach_customer_id = "
                   "(SELECT l.customer_id FROM license l WHERE l.id = ledger_event.license_id) "
                   "WHERE customer_id IS NULL")


def _ledger_reach_triggers(db) -> None:
    """The triggers that keep ``ledger_event.reach_customer_id`` (migrations 18 and 20;
    frozen with them)."""
    moved = ("UPDATE ledger_event SET reach_customer_id = NEW.customer_id WHERE license_id = NEW.id "
             "AND customer_id IS NULL")
    reach = f"({_REACH.format(event='NEW')})"
    if is_postgres(db):
        db.execute_sql(
            "CREATE OR REPLACE FUNCTION slipway_ledger_reach() RETURNS trigger AS $$ BEGIN "
            f"IF TG_OP = 'INSERT' THEN NEW.reach_customer_id := {reach}; "
            f"ELSIF NEW.reach_customer_id IS DISTINCT FROM {reach} THEN "
            "RAISE EXCEPTION '%% is append-only', TG_TABLE_NAME; END IF; "
            "RETURN NEW; END $$ LANGUAGE plpgsql")
        db.execute_sql("DROP TRIGGER IF EXISTS ledger_event_reach ON ledger_event")
        db.execute_sql("CREATE TRIGGER ledger_event_reach BEFORE INSERT OR UPDATE OF reach_customer_id "
                       "ON ledger_event FOR EACH ROW EXECUTE FUNCTION slipway_ledger_reach()")
        db.execute_sql(
            "CREATE OR REPLACE FUNCTION slipway_license_moved() RETURNS trigger AS $$ BEGIN "
            f"{moved}; RETURN NEW; END $$ LANGUAGE plpgsql")
        db.execute_sql("DROP TRIGGER IF EXISTS license_moved ON license")
        db.execute_sql("CREATE TRIGGER license_moved AFTER UPDATE OF customer_id ON license FOR EACH ROW "
                       "WHEN (OLD.customer_id IS DISTINCT FROM NEW.customer_id) "
                       "EXECUTE FUNCTION slipway_license_moved()")
    else:
        db.execute_sql("CREATE TRIGGER IF NOT EXISTS ledger_event_reach AFTER INSERT ON ledger_event "
                       f"WHEN NEW.reach_customer_id IS NOT {reach} BEGIN UPDATE ledger_event SET reach_customer_id = "
                       f"{reach} WHERE id = NEW.id; END")
        db.execute_sql("CREATE TRIGGER IF NOT EXISTS ledger_event_reach_kept BEFORE UPDATE OF reach_customer_id "
                       f"ON ledger_event WHEN NEW.reach_customer_id IS NOT {reach} "
                       "BEGIN SELECT RAISE(ABORT, 'ledger_event is append-only'); END")
        db.execute_sql("CREATE TRIGGER IF NOT EXISTS license_moved AFTER UPDATE OF customer_id ON license "
                       f"WHEN OLD.customer_id IS NOT NEW.customer_id BEGIN {moved}; END")


def _v18_ledger_reach(db):
    """The customer each ledger event's activity belongs to, in an internal column with an
    index, so a customer's activity is one index range (events without ``customer_id``
    reach their license's customer). The database keeps it, whoever writes: an insert
    gets it (whatever value it named), when a license moves to another customer its
    events without ``customer_id`` follow (as reading through the license did before), and
    an UPDATE to any other value is refused. Filled here; the append-only trigger then
    refuses an UPDATE of every other column."""
    _add_columns(db, "ledger_event", {"reach_customer_id": peewee.CharField(max_length=36, null=True)})
    if is_postgres(db):
        db.execute_sql("DROP TRIGGER IF EXISTS ledger_event_append_only ON ledger_event")
    else:
        db.execute_sql("DROP TRIGGER IF EXISTS ledger_event_no_update")
    _fill_ledger_reach(db)
    db.execute_sql("CREATE INDEX IF NOT EXISTS ledger_event_reach_customer_id_id "
                   "ON ledger_event (reach_customer_id, id)")
    _append_only(db, "ledger_event", LEDGER_COLUMNS)
    _ledger_reach_triggers(db)


def _v19_customer_containers(db):
    """The customers' ``containers`` limit, and on each service the containers it counts
    against it (one per compose service), measured from its kept compose (no compose
    yet: one)."""
    from core.panel.compose import parse_compose
    from core.panel.customers import Quota

    _add_columns(db, "panel_customer", {"max_containers": peewee.IntegerField(null=True)})
    _add_columns(db, "service", {
        "containers": peewee.IntegerField(default=0, constraints=[peewee.SQL("DEFAULT 0")])})
    quota = Quota(read_compose=parse_compose)

    def measure(compose, variables):
        footprint = quota.footprint_of_compose(compose, variables) or quota.footprint(())
        return {"containers": footprint.containers}

    _measure_services(db, "containers = 0", measure)


def _v20_ledger_reach_again(db):
    """Migration 18's triggers as it makes them now. Its first shipped form kept a
    ``reach_customer_id`` an insert named and let an UPDATE change it (and on SQLite had
    no ``ledger_event_reach_kept``); databases it migrated keep those triggers, as 18 is
    not run again. Here they are made anew, and the reach filled again (an event written
    meanwhile may hold a value it named)."""
    if is_postgres(db):
        db.execute_sql("DROP TRIGGER IF EXISTS ledger_event_reach ON ledger_event")
    else:
        for trigger in ("ledger_event_reach", "ledger_event_reach_kept", "license_moved"):
            db.execute_sql(f"DROP TRIGGER IF EXISTS {trigger}")
    _fill_ledger_reach(db)
    _ledger_reach_triggers(db)


def _v21_event_outbox(db):
    """The event outbox and its deliveries (the plugins' event subscribers,
    app.extensions): every panel and ledger event, written in the transaction that made
    it, and which subscriber has handled which."""
    _run(db, [
        "CREATE TABLE IF NOT EXISTS event_outbox (id {bigserial} NOT NULL PRIMARY KEY, "
        "topic VARCHAR(40) NOT NULL, service_id VARCHAR(64), customer_id VARCHAR(64), data TEXT NOT NULL, "
        "at {timestamp} NOT NULL)",
        "CREATE TABLE IF NOT EXISTS event_delivery (subscriber VARCHAR(80) NOT NULL, event_id {bigint} NOT NULL, "
        "delivered_at {timestamp} NOT NULL, PRIMARY KEY (subscriber, event_id))",
    ])


def _v22_backup_destinations(db):
    """Backups gain where their archive is stored (``destination``: existing ones are at
    ``local``), what they hold (``kind``: existing ones are ``volumes``) and their
    verification (a job on the row, like the restore: ``verify_status``; ``verified_at``,
    ``verify_error``). The archive's checksum stays in ``sha256``."""
    _add_columns(db, "backup", {"destination": peewee.CharField(max_length=64, default="local"),
                                "kind": peewee.CharField(max_length=16, default="volumes"),
                                "verify_status": peewee.CharField(max_length=16, null=True),
                                "verified_at": peewee.DateTimeField(null=True),
                                "verify_error": peewee.TextField(null=True)})
    _run(db, ['CREATE INDEX IF NOT EXISTS "backup_verify_status" ON "backup" ("verify_status")'])


def _v23_service_secrets(db):
    """Secret template variables stored encrypted (their values in ``secret_values``,
    AES-GCM; ``variables`` keeps ``***`` in their place), on services and on the releases
    that recorded them; and each service's choice to join its customer's network."""
    _add_columns(db, "service", {
        "secret_values": peewee.TextField(null=True),
        "customer_network": peewee.BooleanField(default=False, constraints=[peewee.SQL("DEFAULT FALSE")])})
    _add_columns(db, "service_release", {"secret_values": peewee.TextField(null=True)})


_V24 = (
    'CREATE TABLE IF NOT EXISTS "backup_policy" ("service_id" VARCHAR(40) NOT NULL PRIMARY KEY, '
    '"schedule" VARCHAR(200) NOT NULL, "destination" VARCHAR(64) NOT NULL, "keep_last" INTEGER NOT NULL, '
    '"verify" {boolean} NOT NULL, "next_run_at" {timestamp} NOT NULL, "created_at" {timestamp} NOT NULL, '
    '"updated_at" {timestamp} NOT NULL, "last_run_at" {timestamp}, "last_backup_id" VARCHAR(40), '
    'FOREIGN KEY ("service_id") REFERENCES "service" ("id") ON DELETE CASCADE)',
    'CREATE INDEX IF NOT EXISTS "backup_policy_next_run_at" ON "backup_policy" ("next_run_at")',
)


def _v24_backup_policies(db):
    """Backup policies (a cron schedule per service, retention, verification), and which
    backups a policy made (``backup.scheduled``; those already there were asked for)."""
    _run(db, _V24)
    _add_columns(db, "backup", {
        "scheduled": peewee.BooleanField(default=False, constraints=[peewee.SQL("DEFAULT FALSE")])})


def _v25_restore_into_new_service(db):
    """A restore's target service when it is not the backup's own (a restore into a new
    service, ``core.panel.backups.restore_backup``); none: the backup's service."""
    _add_columns(db, "backup", {"restore_service_id": peewee.CharField(max_length=40, null=True)})


_V26 = (
    'CREATE TABLE IF NOT EXISTS "deploy_key" ("id" VARCHAR(40) NOT NULL PRIMARY KEY, "name" TEXT NOT NULL, '
    '"customer_id" VARCHAR(40) NOT NULL, "public_key" TEXT NOT NULL, "fingerprint" VARCHAR(64) NOT NULL, '
    '"private_key" TEXT NOT NULL, "created_at" {timestamp} NOT NULL, '
    'FOREIGN KEY ("customer_id") REFERENCES "panel_customer" ("id") ON DELETE CASCADE)',
    'CREATE INDEX IF NOT EXISTS "deploy_key_customer_id" ON "deploy_key" ("customer_id")',
)


def _v26_deploy_keys(db):
    """Deploy keys (``core.panel.deploy_keys``): a customer's Ed25519 pairs, the private
    half sealed with ``SLIPWAY_SECRET_KEY`` (``private_key``, as secret variables are);
    and on each service the key its ssh clones use (``deploy_key_id``, none: no key)."""
    _run(db, _V26)
    _add_columns(db, "service", {"deploy_key_id": peewee.CharField(max_length=40, null=True)})


_V27 = (
    'CREATE TABLE IF NOT EXISTS "git_delivery" ("service_id" VARCHAR(40) NOT NULL, '
    '"delivery_id" VARCHAR(200) NOT NULL, "provider" VARCHAR(32) NOT NULL, "received_at" {timestamp} NOT NULL, '
    'PRIMARY KEY ("service_id", "delivery_id"), '
    'FOREIGN KEY ("service_id") REFERENCES "service" ("id") ON DELETE CASCADE)',
)


def _v27_push_webhooks(db):
    """Deploy on push: each service's webhook secret (encrypted like the secret variables,
    ``app.storage.secrets``) and whether a push deploys it (``auto_deploy``, on by
    default); the commit a deploy job is to deploy (a push's, or none: the branch's
    newest); the git providers' deliveries each service received (one per delivery id:
    a delivery sent again runs nothing)."""
    _add_columns(db, "service", {
        "webhook_secret": peewee.TextField(null=True),
        "auto_deploy": peewee.BooleanField(default=True, constraints=[peewee.SQL("DEFAULT TRUE")])})
    _add_columns(db, "deploy_job", {"source_commit": peewee.CharField(max_length=64, null=True)})
    _run(db, _V27)


def _v28_previews(db):
    """Preview environments (``core.panel.previews``): a git service's ``previews`` and
    ``previews_from_forks``; a preview's parent (``preview_of``) and pull-request number,
    one preview per parent and number (a unique index)."""
    _add_columns(db, "service", {
        "previews": peewee.BooleanField(default=False, constraints=[peewee.SQL("DEFAULT FALSE")]),
        "previews_from_forks": peewee.BooleanField(default=False, constraints=[peewee.SQL("DEFAULT FALSE")]),
        "preview_of": peewee.CharField(max_length=40, null=True),
        "preview_number": peewee.IntegerField(null=True)})
    _run(db, ['CREATE UNIQUE INDEX IF NOT EXISTS "service_preview_of_preview_number" '
              'ON "service" ("preview_of", "preview_number")'])



def _v29_event_subscriber_claims(db):
    """Which process delivers each event subscriber's events (app.extensions
    ``OutboxDelivery``): one at a time across the processes sharing the database, so a
    subscriber hears its events in order; ``holder`` is that process's worker lease."""
    _run(db, [
        "CREATE TABLE IF NOT EXISTS event_subscriber_claim (subscriber VARCHAR(80) NOT NULL PRIMARY KEY, "
        "holder VARCHAR(64) NOT NULL, claimed_at {timestamp} NOT NULL)",
    ])

_V33 = (
    'CREATE TABLE IF NOT EXISTS "preview_job" ("id" VARCHAR(40) NOT NULL PRIMARY KEY, '
    '"service_id" VARCHAR(40) NOT NULL, "customer_id" VARCHAR(40) NOT NULL, "number" INTEGER NOT NULL, '
    '"request" TEXT NOT NULL, "state" VARCHAR(16) NOT NULL, "owner" VARCHAR(64), "answer" TEXT, '
    '"created_at" {timestamp} NOT NULL, "updated_at" {timestamp} NOT NULL, '
    'FOREIGN KEY ("service_id") REFERENCES "service" ("id") ON DELETE CASCADE)',
    'CREATE INDEX IF NOT EXISTS "preview_job_state_created_at" ON "preview_job" ("state", "created_at")',
    'CREATE INDEX IF NOT EXISTS "preview_job_service_id" ON "preview_job" ("service_id")',
)


def _v33_preview_jobs(db):
    """The work a pull-request delivery queues (``core.panel.previews``): a preview's
    create, redeploy or delete runs as a job, off the delivery's request (it looks a
    fork's host up and calls the engine), one at a time per customer, taken back from a
    stopped process (``owner``: its worker lease)."""
    _run(db, _V33)


def _v30_ssh_host_keys(db):
    """The ssh host key each service's clones must be shown (``core.panel.host_keys``):
    ``<type> <base64>`` as a known-hosts file holds it, pinned by the first ssh clone;
    none until then."""
    _add_columns(db, "service", {"ssh_host_key": peewee.TextField(null=True)})

_V31 = (
    ('CREATE TABLE IF NOT EXISTS "release_ancestor" ("release_id" VARCHAR(40) NOT NULL, '
     '"service_id" VARCHAR(40) NOT NULL, "commit" VARCHAR(64) NOT NULL, '
     'PRIMARY KEY ("release_id", "commit"))'),
    'CREATE INDEX IF NOT EXISTS "release_ancestor_service_id" ON "release_ancestor" ("service_id")',
)


def _v31_forward_pushes(db):
    """Pushes deploy forward only (``core.panel.pushes``): the ancestors of the commit
    each release deployed, as far as the deploy's clone read them (``release_ancestor``);
    the commits pushed into a queued push deploy (``deploy_job.source_commits``, JSON, in
    the order they came), of which the job deploys the newest of the branch's history."""
    _add_columns(db, "deploy_job", {"source_commits": peewee.TextField(null=True)})
    _run(db, _V31)


def _v35_release_branches(db):
    """The branch each release's clone checked out (``service_release.source_branch``;
    null for releases of methods that clone nothing and for those made before): a git or
    ai service without ``git_branch`` tracks it for pushes (``core.panel.pushes``)."""
    _add_columns(db, "service_release", {"source_branch": peewee.TextField(null=True)})


def _v36_kept_host_ports(db):
    """The host ports each service's components keep across redeploys, rollbacks and
    restarts (``service.host_ports``, JSON ``{component: {container port: host port}}``;
    null until its next successful deploy records them: ``core.panel.deploy_job``)."""
    _add_columns(db, "service", {"host_ports": peewee.TextField(null=True)})


_V38 = (
    'CREATE TABLE IF NOT EXISTS "service_task" ("id" VARCHAR(40) NOT NULL PRIMARY KEY, '
    '"service_id" VARCHAR(40) NOT NULL, "name" TEXT NOT NULL, "schedule" VARCHAR(200) NOT NULL, '
    '"component" VARCHAR(63) NOT NULL, "command" TEXT NOT NULL, "timeout_s" INTEGER NOT NULL, '
    '"enabled" {boolean} NOT NULL, "next_run_at" {timestamp} NOT NULL, "created_at" {timestamp} NOT NULL, '
    '"updated_at" {timestamp} NOT NULL, '
    'FOREIGN KEY ("service_id") REFERENCES "service" ("id") ON DELETE CASCADE)',
    'CREATE INDEX IF NOT EXISTS "service_task_service_id" ON "service_task" ("service_id")',
    'CREATE INDEX IF NOT EXISTS "service_task_next_run_at" ON "service_task" ("next_run_at")',
    'CREATE TABLE IF NOT EXISTS "task_run" ("id" VARCHAR(40) NOT NULL PRIMARY KEY, '
    '"task_id" VARCHAR(40) NOT NULL, "service_id" VARCHAR(40) NOT NULL, "customer_id" VARCHAR(40) NOT NULL, '
    '"status" VARCHAR(16) NOT NULL, "trigger" VARCHAR(16) NOT NULL, "owner" VARCHAR(64), '
    '"created_at" {timestamp} NOT NULL, "started_at" {timestamp}, "finished_at" {timestamp}, '
    '"exit_code" INTEGER, "output" TEXT NOT NULL, '
    'FOREIGN KEY ("task_id") REFERENCES "service_task" ("id") ON DELETE CASCADE)',
    'CREATE INDEX IF NOT EXISTS "task_run_task_id" ON "task_run" ("task_id")',
    'CREATE INDEX IF NOT EXISTS "task_run_status_created_at" ON "task_run" ("status", "created_at")',
)


def _v38_scheduled_tasks(db):
    """Scheduled tasks of services (``core.panel.tasks``: a command on a cron schedule in a
    component's container) and their runs, with output and exit status."""
    _run(db, _V38)


#: the source columns migration 9 made, which migration 37 moves into ``deploy_source``
#: (frozen with it)
_V37_MOVED = ("git_url", "git_branch", "ai_url")


def _v37_method_sources(db):
    """The fields a deploy method keeps per service in one JSON column
    (``service.deploy_source``: ``{field: value}``, ``DeployMethod.source_fields``), so a
    method installed with pip keeps its own without a migration of core's tables. Each
    service's ``git_url``, ``git_branch`` and ``ai_url`` that has a value moves into it
    (the others get ``{}``), then the three columns are dropped (``ALTER TABLE ... DROP
    COLUMN``: PostgreSQL, SQLite 3.35 and later; peewee's migrator copies the table on an
    older SQLite). Idempotent: a column already gone is not read again."""
    _add_columns(db, "service", {"deploy_source": peewee.TextField(null=True)})
    have = {column.name for column in db.get_columns("service")}
    moved = [name for name in _V37_MOVED if name in have]
    p = db.param
    columns = "".join(f', "{name}"' for name in moved)
    rows = db.execute_sql(f'SELECT "id", "deploy_source"{columns} FROM "service"').fetchall()
    for row in rows:
        kept = json.loads(row[1]) if row[1] else {}
        kept.update({name: value for name, value in zip(moved, row[2:]) if value is not None})
        db.execute_sql(f'UPDATE "service" SET "deploy_source" = {p} WHERE "id" = {p}',
                       (json.dumps(kept, sort_keys=True), row[0]))
    if moved:
        from playhouse.migrate import SchemaMigrator, migrate as apply

        migrator = SchemaMigrator.from_database(db)
        apply(*[migrator.drop_column("service", name, cascade=False) for name in moved])


MIGRATIONS = [
    (1, "partners, partner API tokens, contracts", _v1_identity),
    (2, "customers, contacts, notes, editions, licenses, transfers, activity ledger", _v2_licensing),
    (3, "statements (drafts, finalized, superseded); ledger index for billing", _v3_billing),
    (4, "panel customers and API keys", _v4_panel_access),
    (5, "services, deploy jobs, service events", _v5_services),
    (6, "route records of services under the base domain", _v6_routes),
    (7, "panel users, browser sessions, pending logins (OIDC)", _v7_panel_sessions),
    (8, "service backups and their restores", _v8_backups),
    (9, "service sources: git url and branch, ai url, deployed commit", _v9_service_sources),
    (10, "worker leases; the owner of each running deploy, backup and restore job", _v10_worker_leases),
    (11, "customer limits; the memory and CPUs each service counts against them", _v11_customer_limits),
    (12, "deploy jobs count their claims (a job interrupted again and again is given up)", _v12_job_attempts),
    (13, "browser sessions opened with an API key (the web frontend's sign-in)", _v13_key_sessions),
    (14, "idempotency keys", _v14_idempotency_keys),
    (15, "partner webhook endpoints and their deliveries", _v15_webhooks),
    (16, "releases; deploy jobs gain kind rollback, cancel, release, finish time", _v16_releases),
    (17, "custom domains; several route records per service", _v17_custom_domains),
    (18, "ledger events: the customer whose activity each belongs to (internal, indexed)", _v18_ledger_reach),
    (19, "customer limits: containers; the containers each service counts against them", _v19_customer_containers),
    (20, "ledger events: migration 18's triggers made anew on databases its first form migrated",
     _v20_ledger_reach_again),
    (21, "event outbox for the plugins' event subscribers, and its deliveries", _v21_event_outbox),
    (22, "backups: their destination, kind and verification", _v22_backup_destinations),
    (23, "secret variables stored encrypted on services and releases; services on their customer's network",
     _v23_service_secrets),
    (24, "backup policies; backups record whether a policy made them", _v24_backup_policies),
    (25, "backups: the service a restore goes into when not the backup's own", _v25_restore_into_new_service),
    (26, "deploy keys (private halves encrypted); the deploy key of each service", _v26_deploy_keys),
    (27, "deploy on push: webhook secrets, auto_deploy, the commit a deploy job deploys, git deliveries",
     _v27_push_webhooks),
    (28, "services: preview environments of pull requests (previews, previews_from_forks, preview_of, "
         "preview_number)", _v28_previews),
    (29, "which process delivers each event subscriber's events", _v29_event_subscriber_claims),
    (30, "services: the ssh host key their clones must be shown", _v30_ssh_host_keys),
    (31, "pushes deploy forward only: the ancestors of each release's commit, the commits pushed into a "
         "queued push deploy", _v31_forward_pushes),
    (33, "preview jobs: what pull-request deliveries queue", _v33_preview_jobs),
    (35, "releases: the branch their deploy's clone checked out", _v35_release_branches),
    (36, "services: the host ports their components keep across deploys", _v36_kept_host_ports),
    (37, "services: the fields their deploy method keeps, in one JSON column (git_url, git_branch and ai_url "
         "moved into it)", _v37_method_sources),
    (38, "scheduled tasks of services and their runs", _v38_scheduled_tasks),
]
LATEST = max(version for version, _, _ in MIGRATIONS)


def _schema_table_exists(db) -> bool:
    return "slipway_schema" in db.get_tables()


def current_version(db) -> int:
    if not _schema_table_exists(db):
        return 0
    return db.execute_sql("SELECT MAX(version) FROM slipway_schema").fetchone()[0] or 0


def migrate(db, upto: int | None = None) -> list[int]:
    """Apply every migration not yet applied (with ``upto``: those up to that version);
    returns the versions applied now."""
    applied_now = []
    p = db.param
    with db.atomic():
        if is_postgres(db):
            db.execute_sql("SELECT pg_advisory_xact_lock(%s)", (_LOCK_KEY,))
        _run(db, [_SCHEMA_TABLE])
        done = {version for (version,) in db.execute_sql("SELECT version FROM slipway_schema").fetchall()}
        for version, description, apply in MIGRATIONS:
            if version in done or (upto is not None and version > upto):
                continue
            with db.atomic():
                apply(db)
                db.execute_sql(f"INSERT INTO slipway_schema (version, description, applied_at) VALUES ({p}, {p}, {p})",
                               (version, description, _now()))
            applied_now.append(version)
    return applied_now
