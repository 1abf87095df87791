"""The license-service port: where license keys are issued and their state is enforced.

Slipway's database is the system of record for who owns a license and what it costs;
the license service is what a panel asks whether a key is valid. Every license change
goes through this port inside the use case's transaction: when the service raises
``LicenseServiceError`` the use case rolls back and nothing is recorded.

An edition is resolved to a service *policy* through the operator's edition map; the
API never shows a policy id.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass


class LicenseServiceError(RuntimeError):
    """The license service refused or could not be reached."""


@dataclass(frozen=True)
class IssuedKey:
    service_license_id: str  # the license's id at the service (a UUID)
    key: str  # the full license key, shown to the partner once


class LicenseService(ABC):
    @property
    @abstractmethod
    def name(self) -> str:
        """The value of ``SLIPWAY_LICENSE_SERVICE`` that selects this service."""

    @abstractmethod
    def issue(self, *, policy: str, metadata: dict) -> IssuedKey:
        """Create a license under ``policy`` and return its id and key."""

    @abstractmethod
    def suspend(self, service_license_id: str) -> None:
        """Stop the key from validating until it is reinstated."""

    @abstractmethod
    def reinstate(self, service_license_id: str) -> None:
        """Undo a suspension."""

    @abstractmethod
    def revoke(self, service_license_id: str) -> None:
        """End the license permanently."""

    @abstractmethod
    def change_policy(self, service_license_id: str, policy: str) -> None:
        """Move the license to another policy (an edition change)."""

    @abstractmethod
    def update_metadata(self, service_license_id: str, metadata: dict) -> None:
        """Replace the license's metadata (owner after a transfer)."""


class LicenseServiceFactory(ABC):
    """What ``register_license_services`` returns: builds a service for one app."""

    name: str

    @abstractmethod
    def create(self, settings) -> LicenseService:
        """``settings``: the ``SLIPWAY_*`` variables (``ports.settings.Settings``);
        ``settings.database`` is the app's peewee database (an embedded service keeps its
        data there, inside the caller's transaction)."""

    def migrate(self, database) -> None:
        """Create or upgrade the service's own tables; idempotent. Default: none."""
