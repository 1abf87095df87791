"""The storage port: a unit of work and the repositories the use cases read and write.

A use case opens the unit of work with ``with uow:``, reads and writes through its
repositories, and calls ``uow.commit()``; leaving the block without a commit rolls back.

Every repository core reaches through ``uow.<name>`` is declared here as a
``typing.Protocol``, one docstring per method. The peewee implementation lives in
``app/storage``; the in-memory one that core's unit tests use in ``tests/support/fakes.py``. A
test (``tests/unit/app/test_storage_port.py``) checks that both implement every method with
the same parameters, and that core calls nothing the port does not declare.

Conventions every implementation keeps:

- Entities are core's frozen dataclasses; a repository returns new values, never rows.
- ``for_update=True`` locks the row until the transaction ends (PostgreSQL; SQLite's
  write transactions are serialised anyway, and a fake has nothing to lock).
- Lists are ordered as each docstring says; a ``page`` is ``core.partner.scope.Page`` (limit,
  offset) and ``page=, per_page=`` are 1-based page numbers, answered as
  ``(items, total)``.
- A second row with the same primary key or unique value fails (the database's
  integrity error); use cases check first and answer ``Conflict`` themselves.
"""
from __future__ import annotations

from abc import abstractmethod
from typing import Any, Protocol, get_type_hints

from core.panel.backups import Backup
from core.panel.releases import Release
from core.partner.contracts import Contract
from core.partner.customers import Contact, Customer, Note
from core.partner.identity import Partner, Token
from core.partner.ledger import ActivityFilter, LedgerEvent
from core.partner.licenses import License
from core.panel.access import ApiKey
from core.panel.customers import PanelCustomer
from core.panel.sessions import KeySession, PanelSession, PanelUser, PendingLogin
from core.panel.routes import Route
from core.partner.scope import Page
from core.panel.services import DeployJob, Service, ServiceEvent
from core.partner.transfers import Transfer
from core.partner.webhooks import Delivery, Endpoint

# --- partner API -----------------------------------------------------------------------------


class PartnerRepository(Protocol):
    @abstractmethod
    def add(self, partner: Partner) -> None:
        """Insert a partner (its parent, when named, exists)."""

    @abstractmethod
    def get(self, partner_id: str) -> Partner | None:
        """The partner, or None."""

    @abstractmethod
    def all_ids(self) -> list[str]:
        """Every partner's id, ascending."""

    @abstractmethod
    def subtree_ids(self, partner_id: str) -> set[str]:
        """The partner's id and the ids of all its descendants."""


class TokenRepository(Protocol):
    @abstractmethod
    def add(self, token: Token) -> None:
        """Insert a token; its ``token_hash`` is unique."""

    @abstractmethod
    def get(self, token_id: str) -> Token | None:
        """The token, or None."""

    @abstractmethod
    def by_hash_with_partner(self, token_hash: str) -> tuple[Token, Partner] | None:
        """The token with this SHA-256 hash and its partner, in one lookup."""

    @abstractmethod
    def list_for_partner(self, partner_id: str) -> list[Token]:
        """All of a partner's tokens, newest first."""

    @abstractmethod
    def revoke(self, token_id: str, at) -> None:
        """Set ``revoked_at`` to ``at`` unless the token is revoked already."""

    @abstractmethod
    def touch(self, token_id: str, at, older_than) -> None:
        """Set ``last_used_at`` to ``at`` unless it is already later than ``older_than``."""


class ContractRepository(Protocol):
    @abstractmethod
    def add(self, contract: Contract) -> None:
        """Insert a billing contract."""

    @abstractmethod
    def get(self, contract_id: str) -> Contract | None:
        """The contract, or None."""

    @abstractmethod
    def for_partner(self, partner_id: str) -> list[Contract]:
        """The partner's contracts, by id."""


class HumanIdRepository(Protocol):
    @abstractmethod
    def next(self, kind: str) -> str:
        """The next human-readable id of ``kind`` (``C``, ``P``, ``L``, ``T``): ``C-1001``,
        ``C-1002``, ...; the counter's row stays locked until the transaction ends, and a
        rolled-back transaction gives its number back."""


