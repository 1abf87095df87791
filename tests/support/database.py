"""Which database the tests run on, emptying a PostgreSQL one, and one PostgreSQL
database per pytest-xdist worker."""
from __future__ import annotations

import os
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
