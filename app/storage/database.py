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
    # timeout: wait that long for a free connection instead of failing when all are in use
    pool = {"max_connections": max_connections, "stale_timeout": 300, "timeout": 30}
    if parts.scheme == "sqlite":
        # the busy_timeout pragma says how long a writer waits for the lock
        return db_url.connect(url.replace("sqlite:", "sqlite+pool:", 1), pragmas=SQLITE_PRAGMAS,
                              check_same_thread=False, **pool)
    if parts.scheme in ("postgresql", "postgres"):
        return db_url.connect(parts._replace(scheme="postgresql+pool").geturl(), **pool)
    raise DatabaseUrlError(f"SLIPWAY_DATABASE_URL: unsupported scheme {parts.scheme!r} (use sqlite:/// or postgresql://)")


def is_postgres(db: peewee.Database) -> bool:
    return isinstance(db, peewee.PostgresqlDatabase)
