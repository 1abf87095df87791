"""The panel API's repositories in the storage port (``ports.storage``), one module per
aggregate as in ``app.storage.panel``: accounts (API keys, panel customers), sessions
(users, sessions, key sessions, pending logins), services (services, deploy jobs, git
deliveries, releases, service events), backups (backups, backup policies), tasks (scheduled tasks, their runs), deploy keys,
routes (route records, custom domains) and worker leases. The conventions they keep are in
the package's docstring."""
from __future__ import annotations

from ports.storage.panel.accounts import ApiKeyRepository, PanelCustomerRepository
from ports.storage.panel.backups import BackupPolicyRepository, BackupRepository
from ports.storage.panel.deploy_keys import DeployKeyRepository
from ports.storage.panel.leases import LeaseRepository
from ports.storage.panel.routes import CustomDomainRepository, RouteRepository
from ports.storage.panel.services import (DeployJobRepository, GitDeliveryRepository, PreviewJobRepository, ReleaseRepository,
                                          ServiceEventRepository, ServiceRepository)
from ports.storage.panel.tasks import TaskRepository, TaskRunRepository
from ports.storage.panel.sessions import (PanelKeySessionRepository, PanelLoginRepository, PanelSessionRepository,
                                          PanelUserRepository)

__all__ = ["ApiKeyRepository", "BackupPolicyRepository", "BackupRepository", "CustomDomainRepository",
           "DeployJobRepository", "DeployKeyRepository", "GitDeliveryRepository", "PreviewJobRepository", "LeaseRepository",
           "PanelCustomerRepository", "PanelKeySessionRepository", "PanelLoginRepository", "PanelSessionRepository",
           "PanelUserRepository", "ReleaseRepository", "RouteRepository", "ServiceEventRepository",
           "ServiceRepository", "TaskRepository", "TaskRunRepository"]
