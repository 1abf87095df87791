"""Open the database named by ``SLIPWAY_DATABASE_URL``: SQLite (default) or PostgreSQL."""
from __future__ import annotations

from urllib.parse import urlparse

import peewee
from playhouse import db_url

SQLITE_PRAGMAS = {
    "journal_mode": "wal",
    "foreign_keys": 1,
    "busy_timeout": 10_000,
    "synchronous": "normal",
}


class DatabaseUrlError(ValueError):
    pass


def open_database(url: str) -> peewee.Database:
    """A peewee database for ``url``; connections open lazily, one per thread."""
    scheme = urlparse(url).scheme
    if scheme == "sqlite":
        # timeout: how long sqlite3 waits for a writer's lock before "database is locked".
        return db_url.connect(url, pragmas=SQLITE_PRAGMAS, timeout=10)
    if scheme in ("postgresql", "postgres"):
        return db_url.connect(url, autorollback=True)
    raise DatabaseUrlError(f"SLIPWAY_DATABASE_URL: unsupported scheme {scheme!r} (use sqlite:/// or postgresql://)")


def is_postgres(db: peewee.Database) -> bool:
    return isinstance(db, peewee.PostgresqlDatabase)