class CustomerRepository(Protocol):
    @abstractmethod
    def add(self, customer: Customer) -> None:
        """Insert a customer; ``id`` and ``human_id`` are unique."""

    @abstractmethod
    def get(self, customer_id: str, for_update: bool = False) -> Customer | None:
        """The customer unless deleted, or None."""

    @abstractmethod
    def list(self, scope, page: Page, *, status=None, external_ref=None) -> list[Customer]:
        """Customers (not deleted) of the partners in ``scope``, optionally of one status
        or external reference, newest first (``created_at``, then id, descending)."""

    @abstractmethod
    def update(self, customer: Customer) -> None:
        """Store every editable field; ``id``, ``human_id``, partner and ``created_at`` stay."""

    @abstractmethod
    def delete(self, customer_id: str, at) -> None:
        """Soft delete: the customer is gone for ``get`` and ``list`` from ``at`` on."""


class ContactRepository(Protocol):
    @abstractmethod
    def add(self, contact: Contact) -> None:
        """Insert a contact; at most one primary contact per customer (unique)."""

    @abstractmethod
    def get(self, contact_id: str) -> Contact | None:
        """The contact, or None."""

    @abstractmethod
    def list_for_customer(self, customer_id: str) -> list[Contact]:
        """The customer's contacts: the primary first, then oldest first."""

    @abstractmethod
    def update(self, contact: Contact) -> None:
        """Store every editable field and ``updated_at``."""

    @abstractmethod
    def demote_primary(self, customer_id: str, at) -> None:
        """The customer's primary contact (if any) is primary no longer, updated ``at``."""

    @abstractmethod
    def delete(self, contact_id: str) -> None:
        """Remove the contact."""


class NoteRepository(Protocol):
    """Append and read; there is deliberately no update or delete."""

    @abstractmethod
    def append(self, note: Note) -> Note:
        """Store the note; returns it with its new id (ids ascend)."""

    @abstractmethod
    def recent(self, customer_id: str, count: int) -> list[Note]:
        """The customer's latest ``count`` notes, newest first."""


class EditionRepository(Protocol):
    @abstractmethod
    def policy_for(self, edition: str) -> str | None:
        """The license-service policy of ``edition``, or None when it is not known."""

    @abstractmethod
    def all(self) -> dict[str, str]:
        """``{edition: policy}``, by edition name."""

    @abstractmethod
    def set(self, edition: str, policy: str, at) -> None:
        """Insert or change the edition's policy."""


class LicenseRepository(Protocol):
    @abstractmethod
    def add(self, lic: License) -> None:
        """Insert a license; ``id`` and ``human_id`` are unique."""

    @abstractmethod
    def get(self, license_id: str, for_update: bool = False) -> License | None:
        """The license, or None."""

    @abstractmethod
    def list(self, scope, page: Page, *, customer_id=None, state=None, edition=None) -> list[License]:
        """Licenses of the partners in ``scope``, optionally filtered, newest first
        (``issued_at``, then id, descending)."""

    @abstractmethod
    def update(self, lic: License) -> None:
        """Store the license; ``id``, ``human_id`` and ``issued_at`` stay."""

    @abstractmethod
    def count_live_for_customer(self, customer_id: str) -> int:
        """How many of the customer's licenses are active, trial or suspended."""


class TransferRepository(Protocol):
    @abstractmethod
    def add(self, transfer: Transfer) -> None:
        """Insert a transfer record."""

    @abstractmethod
    def list(self, scope, page: Page, *, license_id=None) -> list[Transfer]:
        """Transfers from or to a partner in ``scope``, optionally of one license, newest
        first (``created_at``, then id, descending)."""

    @abstractmethod
    def set_sync_error(self, transfer_id: str, message: str) -> None:
        """Record why the license service could not be told about the transfer."""

    @abstractmethod
    def sync_failures(self) -> list[Transfer]:
        """Transfers with a ``sync_error``, oldest first (for the operator)."""


