"""The peewee unit of work and repositories behind ``ports.storage``."""
from __future__ import annotations

import contextlib

import peewee

from app.storage import backup_repos
from app.storage import licensing_repos as repos
from app.storage import lease_repos, panel_repos, route_repos, service_repos, session_repos, webhook_repos
from core.partner.contracts import Contract
from core.partner.identity import Partner, Token
from ports.storage import ContractRepository, PartnerRepository, TokenRepository, UnitOfWork

def _partner(row) -> Partner:
    return Partner(id=row.id, name=row.name, type=row.type, parent_id=row.parent_id, created_at=row.created_at)


def _token(row) -> Token:
    return Token(id=row.id, partner_id=row.partner_id, label=row.label, token_prefix=row.token_prefix,
                 token_hash=row.token_hash, scope=row.scope, created_by=row.created_by,
                 created_at=row.created_at, last_used_at=row.last_used_at, revoked_at=row.revoked_at)


class PeeweePartners(PartnerRepository):
    def __init__(self, m):
        self.m = m

    def add(self, partner: Partner) -> None:
        self.m.Partner.insert(id=partner.id, name=partner.name, type=partner.type, parent=partner.parent_id,
                              created_at=partner.created_at).execute()

    def get(self, partner_id: str) -> Partner | None:
        row = self.m.Partner.get_or_none(self.m.Partner.id == partner_id)
        return _partner(row) if row else None

    def all_ids(self) -> list[str]:
        return [row[0] for row in self.m.Partner.select(self.m.Partner.id).order_by(self.m.Partner.id).tuples()]

    def subtree_ids(self, partner_id: str) -> set[str]:
        # every scoped request runs this: the recursive query is built once (per store)
        sql = self.m.statements.sql("partner-subtree", lambda: self._subtree_query("?"))
        return {row[0] for row in self.m.statements.rows(sql, (partner_id,))}

    def _subtree_query(self, partner_id):
        P = self.m.Partner
        base = P.select(P.id).where(P.id == partner_id).cte("subtree", recursive=True, columns=("id",))
        child = P.alias()
        recursive = child.select(child.id).join(base, on=(child.parent == base.c.id))
        cte = base.union_all(recursive)
        return cte.select_from(cte.c.id)


class PeeweeTokens(TokenRepository):
    def __init__(self, m):
        self.m = m

    def add(self, token: Token) -> None:
        self.m.ApiToken.insert(id=token.id, partner=token.partner_id, label=token.label,
                               token_prefix=token.token_prefix, token_hash=token.token_hash, scope=token.scope,
                               created_by=token.created_by, created_at=token.created_at,
                               last_used_at=token.last_used_at, revoked_at=token.revoked_at).execute()

    def get(self, token_id: str) -> Token | None:
        row = self.m.ApiToken.get_or_none(self.m.ApiToken.id == token_id)
        return _token(row) if row else None

    def by_hash_with_partner(self, token_hash: str):
        # every authenticated partner request runs this (app.storage.readpath)
        T, P = self.m.ApiToken, self.m.Partner
        sql = self.m.statements.sql("token-by-hash", lambda: (
            T.select(T.id, T.partner, T.label, T.token_prefix, T.token_hash, T.scope, T.created_by,
                     T.created_at, T.last_used_at, T.revoked_at, P.name, P.type, P.parent, P.created_at)
            .join(P).where(T.token_hash == "?")))
        rows = self.m.statements.rows(sql, (token_hash,))
        return self._records(rows[0]) if rows else None

    def _records(self, row) -> tuple:
        dt = self.m.ApiToken.created_at.python_value
        token = Token(id=row[0], partner_id=row[1], label=row[2], token_prefix=row[3], token_hash=row[4],
                      scope=row[5], created_by=row[6], created_at=dt(row[7]), last_used_at=dt(row[8]),
                      revoked_at=dt(row[9]))
        partner = Partner(id=row[1], name=row[10], type=row[11], parent_id=row[12], created_at=dt(row[13]))
        return token, partner

    def list_for_partner(self, partner_id: str) -> list[Token]:
        T = self.m.ApiToken
        rows = T.select().where(T.partner == partner_id).order_by(T.created_at.desc(), T.id.desc())
        return [_token(r) for r in rows]

    def revoke(self, token_id: str, at) -> None:
        T = self.m.ApiToken
        T.update(revoked_at=at).where((T.id == token_id) & T.revoked_at.is_null()).execute()

    def touch(self, token_id: str, at, older_than) -> None:
        T = self.m.ApiToken
        (T.update(last_used_at=at)
         .where((T.id == token_id) & (T.last_used_at.is_null() | (T.last_used_at <= older_than)))
         .execute())


