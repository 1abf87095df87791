"""Which database the tests run on, and emptying a PostgreSQL one."""
from __future__ import annotations

import os

POSTGRES = (os.environ.get("SLIPWAY_DATABASE_URL") or "").startswith(("postgresql://", "postgres://"))


def _reset_postgres(url: str) -> None:
    import psycopg2

    conn = psycopg2.connect(url)
    conn.autocommit = True
    with conn.cursor() as cur:
        cur.execute("DROP SCHEMA IF EXISTS public CASCADE; CREATE SCHEMA public;")
    conn.close()