class LedgerRepository(Protocol):
    """Append and read; no update or delete path."""

    @abstractmethod
    def append(self, event: LedgerEvent) -> LedgerEvent:
        """Store the event; returns it with its new id (ids ascend)."""

    @abstractmethod
    def get(self, event_id: int) -> LedgerEvent | None:
        """The event, or None."""

    @abstractmethod
    def for_customer(self, customer_id: str, filters: ActivityFilter, page: Page) -> list[LedgerEvent]:
        """The customer's events matching ``filters``, newest first (by id): those naming
        the customer, and older ones without a customer reached through its licenses."""

    @abstractmethod
    def for_customer_before(self, customer_id: str, filters: ActivityFilter, before_id,
                            size: int) -> list[LedgerEvent]:
        """As ``for_customer``, the first ``size`` with an id below ``before_id`` (all
        when None)."""

    @abstractmethod
    def export_rows(self, customer_id: str, filters: ActivityFilter, before_id, size: int) -> list:
        """As ``for_customer_before``, as ``core.partner.ledger.ExportRow`` tuples (``data``
        the stored canonical JSON text): what the CSV export writes, with nothing decoded."""

    @abstractmethod
    def histories_for_partner(self, partner_id: str) -> list:
        """Every license the partner ever owned (issued to it or transferred in), with its
        billing-relevant events: ``[(core.partner.billing.LicenseHistory, {contract ids it was
        under}), ...]``, by license id, the changes in ledger order."""

    @abstractmethod
    def summary_for_customer(self, customer_id: str, filters: ActivityFilter) -> tuple:
        """``({event: count}, first at, last at)`` of the events ``for_customer`` reads."""


class WebhookEndpointRepository(Protocol):
    @abstractmethod
    def add(self, endpoint: Endpoint) -> None:
        """Insert an endpoint."""

    @abstractmethod
    def get(self, endpoint_id: str) -> Endpoint | None:
        """The endpoint, or None."""

    @abstractmethod
    def list_for_partner(self, partner_id: str) -> list[Endpoint]:
        """A partner's endpoints, newest first (tie-break on id)."""

    @abstractmethod
    def count_for_partner(self, partner_id: str) -> int:
        """How many endpoints the partner has."""

    @abstractmethod
    def for_partners(self, partner_ids: list[str]) -> list[Endpoint]:
        """The endpoints of any of these partners, oldest first (tie-break on id)."""

    @abstractmethod
    def delete(self, endpoint_id: str) -> None:
        """Remove the endpoint (its deliveries first: they refer to it)."""


class WebhookDeliveryRepository(Protocol):
    @abstractmethod
    def add(self, delivery: Delivery) -> None:
        """Insert a delivery."""

    @abstractmethod
    def for_endpoint(self, endpoint_id: str, page: Page) -> list[Delivery]:
        """The endpoint's deliveries, newest event first (tie-break on id)."""

    @abstractmethod
    def delete_for_endpoint(self, endpoint_id: str) -> int:
        """Remove every delivery of the endpoint; how many went."""

    @abstractmethod
    def due(self, now, exclude, limit: int) -> list[Delivery]:
        """Up to ``limit`` pending deliveries due at ``now`` (``next_attempt_at <= now``),
        unclaimed or with a lapsed claim (``claimed_until < now``), of endpoints not in
        ``exclude``; oldest due first, then by event."""

    @abstractmethod
    def claim(self, delivery_id: str, owner: str, now, until) -> Delivery | None:
        """Claim the delivery for ``owner`` until ``until`` if it is still pending, due at
        ``now``, and unclaimed or its claim lapsed before ``now``: one conditional update,
        of racing callers exactly one wins. The delivery as stored now, or None when this
        call did not claim it."""

    @abstractmethod
    def finish(self, delivery: Delivery, owner: str) -> bool:
        """Store ``delivery``'s status, attempts, last answer, delivery time, next attempt
        and claim if ``owner`` still holds its claim; whether it did."""


