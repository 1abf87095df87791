"""Query helpers the repositories of both APIs share."""
from __future__ import annotations

import peewee


def _for_update(query, db):
    # SQLite has no row locks: its write transactions begin IMMEDIATE instead (see uow).
    return query.for_update() if isinstance(db, peewee.PostgresqlDatabase) else query
