"""The panel API's repositories of services, their deploy jobs, git deliveries, releases and
event timelines in the storage port (``ports.storage``); the conventions they keep are in
the package's docstring."""
from __future__ import annotations

from abc import abstractmethod
from typing import Protocol

from core.panel.releases import Release
from core.panel.services import DeployJob, Service, ServiceEvent, ServiceSummary


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

    @abstractmethod
    def host_ports(self, service_id: str) -> dict:
        """The host ports the service's components keep (``core.panel.deploy_job``):
        ``{component: {container port: host port}}``; ``{}`` when none are kept yet."""

    @abstractmethod
    def keep_host_ports(self, service_id: str, ports: dict) -> None:
        """Keep ``ports`` (``{component: {container port: host port}}``) as the host ports
        the service's components take on their next start, replacing what was kept."""


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


class PreviewJobRepository(Protocol):
    """The preview jobs pull-request deliveries queue (``core.panel.previews``)."""

    @abstractmethod
    def add(self, job) -> None:
        """Store a new (queued) ``PreviewJob``."""

    @abstractmethod
    def get(self, job_id: str):
        """The job, or None."""

    @abstractmethod
    def claim_queued(self, now, owner: str | None = None):
        """The oldest queued job of a customer with none running, marked running under
        ``owner``; None when there is none."""

    @abstractmethod
    def finish(self, job_id: str, state: str, answer: dict, now) -> None:
        """The job ``done`` or ``failed``, with what it did."""

    @abstractmethod
    def requeue_orphaned(self, live_owners, now) -> list:
        """Running jobs of owners not among ``live_owners`` queued again; their ids."""

    @abstractmethod
    def forget_before(self, before) -> int:
        """Delete finished jobs last updated before ``before``; how many went."""


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
    def retarget(self, job_id: str, commit: str, created_by: str, now, commits: tuple = ()) -> bool:
        """The job, if still queued, deploys ``commit`` (asked by ``created_by``) instead,
        ``commits`` its commits (every one pushed into it, in the order they came: it
        deploys the newest of them); whether it was still queued."""

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
    def fail_queued(self, service_id: str, error: str, now) -> list[str]:
        """End every job of the service still queued ``failed`` with ``error`` (none of
        them will be claimed any more); their ids."""

    @abstractmethod
    def running_ids(self, service_id: str) -> list[str]:
        """The ids of the service's jobs ``running`` now (in any process)."""

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
        """Remove every release of the service (and their ancestries)."""

    @abstractmethod
    def add_ancestry(self, release_id: str, service_id: str, commits) -> None:
        """Record ``commits`` as ancestors of the commit release ``release_id`` (of
        ``service_id``) deployed; one already recorded is kept once."""

    @abstractmethod
    def ancestry(self, release_id: str) -> tuple:
        """The recorded ancestors of release ``release_id``'s commit, sorted."""

    @abstractmethod
    def has_ancestor(self, release_id: str, commit: str) -> bool:
        """Whether ``commit`` is a recorded ancestor of release ``release_id``'s commit."""


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
