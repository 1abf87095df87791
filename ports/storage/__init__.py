"""The storage port: a unit of work and the repositories the use cases read and write.

A use case opens the unit of work with ``with uow:``, reads and writes through its
repositories, and calls ``uow.commit()``; leaving the block without a commit rolls back.

Every repository core reaches through ``uow.<name>`` is declared as a ``typing.Protocol``,
one docstring per method: the partner API's in ``ports.storage.partner``, the panel API's in
the ``ports.storage.panel`` package (a module per aggregate); this module holds the unit of work that carries them all and
re-exports every repository (``from ports.storage import LicenseRepository`` works). The
peewee implementation lives in ``app/storage`` (its ``partner`` and ``panel`` packages);
the in-memory one that core's unit tests use in ``tests/support/fakes.py``. A test
(``tests/unit/app/test_storage_port.py``) checks that both implement every method with
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
from typing import Protocol, get_type_hints

from ports.storage.panel import (ApiKeyRepository, BackupPolicyRepository, BackupRepository, CustomDomainRepository, DeployJobRepository,
                                 DeployKeyRepository,
                                 GitDeliveryRepository, PreviewJobRepository,
                                 LeaseRepository, PanelCustomerRepository, PanelKeySessionRepository,
                                 PanelLoginRepository, PanelSessionRepository, PanelUserRepository,
                                 ReleaseRepository, RouteRepository, ServiceEventRepository, ServiceRepository,
                                 TaskRepository, TaskRunRepository)
from ports.storage.partner import (ContactRepository, ContractRepository, CustomerRepository, EditionRepository,
                                   HumanIdRepository, LedgerRepository, LicenseRepository, NoteRepository,
                                   PartnerRepository, StatementRepository, TokenRepository, TransferRepository,
                                   WebhookDeliveryRepository, WebhookEndpointRepository)

__all__ = ["REPOSITORIES", "ApiKeyRepository", "BackupPolicyRepository", "BackupRepository", "ContactRepository", "ContractRepository",
           "CustomDomainRepository", "CustomerRepository", "DeployJobRepository", "DeployKeyRepository", "EditionRepository",
           "GitDeliveryRepository", "PreviewJobRepository",
           "HumanIdRepository", "LeaseRepository", "LedgerRepository", "LicenseRepository", "NoteRepository",
           "PanelCustomerRepository", "PanelKeySessionRepository", "PanelLoginRepository",
           "PanelSessionRepository", "PanelUserRepository", "PartnerRepository", "ReleaseRepository",
           "RouteRepository", "ServiceEventRepository", "ServiceRepository", "StatementRepository",
           "TokenRepository", "TransferRepository", "UnitOfWork", "WebhookDeliveryRepository",
           "WebhookEndpointRepository"]


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
    git_deliveries: GitDeliveryRepository
    preview_jobs: PreviewJobRepository
    releases: ReleaseRepository
    service_events: ServiceEventRepository
    backups: BackupRepository
    backup_policies: BackupPolicyRepository
    tasks: TaskRepository
    task_runs: TaskRunRepository
    deploy_keys: DeployKeyRepository
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
