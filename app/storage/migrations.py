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


MIGRATIONS = [
    (1, "partners, partner API tokens, contracts", _v1_identity),
]
LATEST = MIGRATIONS[-1][0]


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
