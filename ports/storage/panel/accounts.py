"""The panel API's repositories of API keys and panel customers in the storage port
(``ports.storage``); the conventions they keep are in the package's docstring."""
from __future__ import annotations

from abc import abstractmethod
from typing import Protocol

from core.panel.access import ApiKey
from core.panel.customers import PanelCustomer


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
