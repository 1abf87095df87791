"""``Store``: the database, its models, a unit-of-work factory and the worker threads
that run database work off the event loop."""
from __future__ import annotations

import threading

import peewee

from app.storage.database import open_database
from app.storage.migrations import LATEST, current_version, migrate
from app.storage.models import define_models
from app.storage.uow import PeeweeUnitOfWork
from app.storage.threads import WorkerThreads


#: a pool's stale time-out once its store is closed: every connection given back is stale
_CLOSED = 1e-9


class _KeptRead:
    """A thread's connection kept for ``Store.read``, its unit of work, and the database's
    ``data_version`` its unit of work's remembered rows belong to."""

    __slots__ = ("connection", "checkout", "uow", "version")

    def __init__(self, connection, checkout, uow: PeeweeUnitOfWork):
        #: the pool's record of this taking of the connection: a connection given back and
        #: taken again (and perhaps written through by another thread meanwhile, which its
        #: own data_version would not show) is a new record, so nothing remembered is used
        self.connection, self.checkout, self.uow, self.version = connection, checkout, uow, None

    def current(self) -> PeeweeUnitOfWork:
        """The unit of work, its remembered rows forgotten when another connection has
        committed since they were read."""
        with peewee.__exception_wrapper__:
            (version,) = self.connection.execute("PRAGMA data_version").fetchone()
        if version != self.version:
            self.uow.read_cache.clear()
            self.version = version
        return self.uow


class SchemaOutOfDate(RuntimeError):
    pass


class Store:
    def __init__(self, url: str, threads: int = 4):
        self.url = url
        self.db = open_database(url, max_connections=threads + 4)
        self.models = define_models(self.db)
        self._threads = threads
        self._workers: WorkerThreads | None = None
        #: SQLite: thread id -> the connection that thread keeps for ``read``, with its unit
        #: of work and what it remembers; forgotten by ``close``
        self._kept: dict[int, _KeptRead] = {}
        self._kept_lock = threading.Lock()
        #: SQLite: the database is a library in this process, not a server (``read``)
        self.embedded = isinstance(self.db, peewee.SqliteDatabase)
        self.bus = None  # the event bus (ports.events): attach_events
        #: write every event to the event outbox (when a plugin subscribes to events)
        self.outbox = False

    def attach_events(self, bus, *, outbox: bool = False) -> None:
        """Announce what units of work commit on ``bus`` (``ports.events.EventBus``) and,
        with ``outbox``, write every event to the event outbox in the same transaction
        (the plugins' event subscribers). Called once, when the app is composed."""
        self.bus, self.outbox = bus, outbox

    def uow(self, *, transaction: bool = True, write: bool = True) -> PeeweeUnitOfWork:
        """A unit of work; ``write=False`` for use cases that only read (on SQLite they
        then do not wait for the write lock)."""
        return PeeweeUnitOfWork(self.db, self.models, transaction=transaction, write=write, bus=self.bus,
                                outbox=self.outbox)

    def migrate(self, plugin_migrations=()) -> list[int]:
        """Slipway's own migrations, then each plugin's (``LicenseServiceFactory.migrate``)."""
        with self.db.connection_context():
            applied = migrate(self.db)
            for plugin_migrate in plugin_migrations:
                plugin_migrate(self.db)
            return applied

    def version(self) -> int:
        with self.db.connection_context():
            return current_version(self.db)

    def require_current_schema(self) -> None:
        version = self.version()
        if version < LATEST:
            raise SchemaOutOfDate(f"database schema is at version {version}, this Slipway needs {LATEST}: "
                                  "run `slipway init`")

    async def read(self, fn, *args):
        """``fn(uow, *args)`` with a transaction-less unit of work: a short read on the path
        of every request (an API token's lookup). Only for indexed point reads, never a
        write (which on SQLite may wait for the write lock).

        On SQLite, an embedded library whose indexed read costs less than the crossing to
        a worker thread and back, it runs right here, on a connection this thread keeps
        for such reads (taking one from the pool and giving it back cost as much as the
        read); unless this thread holds a connection of some other work. Each statement
        stands alone (autocommit), so a kept connection holds no snapshot between reads and
        sees every commit. Elsewhere (a network round trip) it runs as ``run`` does.

        On the kept connection, the rows a read fetched are remembered until the database
        changes: ``PRAGMA data_version`` (cheaper than the lookup) tells, before every read,
        whether any other connection, of this process or another, has committed since. The
        kept connection itself never writes while kept: any other work on this thread gives
        it back to the pool when it ends, and a connection taken again starts with nothing
        remembered."""
        if self.embedded:
            db = self.db
            if db.is_closed():
                if self._pool_has_one_free():  # never wait on the loop for a connection
                    db.connect()
                    connection = db.connection()
                    kept = _KeptRead(connection, self._checkout(connection), self._read_uow())
                    with self._kept_lock:
                        self._kept[threading.get_ident()] = kept
                    return fn(kept.current(), *args)
            else:
                kept = self._kept.get(threading.get_ident())
                if kept is not None and kept.connection is db.connection() and db.transaction_depth() == 0 \
                        and kept.checkout is self._checkout(kept.connection):
                    return fn(kept.current(), *args)  # one unit of work per thread, reused: fn runs to its end here
        return await self.run(fn, self.uow(transaction=False, write=False), *args)

    # The pool's bookkeeping (playhouse.pool, pinned in constraints.txt; its own tests
    # cover what these rely on: tests/integration/test_store_read.py)

    def _checkout(self, connection):
        return self.db._in_use.get(self.db.conn_key(connection))

    def _pool_has_one_free(self) -> bool:
        """Whether a connection can be had without waiting: an idle one, or room for a new one."""
        db = self.db
        return bool(db._connections) or not db._max_connections or len(db._in_use) < db._max_connections

    def _read_uow(self) -> PeeweeUnitOfWork:
        return PeeweeUnitOfWork(self.db, self.models, transaction=False, write=False, bus=self.bus,
                                keep_connection=True, read_cache={})

    async def run(self, fn, *args, **kwargs):
        """Run blocking database work in a worker thread and await its result."""
        if self._workers is None:
            self._workers = WorkerThreads(self._threads)
        return await self._workers.run(fn, *args, **kwargs)

    def close(self) -> None:
        """Give back this thread's connection and close every connection not in use. A
        connection another thread still uses (a deploy job runs to its end after a
        shutdown; another thread's kept read connection) is left to that thread: closing
        it under a running statement crashes SQLite, and the work it is finishing must not
        be lost. It is closed when it is given back or when the store is collected."""
        if self._workers is not None:
            self._workers.shutdown()
            self._workers = None
        if not self.db.is_closed():
            self.db.close()
        with self._kept_lock:
            self._kept.clear()
        self.db.close_idle()
        self.db._stale_timeout = _CLOSED  # what is given back from now on is closed, not kept
