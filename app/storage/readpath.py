"""The read path: how every authenticated request of both APIs reads, in one place.

Every request of the partner API (``/v1``: a bearer token, ``app.partner.gate``) and of the
panel API (``/api``: an API key or a browser session, ``app.panel.gate``) starts with one
read, its authentication; list pages (``GET /v1/licenses``, ``GET /api/services``, ...)
then read one page. All of them go the same way:

1. **Off the event loop.** ``Store.read(fn, *args)`` runs ``fn`` with a transaction-less,
   read-only unit of work in one of the store's worker threads (``app.storage.threads``:
   results handed back to the loop in batches, one wake-up for the calls that finished
   together). Nothing that may wait (taking a connection from the pool, SQLite's busy
   handler, a lock) runs on the loop. Use cases that read a page in a transaction run
   through ``Store.run`` the same way.
2. **SQL built once per store.** peewee builds a statement in Python, and for the token
   lookup or a list page that cost several times the indexed read itself (430 us of a
   token lookup when it was built per call). The repositories on this path take their SQL
   text from ``Statements`` (``store.models.statements``), built on first use with the
   store's own placeholder style, and run it with the page's values; rows come back as
   plain tuples, and only the columns that need it (timestamps) are converted.
3. **Nothing remembered across requests.** No credential, row or record is kept between
   requests: a revoked token, key or session fails on its very next request, whichever
   process revoked it. The caches here hold SQL text only, and they belong to one store
   (a process may hold several: tests, the CLI), never to a class.

The HTTP layer's own part (``app.http.collector``): objects that live as long as the
process are moved out of the garbage collector's sight once the app has started.

What each piece measured when it was kept is in docs/decisions.md ("Read path").
"""
from __future__ import annotations

import threading


class Statements:
    """SQL text by name, built once per store from a peewee query; and a way to run it."""

    def __init__(self, db):
        self.db = db
        self._sql: dict[str, str] = {}
        self._lock = threading.Lock()  # worker threads build at once on a cold start

    def sql(self, name: str, build) -> str:
        """The SQL of ``build()`` (a peewee query written with the placeholder ``"?"`` for
        each value: peewee renders the store's own, ``?`` or ``%s``), built on first use."""
        found = self._sql.get(name)
        if found is None:
            with self._lock:
                found = self._sql.get(name)
                if found is None:
                    found = self._sql[name] = build().sql()[0]
        return found

    def rows(self, sql: str, params) -> list[tuple]:
        """Every row of ``sql`` with ``params`` on this thread's connection, as tuples (run
        to its end: no statement is left open)."""
        return self.db.execute_sql(sql, params).fetchall()