class StatementRepository(Protocol):
    @abstractmethod
    def add(self, s) -> None:
        """Insert a ``core.partner.statements.Statement``."""

    @abstractmethod
    def try_lock_recompute(self) -> bool:
        """Take the transaction-scoped recompute lock; False when another process holds it."""

    @abstractmethod
    def draft(self, partner_id: str, period):
        """The partner's draft of ``period``, or None."""

    @abstractmethod
    def replace_draft(self, s) -> None:
        """Drop the partner's draft of the period (if any) and insert ``s``."""

    @abstractmethod
    def latest_finalized(self, partner_id: str, period):
        """The partner's highest revision of ``period`` (finalized or superseded), or None."""

    @abstractmethod
    def finalize_draft(self, s) -> None:
        """Store ``s``'s status, revision and finalization on the draft of the same id."""

    @abstractmethod
    def supersede(self, statement_id: str) -> None:
        """The statement's status becomes ``superseded``."""

    @abstractmethod
    def get(self, statement_id: str):
        """The statement, or None."""

    @abstractmethod
    def visible_for(self, partner_id: str) -> list:
        """The partner's statements but drafts, newest period first, then highest revision."""


# --- panel API -------------------------------------------------------------------------------


class ApiKeyRepository(Protocol):
    @abstractmethod
    def add(self, key: ApiKey) -> None:
        """Insert a key; its id is unique."""

    @abstractmethod
    def get(self, key_id: str) -> ApiKey | None:
        """The key (revoked ones too), or None."""

    @abstractmethod
    def get_many(self, key_ids) -> dict:
        """``{key id: key}`` of those of ``key_ids`` that exist."""

    @abstractmethod
    def all(self) -> list[ApiKey]:
        """Keys not revoked, oldest first."""

    @abstractmethod
    def revoke(self, key_id: str, at) -> None:
        """Set ``revoked_at``."""

    @abstractmethod
    def count_for_customer(self, customer_id: str) -> int:
        """How many keys not revoked belong to the customer."""


class PanelCustomerRepository(Protocol):
    @abstractmethod
    def add(self, c: PanelCustomer) -> None:
        """Insert a customer with its limits."""

    @abstractmethod
    def get(self, customer_id: str, for_update: bool = False) -> PanelCustomer | None:
        """The customer, or None."""

    @abstractmethod
    def usage(self, customer_id: str) -> tuple[int, int, int, int]:
        """(services, memory MB, millicpus, containers) the customer's services count, summed."""

    @abstractmethod
    def page(self, *, page: int, per_page: int, sort: str, order: str, search: str | None):
        """``(customers, total)``: those whose name contains ``search``, ordered by
        ``sort`` (``name``, ``created_at`` or ``email``; others mean ``created_at``) and
        ``order`` (``asc``/``desc``), then by id."""

    @abstractmethod
    def update(self, c: PanelCustomer) -> None:
        """Store name, email and limits."""

    @abstractmethod
    def delete(self, customer_id: str) -> None:
        """Remove the customer, its revoked API keys and its panel users; refused (an
        integrity error) while a service or a live key refers to it."""


class PanelUserRepository(Protocol):
    @abstractmethod
    def get(self, email: str) -> PanelUser | None:
        """The user of a lower-case email, or None."""

    @abstractmethod
    def add(self, user: PanelUser) -> None:
        """Insert a user; the email is unique."""

    @abstractmethod
    def update(self, user: PanelUser) -> None:
        """Store role, customer and ``updated_at``."""

    @abstractmethod
    def all(self) -> list[PanelUser]:
        """Every user, by email."""

    @abstractmethod
    def remove(self, email: str) -> None:
        """Delete the user and its sessions (none of them signs in again)."""


class PanelSessionRepository(Protocol):
    @abstractmethod
    def add(self, s: PanelSession) -> None:
        """Insert a session (its id is the SHA-256 of the cookie's secret)."""

    @abstractmethod
    def get_with_user(self, session_id: str):
        """(session, user) in one lookup, or None."""

    @abstractmethod
    def get_many_with_users(self, session_ids) -> dict:
        """``{session id: (session, user)}`` of those of ``session_ids`` that exist."""

    @abstractmethod
    def revoke(self, session_id: str, at) -> bool:
        """End the session; False when it was unknown or revoked already."""

    @abstractmethod
    def purge(self, ended_before) -> None:
        """Delete the sessions that expired before ``ended_before``."""


