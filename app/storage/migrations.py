"""Versioned, idempotent schema migrations, run by ``slipway init``.

Each migration runs in its own transaction and records its version in
``slipway_schema``; on PostgreSQL an advisory lock keeps two concurrent ``init`` runs
from racing. Running ``init`` again applies nothing.
"""
from __future__ import annotations

from datetime import datetime, timezone

from app.storage.database import is_postgres

_LOCK_KEY = 0x51_1B_2A_01  # advisory lock id for migrations


def _v1_identity(db, m):
    db.create_tables([m.Partner, m.ApiToken, m.Contract], safe=True)


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


def _v2_licensing(db, m):
    db.create_tables([m.HumanIdCounter, m.Customer, m.Contact, m.Note, m.Edition, m.License, m.Transfer,
                      m.LedgerEvent], safe=True)
    # at most one primary contact per customer, held by the database
    db.execute_sql("CREATE UNIQUE INDEX IF NOT EXISTS contact_one_primary ON contact (customer_id) "
                   "WHERE is_primary")
    for table in APPEND_ONLY:
        _append_only(db, table)
    for kind in "CLTP":
        m.HumanIdCounter.insert(kind=kind, value=1000).on_conflict_ignore().execute()
    now = datetime.now(timezone.utc)
    for name in DEFAULT_EDITIONS:
        m.Edition.insert(name=name, policy=name, updated_at=now).on_conflict_ignore().execute()


_STATEMENT_FROZEN = ("lines", "totals", "revision", "computed_at", "finalized_by", "finalized_at",
                     "partner_id", "period_start", "period_end", "supersedes_statement_id", "id")


def _v3_billing(db, m):
    db.create_tables([m.Statement], safe=True)
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


def _v4_panel_access(db, m):
    db.create_tables([m.PanelCustomer, m.PanelApiKey], safe=True)


def _v5_services(db, m):
    db.create_tables([m.Service, m.DeployJob, m.ServiceEvent], safe=True)


def _v6_routes(db, m):
    db.create_tables([m.ServiceRoute], safe=True)


def _v7_panel_sessions(db, m):
    db.create_tables([m.PanelUser, m.PanelSession, m.PanelLogin], safe=True)


def _v9_service_sources(db, m):
    """Columns of git and AI deploys on ``service``. A database created by this code's
    migration 5 already has them (it creates the table from the current model)."""
    _add_columns(db, "service", [m.Service.git_url, m.Service.git_branch, m.Service.ai_url, m.Service.commit])


def _add_columns(db, table: str, fields) -> None:
    """Add the columns ``fields`` (model fields) that ``table`` lacks."""
    from playhouse.migrate import SchemaMigrator, migrate as apply

    have = {column.name for column in db.get_columns(table)}
    migrator = SchemaMigrator.from_database(db)
    changes = [migrator.add_column(table, f.column_name, f) for f in fields if f.column_name not in have]
    if changes:
        apply(*changes)


def _v10_worker_leases(db, m):
    db.create_tables([m.WorkerLease], safe=True)
    _add_columns(db, "deploy_job", [m.DeployJob.owner])
    _add_columns(db, "backup", [m.Backup.owner])


def _v12_job_attempts(db, m):
    _add_columns(db, "deploy_job", [m.DeployJob.attempts])


def _v11_customer_limits(db, m):
    """Customers' own limits, and on each service what it counts against them. Services
    that exist already are measured from their kept compose (a component without
    ``mem_limit`` / ``cpus`` counts ``SLIPWAY_DEFAULT_MEMORY_MB`` / ``SLIPWAY_DEFAULT_CPUS``;
    no compose yet, one such component)."""
    import json
    import os

    from app.config import ConfigError, container_defaults
    from core.panel.customers import Quota
    from core.panel.compose import parse_compose

    _add_columns(db, "panel_customer", [m.PanelCustomer.max_services, m.PanelCustomer.max_memory_mb,
                                        m.PanelCustomer.max_millicpus])
    _add_columns(db, "service", [m.Service.memory_mb, m.Service.millicpus])
    try:
        memory_mb, cpus = container_defaults(os.environ)
    except ConfigError:  # the server refuses to start with these anyway; measure with the defaults
        memory_mb, cpus = 512, 1.0
    quota = Quota(container_memory_mb=memory_mb, container_cpus=cpus, read_compose=parse_compose)
    S = m.Service
    for row in S.select(S.id, S.compose, S.variables).where((S.memory_mb == 0) & (S.millicpus == 0)):
        footprint = quota.footprint_of_compose(row.compose, json.loads(row.variables or "{}")) or quota.footprint(())
        S.update(memory_mb=footprint.memory_mb, millicpus=footprint.millicpus).where(S.id == row.id).execute()


def _v13_key_sessions(db, m):
    db.create_tables([m.PanelKeySession], safe=True)


def _v14_idempotency_keys(db, m):
    db.create_tables([m.IdempotencyKey], safe=True)


def _v15_webhooks(db, m):
    db.create_tables([m.WebhookEndpoint, m.WebhookDelivery], safe=True)