class PeeweeContracts(ContractRepository):
    def __init__(self, m):
        self.m = m

    def add(self, contract: Contract) -> None:
        self.m.Contract.insert(id=contract.id, partner=contract.partner_id, model=contract.model,
                               currency=contract.currency, unit_price_cents=contract.unit_price_cents,
                               created_at=contract.created_at).execute()

    @staticmethod
    def _entity(row) -> Contract:
        return Contract(id=row.id, partner_id=row.partner_id, model=row.model, currency=row.currency,
                        unit_price_cents=row.unit_price_cents, created_at=row.created_at)

    def get(self, contract_id: str) -> Contract | None:
        row = self.m.Contract.get_or_none(self.m.Contract.id == contract_id)
        return self._entity(row) if row else None

    def for_partner(self, partner_id: str) -> list[Contract]:
        C = self.m.Contract
        return [self._entity(r) for r in C.select().where(C.partner == partner_id).order_by(C.id)]


class _NotCommitted(Exception):
    """Handed to peewee's transaction to make it roll back."""


#: every repository of a unit of work, by attribute: made on first use (a request that
#: reads one token makes one, not 29)
REPOSITORY_TYPES = {
    "partners": PeeweePartners,
    "tokens": PeeweeTokens,
    "contracts": PeeweeContracts,
    "human_ids": repos.PeeweeHumanIds,
    "customers": repos.PeeweeCustomers,
    "contacts": repos.PeeweeContacts,
    "notes": repos.PeeweeNotes,
    "editions": repos.PeeweeEditions,
    "licenses": repos.PeeweeLicenses,
    "transfers": repos.PeeweeTransfers,
    "ledger": repos.PeeweeLedger,
    "webhook_endpoints": webhook_repos.PeeweeWebhookEndpoints,
    "webhook_deliveries": webhook_repos.PeeweeWebhookDeliveries,
    "statements": repos.PeeweeStatements,
    "api_keys": panel_repos.PeeweeApiKeys,
    "panel_customers": panel_repos.PeeweePanelCustomers,
    "panel_users": session_repos.PeeweePanelUsers,
    "panel_sessions": session_repos.PeeweePanelSessions,
    "panel_key_sessions": session_repos.PeeweePanelKeySessions,
    "panel_logins": session_repos.PeeweePanelLogins,
    "services": service_repos.PeeweeServices,
    "deploy_jobs": service_repos.PeeweeDeployJobs,
    "releases": service_repos.PeeweeReleases,
    "service_events": service_repos.PeeweeServiceEvents,
    "backups": backup_repos.PeeweeBackups,
    "routes": route_repos.PeeweeRoutes,
    "custom_domains": route_repos.PeeweeCustomDomains,
    "leases": lease_repos.PeeweeLeases,
}


class PeeweeUnitOfWork(UnitOfWork):
    """One database transaction; ``commit()`` keeps it, leaving the block otherwise rolls back.

    Not re-entrant and not shared between threads: make one per use-case call. With
    ``transaction=False`` it opens no transaction: each statement stands alone, which is
    right only for use cases that read with one statement and write with one (token
    authentication, on every request).
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
        return self

    def __exit__(self, exc_type, exc, tb):
        tx, self._tx = self._tx, None
        if tx is None:  # single-statement reads in autocommit mode
            if self.db.transaction_depth() == 0:
                self._release()
            return
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