class PanelKeySessionRepository(Protocol):
    """Browser sessions opened with an API key (``POST /api/auth/key``)."""

    @abstractmethod
    def add(self, s: KeySession) -> None:
        """Insert a session (its id is the SHA-256 of the cookie's secret); its key exists."""

    @abstractmethod
    def get_with_key(self, session_id: str):
        """(session, its ``ApiKey``) in one lookup, or None."""

    @abstractmethod
    def get_many(self, session_ids) -> dict:
        """``{session id: session}`` of those of ``session_ids`` that exist."""

    @abstractmethod
    def revoke(self, session_id: str, at) -> bool:
        """End the session; False when it was unknown or revoked already."""

    @abstractmethod
    def purge(self, ended_before) -> None:
        """Delete the sessions that expired before ``ended_before``."""


class PanelLoginRepository(Protocol):
    @abstractmethod
    def add(self, p: PendingLogin) -> None:
        """Store a pending login under the hash of its state."""

    @abstractmethod
    def take(self, state_hash: str) -> PendingLogin | None:
        """Read and delete; only the caller whose delete removed the row gets it."""

    @abstractmethod
    def purge(self, now) -> None:
        """Delete the pending logins expired at ``now``."""


class ServiceRepository(Protocol):
    @abstractmethod
    def add(self, s: Service) -> None:
        """Insert a service; its name is unique."""

    @abstractmethod
    def get(self, service_id: str, for_update: bool = False) -> Service | None:
        """The service, or None."""

    @abstractmethod
    def by_name(self, name: str) -> Service | None:
        """The service of that name, or None."""

    @abstractmethod
    def update(self, s: Service) -> None:
        """Store every field but the id."""

    @abstractmethod
    def delete(self, service_id: str) -> None:
        """Remove the service (its backups go with it)."""

    @abstractmethod
    def count_for_customer(self, customer_id: str) -> int:
        """How many services the customer has."""

    @abstractmethod
    def existing(self, service_ids) -> set:
        """Which of ``service_ids`` are services (not deleted)."""

    @abstractmethod
    def with_status(self, status: str) -> list[Service]:
        """The services of one status."""

    @abstractmethod
    def page(self, *, page, per_page, status, customer_id, sort, order, search):
        """``(services, total)``, optionally of one status or customer, the name
        containing ``search``, ordered by ``sort`` (``name``, ``status``, ``created_at``,
        ``updated_at``; others mean ``created_at``) and ``order``, then by id."""

    @abstractmethod
    def customer_names(self, customer_ids) -> dict:
        """``{customer id: name}`` of those panel customers that exist."""


class DeployJobRepository(Protocol):
    @abstractmethod
    def add(self, job: DeployJob) -> None:
        """Insert a job."""

    @abstractmethod
    def get(self, job_id: str) -> DeployJob | None:
        """The job, or None."""

    @abstractmethod
    def claim_queued(self, now, owner: str | None = None, per_customer: int | None = None) -> DeployJob | None:
        """The oldest queued job (``created_at``, then id), now ``running`` for ``owner``
        with one more attempt; None when none is queued. With ``per_customer``, a job
        whose service's customer has that many jobs running already is passed over.
        Claims are serialized across processes."""

    @abstractmethod
    def running_by_customer(self) -> dict:
        """``{customer id: running jobs}`` (jobs whose service still exists)."""

    @abstractmethod
    def requeue_orphaned(self, now, live_owners) -> list[DeployJob]:
        """Running jobs whose owner is not among ``live_owners`` (``LeaseRepository.live``)
        go back to the queue, their owner cleared; returns them as they were."""

    @abstractmethod
    def set_step(self, job_id: str, step: str, now) -> None:
        """Record the step the job is at."""

    @abstractmethod
    def finish(self, job_id: str, state: str, error, now, release_id: str | None = None) -> None:
        """End the job ``succeeded``, ``failed`` or ``cancelled`` with ``error``, its
        ``finished_at`` now; with ``release_id``, the release it recorded."""

    @abstractmethod
    def page(self, service_id: str, *, page: int, per_page: int):
        """The service's jobs, newest (``created_at``, then id) first."""

    @abstractmethod
    def cancel_queued(self, job_id: str, now) -> bool:
        """End the job ``cancelled`` (error "cancelled") if it is still queued; whether it was."""

    @abstractmethod
    def request_cancel(self, job_id: str, now) -> bool:
        """Set the job's ``cancel_requested`` (its worker, in any process, stops it) unless
        it has finished; whether it was set."""

    @abstractmethod
    def cancels_requested(self, job_ids) -> set:
        """Which of ``job_ids`` have ``cancel_requested`` set."""

    @abstractmethod
    def crowded(self, keep: int) -> list[str]:
        """The ids of services with more than ``keep`` deploy jobs."""

    @abstractmethod
    def prune(self, service_id: str, keep: int) -> int:
        """Delete the service's finished jobs older than its newest ``keep`` (by creation);
        a queued or running job is never deleted. How many went."""