def _v17_custom_domains(db, m):
    """Custom domains; a service may have several route records (its name under the base
    domain and one per custom domain): the unique index on ``service_route.service_id``
    becomes a plain one. Migration 6 on a new database already makes the plain one."""
    db.create_tables([m.CustomDomain], safe=True)
    db.execute_sql("DROP INDEX IF EXISTS service_route_service_id")
    db.execute_sql("CREATE INDEX IF NOT EXISTS service_route_service_id ON service_route (service_id)")
def _v16_releases(db, m):
    db.create_tables([m.Release], safe=True)
    _add_columns(db, "service", [m.Service.release])
    _add_columns(db, "deploy_job", [m.DeployJob.release_id, m.DeployJob.target_release_id,
                                    m.DeployJob.cancel_requested, m.DeployJob.finished_at, m.DeployJob.created_by])


_REACH = "COALESCE({event}.customer_id, (SELECT l.customer_id FROM license l WHERE l.id = {event}.license_id))"


def _v18_ledger_reach(db, m):
    """The customer each ledger event's activity belongs to, in an internal column with an
    index, so a customer's activity is one index range (events without ``customer_id``
    reach their license's customer). The database keeps it, whoever writes: an insert
    gets it (whatever value it named), when a license moves to another customer its
    events without ``customer_id`` follow (as reading through the license did before), and
    an UPDATE to any other value is refused. Filled here; the append-only trigger then
    refuses an UPDATE of every other column."""
    _add_columns(db, "ledger_event", [m.LedgerEvent.reach_customer_id])
    if is_postgres(db):
        db.execute_sql("DROP TRIGGER IF EXISTS ledger_event_append_only ON ledger_event")
    else:
        db.execute_sql("DROP TRIGGER IF EXISTS ledger_event_no_update")
    db.execute_sql("UPDATE ledger_event SET reach_customer_id = customer_id WHERE customer_id IS NOT NULL")
    db.execute_sql("UPDATE ledger_event SET reach_customer_id = "
                   "(SELECT l.customer_id FROM license l WHERE l.id = ledger_event.license_id) "
                   "WHERE customer_id IS NULL")
    db.execute_sql("CREATE INDEX IF NOT EXISTS ledger_event_reach_customer_id_id "
                   "ON ledger_event (reach_customer_id, id)")
    _append_only(db, "ledger_event", LEDGER_COLUMNS)
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


def _v19_customer_containers(db, m):
    """The customers' ``containers`` limit, and on each service the containers it counts
    against it (one per compose service), measured from its kept compose (no compose
    yet: one)."""
    import json

    from core.panel.compose import parse_compose
    from core.panel.customers import Quota

    _add_columns(db, "panel_customer", [m.PanelCustomer.max_containers])
    _add_columns(db, "service", [m.Service.containers])
    quota = Quota(read_compose=parse_compose)
    S = m.Service
    for row in S.select(S.id, S.compose, S.variables).where(S.containers == 0):
        footprint = quota.footprint_of_compose(row.compose, json.loads(row.variables or "{}")) or quota.footprint(())
        S.update(containers=footprint.containers).where(S.id == row.id).execute()


def _v20_event_outbox(db, m):
    """The event outbox and its deliveries (the plugins' event subscribers). Frozen DDL:
    what this version creates, whatever the models say later."""
    if is_postgres(db):
        db.execute_sql("CREATE TABLE IF NOT EXISTS event_outbox (id BIGSERIAL NOT NULL PRIMARY KEY, "
                       "topic VARCHAR(40) NOT NULL, service_id VARCHAR(64), customer_id VARCHAR(64), "
                       "data TEXT NOT NULL, at TIMESTAMP NOT NULL)")
    else:
        db.execute_sql("CREATE TABLE IF NOT EXISTS event_outbox (id INTEGER NOT NULL PRIMARY KEY, "
                       "topic VARCHAR(40) NOT NULL, service_id VARCHAR(64), customer_id VARCHAR(64), "
                       "data TEXT NOT NULL, at DATETIME NOT NULL)")
    db.execute_sql("CREATE TABLE IF NOT EXISTS event_delivery (subscriber VARCHAR(80) NOT NULL, "
                   "event_id BIGINT NOT NULL, delivered_at " + ("TIMESTAMP" if is_postgres(db) else "DATETIME") +
                   " NOT NULL, PRIMARY KEY (subscriber, event_id))")


def _v8_backups(db, m):
    db.create_tables([m.Backup], safe=True)


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
    (20, "event outbox for the plugins' event subscribers, and its deliveries", _v20_event_outbox),
]
LATEST = max(version for version, _, _ in MIGRATIONS)


def current_version(db, models) -> int:
    if not models.SchemaVersion.table_exists():
        return 0
    from peewee import fn

    return models.SchemaVersion.select(fn.MAX(models.SchemaVersion.version)).scalar() or 0


def migrate(db, models) -> list[int]:
    """Apply every migration not yet applied; returns the versions applied now."""
    applied_now = []
    with db.atomic():
        if is_postgres(db):
            db.execute_sql("SELECT pg_advisory_xact_lock(%s)", (_LOCK_KEY,))
        db.create_tables([models.SchemaVersion], safe=True)
        done = {row.version for row in models.SchemaVersion.select()}
        for version, description, apply in MIGRATIONS:
            if version in done:
                continue
            with db.atomic():
                apply(db, models)
                models.SchemaVersion.create(version=version, description=description,
                                            applied_at=datetime.now(timezone.utc))
            applied_now.append(version)
    return applied_now
