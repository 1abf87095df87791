"""The panel API's repositories of route records and custom domains in the storage port
(``ports.storage``); the conventions they keep are in the package's docstring."""
from __future__ import annotations

from abc import abstractmethod
from typing import Protocol

from core.panel.routes import Route


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
