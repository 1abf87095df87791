"""``Store``: the database, its models, a unit-of-work factory and the worker threads
that run database work off the event loop."""
from __future__ import annotations

import asyncio
import functools
from concurrent.futures import ThreadPoolExecutor

from app.storage.database import open_database
from app.storage.migrations import LATEST, current_version, migrate
from app.storage.models import define_models
from app.storage.uow import PeeweeUnitOfWork


class SchemaOutOfDate(RuntimeError):
    pass


class Store:
    def __init__(self, url: str, threads: int = 4):
        self.url = url
        self.db = open_database(url, max_connections=threads + 4)
        self.models = define_models(self.db)
        self._threads = threads
        self._pool: ThreadPoolExecutor | None = None

    def uow(self) -> PeeweeUnitOfWork:
        return PeeweeUnitOfWork(self.db, self.models)

    def migrate(self) -> list[int]:
        with self.db.connection_context():
            return migrate(self.db, self.models)

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
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=self._threads, thread_name_prefix="slipway-db")
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, functools.partial(fn, *args, **kwargs))

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
        if not self.db.is_closed():
            self.db.close()
        self.db.close_all()
