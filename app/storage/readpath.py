"""The read path: how every authenticated request of both APIs reads, in one place.

Every request of the partner API (``/v1``: a bearer token, ``app.partner.gate``) and of the
panel API (``/api``: an API key or a browser session, ``app.panel.gate``) starts with one
read, its authentication; list pages (``GET /v1/licenses``, ``GET /api/services``, ...)
then read one page. All of them go the same way:

1. **Never waiting on the event loop.** ``Store.read(fn, *args)`` runs ``fn`` with a
   transaction-less, read-only unit of work. On SQLite it runs right on the event loop, on
   a connection of its own that the loop opened once and keeps (``LoopReads``): no pool
   checkout, no lock of Python's, and SQLite's busy handler off (``busy_timeout=0``,
   ``query_only=1``). In WAL mode a reader never waits for a writer; in the rare case
   SQLite still answers "busy" (another connection holds the file in exclusive mode,
   or is recovering it), the read goes, unchanged, to the worker threads. On PostgreSQL
   every read is a network round trip that may wait, so it always runs in one of the
   store's worker threads (``app.storage.threads``: results handed back to the loop in
   batches, one wake-up for the calls that finished together), as ``Store.run`` runs the
   use cases that read a page in a transaction.
2. **SQL built once per store.** peewee builds a statement in Python, and for the token
   lookup or a list page that cost several times the indexed read itself (430 us of a
   token lookup when it was built per call). The repositories on this path take their SQL
   text from ``Statements`` (``store.models.statements``), built on first use with the
   store's own placeholder style, and run it with the page's values; rows come back as
   plain tuples, and only the columns that need it (timestamps) are converted.
3. **List pages read read models.** A page decides nothing, so its repository answers
   named tuples of what the page shows (``ServiceSummary``, ``LicenseSummary``), not the
   entities the rules use: no variables decrypted, no columns the page does not show,
   and a tuple instead of a frozen dataclass of thirty fields.
4. **Nothing kept past a change.** The token and the key of a request (the reads of every
   request) are kept on the loop's SQLite connection only while the database is unchanged
   (``Statements.kept``): SQLite's ``PRAGMA data_version`` changes whenever any other
   connection, of this process or another, commits, and a changed version forgets every
   kept answer before the read. So a revoked token, key or session still fails on its very
   next request, whichever process revoked it; on PostgreSQL nothing is kept. The other
   caches here hold SQL text, and they belong to one store (a process may hold several:
   tests, the CLI), never to a class; and two pure conversions of a time keep their last
   4,096 answers, SQLite's text to a datetime (``utc_datetime``) and a datetime to the
   APIs' text (``rfc3339``): a list page writes the same times on every request.
5. **A page's total in the page's statement.** ``GET /api/services`` reads its page and
   its total in one statement (the count an uncorrelated subquery, computed once), so
   the two agree without a read transaction: it reads through ``Store.read``. Only a
   page past the end, which has no row to carry the total, counts on its own.

What each piece measured when it was kept is in docs/decisions.md ("Read path").
"""
from __future__ import annotations

import sqlite3
import threading

import peewee


#: answers ``Statements.kept`` holds at most (then it starts again, empty)
KEPT_ANSWERS = 4096
_NOT_KEPT = object()


class Statements:
    """SQL text by name, built once per store from a peewee query; and a way to run it.

    ``remembers`` (the loop's SQLite connection, ``LoopReads``): ``kept`` answers a read
    made before for as long as the database is unchanged since, as SQLite's
    ``PRAGMA data_version`` tells (it changes whenever any other connection, of this
    process or another, commits)."""

    def __init__(self, db, remembers: bool = False):
        self.db = db
        self._sql: dict[str, str] = {}
        self._lock = threading.Lock()  # worker threads build at once on a cold start
        self.remembers = remembers
        self._kept: dict = {}
        self._kept_version = None

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

    def kept(self, key, read):
        """``read()``, or what it answered for ``key`` before while nothing was committed
        since (only an answer that is not None is kept). On a store that does not remember,
        always ``read()``. For the reads of every request (a token, a key): an unchanged
        database gives the same row, and any commit (a revocation, a ``lastUsedAt``, any
        write) forgets every kept answer before the next read, so a revoked credential still
        fails on its very next request, whichever process revoked it."""
        if not self.remembers:
            return read()
        version = self.db.connection().execute("PRAGMA data_version").fetchone()[0]
        if version != self._kept_version:
            self._kept.clear()
            self._kept_version = version
        found = self._kept.get(key, _NOT_KEPT)
        if found is _NOT_KEPT:
            # read after the version: a commit in between gives a newer version next time,
            # which forgets this answer
            found = read()
            if found is not None:
                if len(self._kept) >= KEPT_ANSWERS:
                    self._kept.clear()
                self._kept[key] = found
        return found

    def rows(self, sql: str, params) -> list[tuple]:
        """Every row of ``sql`` with ``params`` on this thread's connection, as tuples (run
        to its end: no statement is left open)."""
        return self.db.execute_sql(sql, params).fetchall()


#: what ``LoopReads.read`` answers when the read must go to the worker threads instead
ELSEWHERE = object()


class LoopReads:
    """SQLite only: reads run on the event loop, on a read-only connection of their own.

    The connection is opened by the first read and kept by the thread that made it (the
    server's event loop); a read from any other thread answers ``ELSEWHERE`` and goes to
    the worker threads. It has its own models (``define_models``) and so its own SQL
    (``Statements``), built once. ``busy_timeout=0``: SQLite never sleeps in its busy
    handler here; "busy" answers ``ELSEWHERE`` too. ``query_only=1``: a use case that
    tried to write here would fail, never write outside a transaction."""

    PRAGMAS = {"query_only": 1, "busy_timeout": 0}

    def __init__(self, path: str, define_models, unit_of_work):
        self.db = peewee.SqliteDatabase(path, pragmas=self.PRAGMAS, thread_safe=False, check_same_thread=False)
        self.models = define_models(self.db, Statements(self.db, remembers=True))
        self._unit_of_work = unit_of_work
        self._owner: int | None = None

    @classmethod
    def for_database(cls, db, define_models, unit_of_work):
        """A ``LoopReads`` for a file SQLite database, else ``None`` (PostgreSQL, or an
        in-memory database a second connection would not see)."""
        if not isinstance(db, peewee.SqliteDatabase):
            return None
        path = db.database
        if not path or path.startswith(":memory:") or "mode=memory" in path:
            return None
        return cls(path, define_models, unit_of_work)

    def read(self, snapshot: bool, fn, args, kwargs):
        """``fn(uow, *args, **kwargs)`` here and now, or ``ELSEWHERE``. ``snapshot``: the
        unit of work is one read transaction (a page and its total agree)."""
        me = threading.get_ident()
        if self._owner is None:
            self._owner = me
        elif self._owner != me:
            return ELSEWHERE
        uow = self._unit_of_work(self.db, self.models, transaction=snapshot, write=False, release=_keep)
        try:
            return fn(uow, *args, **kwargs)
        except (peewee.OperationalError, sqlite3.OperationalError) as exc:  # (the latter: Statements.kept's check)
            if _busy(exc):  # nothing was written (query_only): the worker threads read it again
                return ELSEWHERE
            raise

    def close(self) -> None:
        """Close the connection, from the thread that owns it (else it closes with the
        store's garbage)."""
        if self._owner in (None, threading.get_ident()) and not self.db.is_closed():
            self.db.close()


def _keep() -> None:
    """The loop's connection is kept when a unit of work ends."""


def _busy(exc: Exception) -> bool:
    text = str(exc).lower()
    return "locked" in text or "busy" in text