class ReleaseRepository(Protocol):
    @abstractmethod
    def add(self, release: Release) -> None:
        """Insert a release; a second one of the same service and number fails."""

    @abstractmethod
    def get(self, release_id: str) -> Release | None:
        """The release, or None."""

    @abstractmethod
    def last_number(self, service_id: str) -> int:
        """The service's highest release number; 0 without any."""

    @abstractmethod
    def numbered(self, service_id: str, number: int) -> Release | None:
        """The service's release of that number, or None."""

    @abstractmethod
    def for_service(self, service_id: str) -> list[Release]:
        """Every release of the service, newest (highest number) first."""

    @abstractmethod
    def page(self, service_id: str, *, page: int, per_page: int):
        """The service's releases, newest first."""

    @abstractmethod
    def delete_for(self, service_id: str) -> None:
        """Remove every release of the service."""


class ServiceEventRepository(Protocol):
    @abstractmethod
    def add(self, event: ServiceEvent) -> ServiceEvent:
        """Append to the service's timeline; returns the event with its new id."""

    @abstractmethod
    def page(self, service_id: str, *, page: int, per_page: int):
        """``(events, total)`` of the service, newest first (by id)."""

    @abstractmethod
    def crowded(self, keep: int) -> list[str]:
        """The ids of services with more than ``keep`` events."""

    @abstractmethod
    def prune(self, service_id: str, keep: int) -> int:
        """Delete the service's events older than its newest ``keep`` (by id); how many went."""


class BackupRepository(Protocol):
    @abstractmethod
    def add(self, backup: Backup) -> None:
        """Insert a backup (a queued job while ``pending``)."""

    @abstractmethod
    def get(self, backup_id: str) -> Backup | None:
        """The backup, or None."""

    @abstractmethod
    def update(self, backup: Backup) -> None:
        """Store every field but the id."""

    @abstractmethod
    def delete(self, backup_id: str) -> None:
        """Remove the backup's row."""

    @abstractmethod
    def busy_for_service(self, service_id: str) -> Backup | None:
        """A backup of the service being made or restored (queued included), oldest first."""

    @abstractmethod
    def page(self, service_id: str, *, page: int, per_page: int, status: str | None = None):
        """``(backups, total)`` of the service, optionally of one status, newest first."""

    @abstractmethod
    def in_state(self, status: str) -> list[Backup]:
        """Backups of one status, oldest first."""

    @abstractmethod
    def in_restore_state(self, status: str) -> list[Backup]:
        """Backups of one restore status, oldest first."""

    @abstractmethod
    def orphaned(self, live_owners, *, restore: bool = False) -> list[Backup]:
        """Backups (or, with ``restore``, restores) running for a worker not among
        ``live_owners``, oldest first."""

    @abstractmethod
    def claim_queued(self, now, owner: str | None = None):
        """The oldest queued backup or restore (``updated_at``, then id), marked running
        for ``owner``: ``(kind, backup)`` with kind ``backup`` or ``restore``, or None."""


