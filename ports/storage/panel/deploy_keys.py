"""The panel API's repositories of deploy keys in the storage port (``ports.storage``); the
conventions they keep are in the package's docstring."""
from __future__ import annotations

from abc import abstractmethod
from typing import Protocol

from core.panel.deploy_keys import DeployKey, PrivateKey


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
