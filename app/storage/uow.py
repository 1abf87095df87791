"""The peewee unit of work behind ``ports.storage``; its repositories are in the ``partner``
and ``panel`` packages beside this module."""
from __future__ import annotations

import contextlib

import peewee

from app.storage.panel import accounts, backups, deploy_keys, leases, routes, services, sessions, tasks
from app.storage.partner import contracts, identity, licensing, webhooks
from core import waits
from ports.storage import UnitOfWork


class _NotCommitted(Exception):
    """Handed to peewee's transaction to make it roll back."""


#: every repository of a unit of work, by attribute: made on first use (a request that
#: reads one token makes one, not 29)
REPOSITORY_TYPES = {
    "partners": identity.PeeweePartners,
    "tokens": identity.PeeweeTokens,
    "contracts": contracts.PeeweeContracts,
    "human_ids": licensing.PeeweeHumanIds,
    "customers": licensing.PeeweeCustomers,
    "contacts": licensing.PeeweeContacts,
    "notes": licensing.PeeweeNotes,
    "editions": licensing.PeeweeEditions,
    "licenses": licensing.PeeweeLicenses,
    "transfers": licensing.PeeweeTransfers,
    "ledger": licensing.PeeweeLedger,
    "webhook_endpoints": webhooks.PeeweeWebhookEndpoints,
    "webhook_deliveries": webhooks.PeeweeWebhookDeliveries,
    "statements": licensing.PeeweeStatements,
    "api_keys": accounts.PeeweeApiKeys,
    "panel_customers": accounts.PeeweePanelCustomers,
    "panel_users": sessions.PeeweePanelUsers,
    "panel_sessions": sessions.PeeweePanelSessions,
    "panel_key_sessions": sessions.PeeweePanelKeySessions,
    "panel_logins": sessions.PeeweePanelLogins,
    "services": services.PeeweeServices,
    "deploy_jobs": services.PeeweeDeployJobs,
    "git_deliveries": services.PeeweeGitDeliveries,
    "preview_jobs": services.PeeweePreviewJobs,
    "releases": services.PeeweeReleases,
    "service_events": services.PeeweeServiceEvents,
    "backups": backups.PeeweeBackups,
    "backup_policies": backups.PeeweeBackupPolicies,
    "tasks": tasks.PeeweeTasks,
    "task_runs": tasks.PeeweeTaskRuns,
    "deploy_keys": deploy_keys.PeeweeDeployKeys,
    "routes": routes.PeeweeRoutes,
    "custom_domains": routes.PeeweeCustomDomains,
    "leases": leases.PeeweeLeases,
}


class PeeweeUnitOfWork(UnitOfWork):
    """One database transaction; ``commit()`` keeps it, leaving the block otherwise rolls back.

    Not re-entrant and not shared between threads: make one per use-case call. With
    ``transaction=False`` it opens no transaction: each statement stands alone, which is
    right only for use cases that read with one statement and write with one (token
    authentication, on every request), or whose statements need not agree (the services
    page: its page and total are one statement; a page past the end counts alone).
    """

    def __init__(self, db: peewee.Database, models, *, transaction: bool = True, write: bool = True,
                 bus=None, release=None, outbox: bool = False):
        self.db = db
        #: gives this thread's connection back when the unit of work ends (``Store._release``)
        self._release = release or db.close
        #: write every event (emitted, timeline, ledger) to the event outbox in this
        #: transaction (plugins subscribe to them: app.extensions)
        self.outbox = outbox
        self._recorded: list = []
        self.bus = bus
        self._outbox: list = []
        self.transaction = transaction
        self.write = write
        self._models = models
        self._tx = None
        self._committed = False

    def __getattr__(self, name):
        """A repository, made on first use and kept (``REPOSITORY_TYPES``)."""
        factory = REPOSITORY_TYPES.get(name)
        if factory is None or name.startswith("_"):
            raise AttributeError(name)
        repository = self.__dict__[name] = factory(self.__dict__["_models"])
        if self.__dict__.get("outbox") and hasattr(repository, "record"):
            repository.record = self._recorded.append  # (topic, service id, customer id, data, at)
        return repository

    def __enter__(self):
        if self.db.is_closed():  # else this thread's connection is reused
            self.db.connect()
        self._committed = False
        self._outbox = []
        self._recorded.clear()
        if self.transaction:
            # SQLite: a write transaction takes the write lock when it begins, so one that
            # reads before it writes queues behind other writers instead of failing.
            immediate = self.write and isinstance(self.db, peewee.SqliteDatabase) \
                and self.db.transaction_depth() == 0
            self._tx = self.db.atomic(lock_type="IMMEDIATE") if immediate else self.db.atomic()
            self._tx.__enter__()
            waits.enter_transaction()  # from here to its end nothing waits on the outside (core.waits)
        return self

    def __exit__(self, exc_type, exc, tb):
        tx, self._tx = self._tx, None
        if tx is None:  # single-statement reads in autocommit mode
            if self.db.transaction_depth() == 0:
                self._release()
            return
        waits.leave_transaction()
        committed = exc_type is None and self._committed
        try:
            if committed and self.outbox:
                self._write_outbox()
            if exc_type is None and not self._committed:
                # peewee rolls back a transaction (or savepoint) that exits with an exception.
                tx.__exit__(_NotCommitted, _NotCommitted(), None)
            else:
                tx.__exit__(exc_type, exc, tb)
        except BaseException:
            committed = False
            raise
        finally:
            if self.db.transaction_depth() == 0:
                self._release()  # back to the pool
            outbox, self._outbox = self._outbox, []
        if committed and self.bus is not None:  # only what the database kept is announced
            for event in outbox:
                self.bus.publish(event)

    #: the emitted events that go to the outbox (log lines do not)
    OUTBOX_EVENTS = ("service.status", "deploy.progress", "backup.progress")

    def _write_outbox(self) -> None:
        """The events of this transaction into ``event_outbox``, inside it (an exception
        here rolls the whole unit of work back)."""
        import json

        rows = [{"topic": "panel." + e.type, "service_id": e.service_id, "customer_id": e.customer_id,
                 "data": json.dumps(e.data, default=str), "at": e.timestamp}
                for e in self._outbox if e.type in self.OUTBOX_EVENTS]
        rows += [{"topic": topic, "service_id": service_id, "customer_id": customer_id,
                  "data": json.dumps(data, default=str), "at": at}
                 for topic, service_id, customer_id, data, at in self._recorded]
        self._recorded.clear()
        if rows:
            self._models.EventOutbox.insert_many(rows).execute()

    def emit(self, event) -> None:
        """Announce ``event`` (a ``ports.events.Event``) once this unit of work commits."""
        self._outbox.append(event)

    def commit(self) -> None:
        self._committed = True

    @contextlib.contextmanager
    def reading(self):
        """The same unit of work as a read-only transaction (no write lock on SQLite)."""
        write, self.write = self.write, False
        try:
            with self:
                yield self
        finally:
            self.write = write
