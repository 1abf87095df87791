"""The panel API's repositories in the storage port (``ports.storage``): API keys, panel
customers, users, sessions and pending logins, services, deploy jobs, releases, service
events, backups, route records, custom domains, worker leases. The conventions they keep
are in the package's docstring."""
from __future__ import annotations

from abc import abstractmethod
from typing import Any, Protocol

from core.panel.access import ApiKey
from core.panel.backup_policies import BackupPolicy
from core.panel.backups import Backup
from core.panel.customers import PanelCustomer
from core.panel.deploy_keys import DeployKey, PrivateKey
from core.panel.releases import Release
from core.panel.routes import Route
from core.panel.services import DeployJob, Service, ServiceEvent, ServiceSummary
from core.panel.sessions import KeySession, PanelSession, PanelUser, PendingLogin


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
    def on_customer_network(self, customer_id: str) -> int:
        """How many of the customer's services join its network (``customer_network``)."""

    @abstractmethod
    def existing(self, service_ids) -> set:
        """Which of ``service_ids`` are services (not deleted)."""

    @abstractmethod
    def preview(self, parent_id: str, number: int, for_update: bool = False) -> Service | None:
        """The preview service of ``parent_id``'s pull request ``number``, if there is one."""

    @abstractmethod
    def preview_ids(self, parent_id: str) -> list[str]:
        """The ids of ``parent_id``'s preview services, by pull-request number."""

    @abstractmethod
    def previews_page(self, parent_id: str, *, page: int, per_page: int):
        """One page of ``parent_id``'s previews, by pull-request number; and how many there are."""

    @abstractmethod
    def with_status(self, status: str) -> list[Service]:
        """The services of one status."""

    @abstractmethod
    def page(self, *, page, per_page, status, customer_id, sort, order, search) -> tuple[list[ServiceSummary], int]:
        """``(summaries, total)``: one page of services as ``ServiceSummary``, optionally
        of one status or customer, the name containing ``search``, ordered by ``sort``
        (``name``, ``status``, ``created_at``, ``updated_at``; others mean ``created_at``)
        and ``order``, then by id. The total and the page agree (one snapshot) even
        outside a transaction."""

    @abstractmethod
    def customer_names(self, customer_ids) -> dict:
        """``{customer id: name}`` of those panel customers that exist."""

    @abstractmethod
    def webhook_secret(self, service_id: str) -> str | None:
        """The service's push-webhook secret in the clear (kept encrypted); None when it
        has none (or there is no such service)."""

    @abstractmethod
    def set_webhook_secret(self, service_id: str, secret: str) -> None:
        """Keep ``secret`` as the service's webhook secret (encrypted), replacing any."""


class GitDeliveryRepository(Protocol):
    """The git providers' webhook deliveries each service received (``core.panel.pushes``)."""

    @abstractmethod
    def seen(self, service_id: str, delivery_id: str) -> bool:
        """Whether the service received the delivery ``delivery_id`` before."""

    @abstractmethod
    def add(self, service_id: str, delivery_id: str, provider: str, now) -> None:
        """Record a delivery; one per (service, delivery id): a second is an integrity error."""

    @abstractmethod
    def forget_before(self, service_id: str, before) -> int:
        """Delete the service's deliveries received before ``before``; how many went."""


class DeployJobRepository(Protocol):
    @abstractmethod
    def add(self, job: DeployJob) -> None:
        """Insert a job."""

    @abstractmethod
    def get(self, job_id: str) -> DeployJob | None:
        """The job, or None."""

    @abstractmethod
    def claim_queued(self, now, owner: str | None = None, per_customer: int | None = None) -> DeployJob | None:
        """The oldest queued job (``created_at``, then id) of a service with no job running
        (one job of a service runs at a time), now ``running`` for ``owner`` with one more
        attempt; None when none is queued. With ``per_customer``, a job
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
    def queued_push(self, service_id: str) -> DeployJob | None:
        """The service's newest push deploy (``created_by`` ``git:...``, a ``commit``)
        still queued, or None."""

    @abstractmethod
    def retarget(self, job_id: str, commit: str, created_by: str, now) -> bool:
        """The job, if still queued, deploys ``commit`` (asked by ``created_by``) instead;
        whether it was still queued."""

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
    def orphaned(self, live_owners, *, restore: bool = False, verify: bool = False) -> list[Backup]:
        """Backups (or, with ``restore``, restores; with ``verify``, verifications) running
        for a worker not among ``live_owners``, oldest first."""

    @abstractmethod
    def claim_queued(self, now, owner: str | None = None):
        """The oldest queued backup, restore or verification (``updated_at``, then id), marked running
        for ``owner``: ``(kind, backup)`` with kind ``backup``, ``restore`` or ``verify``, or None."""

    @abstractmethod
    def completed_scheduled(self, service_id: str) -> list[Backup]:
        """The service's ``completed`` backups a policy made (``scheduled``), newest first
        (``created_at``, then id)."""


class BackupPolicyRepository(Protocol):
    @abstractmethod
    def get(self, service_id: str) -> BackupPolicy | None:
        """The service's policy, or None."""

    @abstractmethod
    def put(self, policy: BackupPolicy) -> None:
        """Insert the service's policy, or replace every field of the one it has."""

    @abstractmethod
    def delete(self, service_id: str) -> bool:
        """Remove the service's policy; False when it had none."""

    @abstractmethod
    def due(self, now, limit: int, after: str | None = None) -> list[BackupPolicy]:
        """At most ``limit`` policies whose ``next_run_at`` is ``now`` or earlier, by
        service id; with ``after``, those whose service id comes after it (the next page)."""

    @abstractmethod
    def advance(self, service_id: str, due_at, next_run_at, *, ran_at=None, backup_id: str | None = None) -> bool:
        """Claim the run due at ``due_at``: set ``next_run_at`` (and, with ``ran_at``,
        ``last_run_at`` and ``last_backup_id``) only if the policy's ``next_run_at`` is
        still ``due_at``. True when this call changed the row; False when another
        transaction claimed the run first or the policy changed or went. On PostgreSQL a
        concurrent claimer waits for this transaction and then matches no row."""


class DeployKeyRepository(Protocol):
    @abstractmethod
    def add(self, key: DeployKey, private_key: str) -> None:
        """Insert a key with its private half (OpenSSH text), which is stored encrypted
        (``SLIPWAY_SECRET_KEY``), never in the clear."""

    @abstractmethod
    def get(self, key_id: str, for_update: bool = False) -> DeployKey | None:
        """The key (without its private half), or None."""

    @abstractmethod
    def private_key(self, key_id: str) -> PrivateKey | None:
        """The key's private half in the clear, for a deploy job's clone; None when the
        key is gone."""

    @abstractmethod
    def page(self, *, page: int, per_page: int, customer_id: str | None):
        """``(keys, total)``: a page of keys (of ``customer_id`` when given), oldest first
        (``created_at``, then id)."""

    @abstractmethod
    def users(self, key_id: str) -> list[str]:
        """The services naming the key, as ``<id> (<name>)``, by id."""

    @abstractmethod
    def delete(self, key_id: str) -> None:
        """Remove the key and its private half."""


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
