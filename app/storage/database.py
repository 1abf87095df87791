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


def open_database(url: str, max_connections: int = 8) -> peewee.Database:
    """A pooled peewee database for ``url``. A unit of work takes a connection from the
    pool and gives it back when it ends, so ``close_all()`` really closes everything."""
    parts = urlparse(url)
    pool = {"max_connections": max_connections, "stale_timeout": 300}
    if parts.scheme == "sqlite":
        # timeout: how long sqlite3 waits for a writer's lock before "database is locked".
        return db_url.connect(url.replace("sqlite:", "sqlite+pool:", 1), pragmas=SQLITE_PRAGMAS, timeout=10,
                              check_same_thread=False, **pool)
    if parts.scheme in ("postgresql", "postgres"):
        return db_url.connect(parts._replace(scheme="postgresql+pool").geturl(), **pool)
    raise DatabaseUrlError(f"SLIPWAY_DATABASE_URL: unsupported scheme {scheme!r} (use sqlite:/// or postgresql://)")


def is_postgres(db: peewee.Database) -> bool:
    return isinstance(db, peewee.PostgresqlDatabase)
