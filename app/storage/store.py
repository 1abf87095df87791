"""``Store``: the database, its models, a unit-of-work factory and the worker threads
that run database work off the event loop."""
from __future__ import annotations

from app.storage.database import open_database
from app.storage.migrations import LATEST, current_version, migrate
from app.storage.models import define_models
from app.storage.readpath import ELSEWHERE, LoopReads
from app.storage.secrets import SecretBox
from app.storage.threads import WorkerThreads
from app.storage.uow import PeeweeUnitOfWork


class SchemaOutOfDate(RuntimeError):
    pass


class Store:
    def __init__(self, url: str, threads: int = 4, secret_key: bytes | None = None):
        """``secret_key``: the key of the secret variables (``app.storage.secrets``); the
        app's composition sets the configured one (``use_secret_key``). Without one a
        store has a random key of its own, good for its own lifetime only (tests)."""
        self.url = url
        self.db = open_database(url, max_connections=threads + 4)
        #: encrypts and decrypts secret variables, shared by every set of models
        self.secret_box = SecretBox(secret_key)
        self.models = define_models(self.db)
        self.models.secret_box = self.secret_box
        #: SQLite: reads on the event loop, on a connection of their own (app.storage.readpath)
        self.loop_reads = LoopReads.for_database(self.db, define_models, PeeweeUnitOfWork)
        if self.loop_reads is not None:
            self.loop_reads.models.secret_box = self.secret_box
        self._threads = threads
        self._workers: WorkerThreads | None = None
        #: closed: a connection given back from now on is closed, not kept in the pool
        self.closed = False
        self.bus = None  # the event bus (ports.events): attach_events
        #: write every event to the event outbox (when a plugin subscribes to events)
        self.outbox = False

    def use_secret_key(self, key: bytes) -> None:
        """Encrypt and decrypt secret variables with ``key`` (``SLIPWAY_SECRET_KEY``) from now on."""
        self.secret_box.use(key)

    def attach_events(self, bus, *, outbox: bool = False) -> None:
        """Announce what units of work commit on ``bus`` (``ports.events.EventBus``) and,
        with ``outbox``, write every event to the event outbox in the same transaction
        (the plugins' event subscribers). Called once, when the app is composed."""
        self.bus, self.outbox = bus, outbox

    def uow(self, *, transaction: bool = True, write: bool = True) -> PeeweeUnitOfWork:
        """A unit of work; ``write=False`` for use cases that only read (on SQLite they
        then do not wait for the write lock)."""
        return PeeweeUnitOfWork(self.db, self.models, transaction=transaction, write=write, bus=self.bus,
                                release=self._release, outbox=self.outbox)

    def _release(self) -> None:
        """Give this thread's connection back: to the pool, or closed once the store is."""
        if self.closed:
            self.db.manual_close()
        else:
            self.db.close()

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

    async def read(self, fn, *args, **kwargs):
        """``fn(uow, *args, **kwargs)`` with a transaction-less unit of work that only reads:
        the authentication of every request (a partner token, a panel key or session), and
        a list page that reads its page and total in one statement (``GET /api/services``). On
        SQLite it runs on the event loop on a connection that never waits (``LoopReads``),
        else (PostgreSQL, another thread, SQLite busy) in a worker thread as ``run`` does.
        See ``app.storage.readpath`` for the whole read path."""
        return await self._read(False, fn, args, kwargs)

    async def read_page(self, fn, *args, **kwargs):
        """As ``read``, in one read transaction: a list page (at most a page of rows, its
        total in the same snapshot). Exports and reports that read without bound run
        through ``run``."""
        return await self._read(True, fn, args, kwargs)

    async def _read(self, snapshot: bool, fn, args, kwargs):
        if self.loop_reads is not None:
            found = self.loop_reads.read(snapshot, fn, args, kwargs)
            if found is not ELSEWHERE:
                return found
        return await self.run(fn, self.uow(transaction=snapshot, write=False), *args, **kwargs)

    async def run(self, fn, *args, **kwargs):
        """Run blocking database work in a worker thread and await its result."""
        if self._workers is None:
            self._workers = WorkerThreads(self._threads)
        return await self._workers.run(fn, *args, **kwargs)

    def close(self) -> None:
        """Give back this thread's connection and close every idle one. A connection another
        thread still uses (a deploy job runs to its end after a shutdown) is left to that
        thread: closing it under a running statement crashes SQLite, and the work it is
        finishing must not be lost. It is closed when that thread gives it back."""
        if self._workers is not None:
            self._workers.shutdown()
            self._workers = None
        self.closed = True
        if self.loop_reads is not None:
            self.loop_reads.close()
        if not self.db.is_closed():
            self.db.manual_close()
        self.db.close_idle()
