"""``Store``: the database, its models, a unit-of-work factory and the worker threads
that run database work off the event loop."""
from __future__ import annotations

from app.storage.database import open_database
from app.storage.migrations import LATEST, current_version, migrate
from app.storage.models import define_models
from app.storage.uow import PeeweeUnitOfWork
from app.storage.threads import WorkerThreads


class SchemaOutOfDate(RuntimeError):
    pass


class Store:
    def __init__(self, url: str, threads: int = 4):
        self.url = url
        self.db = open_database(url, max_connections=threads + 4)
        self.models = define_models(self.db)
        self._threads = threads
        self._workers: WorkerThreads | None = None
        self.bus = None  # the event bus (ports.events); set by the app that serves events

    def uow(self, *, transaction: bool = True, write: bool = True) -> PeeweeUnitOfWork:
        """A unit of work; ``write=False`` for use cases that only read (on SQLite they
        then do not wait for the write lock)."""
        return PeeweeUnitOfWork(self.db, self.models, transaction=transaction, write=write, bus=self.bus)

    def migrate(self, plugin_migrations=()) -> list[int]:
        """Slipway's own migrations, then each plugin's (``LicenseServiceFactory.migrate``)."""
        with self.db.connection_context():
            applied = migrate(self.db, self.models)
            for plugin_migrate in plugin_migrations:
                plugin_migrate(self.db)
            return applied

    def version(self) -> int:
        with self.db.connection_context():
            return current_version(self.db, self.models)

    def require_current_schema(self) -> None:
        version = self.version()
        if version < LATEST:
            raise SchemaOutOfDate(f"database schema is at version {version}, this Slipway needs {LATEST}: "
                                  "run `slipway init`")

    async def run(self, fn, *args, **kwargs):
        """Run blocking database work in a worker thread and await its result."""
        if self._workers is None:
            self._workers = WorkerThreads(self._threads)
        return await self._workers.run(fn, *args, **kwargs)

    def close(self) -> None:
        if self._workers is not None:
            self._workers.shutdown()
            self._workers = None
        if not self.db.is_closed():
            self.db.close()
        self.db.close_all()