class RouteRepository(Protocol):
    @abstractmethod
    def put(self, route: Route) -> None:
        """Insert or replace the record of ``route.hostname`` (a hostname names one
        service)."""

    @abstractmethod
    def replace_for(self, service_id: str, routes: list) -> None:
        """The service's records become exactly ``routes`` (its name under the base
        domain and one per custom domain); a hostname another service held is taken over."""

    @abstractmethod
    def for_service(self, service_id: str) -> list[Route]:
        """The service's records, by hostname."""

    @abstractmethod
    def delete_for(self, service_id: str) -> int:
        """Remove every record of the service; how many went."""

    @abstractmethod
    def all(self) -> list[Route]:
        """Every record, by hostname."""


class CustomDomainRepository(Protocol):
    @abstractmethod
    def for_service(self, service_id: str) -> list[str]:
        """The service's custom domains, by name."""

    @abstractmethod
    def for_services(self, service_ids) -> dict:
        """service id -> its custom domains (by name), for each of ``service_ids``."""

    @abstractmethod
    def claim(self, hostname: str, service_id: str, now) -> str:
        """Insert ``hostname`` for the service unless a service has it; returns the id
        of the service that has it now. Two concurrent claims of one name: one wins (the
        database's primary key), the other sees the winner."""

    @abstractmethod
    def release(self, service_id: str, hostnames) -> int:
        """Remove those names of the service; how many went."""

    @abstractmethod
    def delete_for(self, service_id: str) -> int:
        """Remove every custom domain of the service."""


class LeaseRepository(Protocol):
    @abstractmethod
    def beat(self, worker_id: str, now) -> None:
        """Insert or refresh the worker's heartbeat."""

    @abstractmethod
    def drop(self, worker_id: str) -> None:
        """Remove the worker's lease (a clean stop)."""

    @abstractmethod
    def live(self, since) -> Any:
        """The ids of workers whose heartbeat is at or after ``since``, as something the
        ``requeue_orphaned`` and ``orphaned`` methods of this unit of work take (a
        sub-query in SQL, a set in memory)."""

    @abstractmethod
    def held(self, prefix: str, since) -> set:
        """The ids starting with ``prefix`` whose lease has a heartbeat at or after
        ``since`` (the leases of operations on services, ``core.panel.leases``)."""

    @abstractmethod
    def purge(self, before) -> int:
        """Remove leases whose heartbeat is older than ``before``; how many went."""


# --- the unit of work ------------------------------------------------------------------------


class UnitOfWork(Protocol):
    partners: PartnerRepository
    tokens: TokenRepository
    contracts: ContractRepository
    human_ids: HumanIdRepository
    customers: CustomerRepository
    contacts: ContactRepository
    notes: NoteRepository
    editions: EditionRepository
    licenses: LicenseRepository
    transfers: TransferRepository
    ledger: LedgerRepository
    webhook_endpoints: WebhookEndpointRepository
    webhook_deliveries: WebhookDeliveryRepository
    statements: StatementRepository
    api_keys: ApiKeyRepository
    panel_customers: PanelCustomerRepository
    panel_users: PanelUserRepository
    panel_sessions: PanelSessionRepository
    panel_key_sessions: PanelKeySessionRepository
    panel_logins: PanelLoginRepository
    services: ServiceRepository
    deploy_jobs: DeployJobRepository
    releases: ReleaseRepository
    service_events: ServiceEventRepository
    backups: BackupRepository
    routes: RouteRepository
    custom_domains: CustomDomainRepository
    leases: LeaseRepository

    @abstractmethod
    def __enter__(self) -> "UnitOfWork":
        """Begin a transaction. Not re-entrant: one block at a time."""

    @abstractmethod
    def __exit__(self, *exc) -> None:
        """Roll back whatever was not committed."""

    @abstractmethod
    def commit(self) -> None:
        """Keep what this block wrote when it ends (without an exception)."""

    def emit(self, event) -> None:
        """Announce a ``ports.events.Event`` on the event bus once this unit of work
        commits; dropped on rollback."""

    def reading(self):
        """A read-only transaction of this unit of work (a context manager). Default:
        the ordinary one."""
        return self


#: the repositories of a unit of work: attribute name -> protocol
REPOSITORIES: dict[str, type] = get_type_hints(UnitOfWork)
