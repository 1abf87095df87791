"""The storage port: a unit of work and the repositories the use cases read and write.

A use case opens the unit of work with ``with uow:``, reads and writes through its
repositories, and calls ``uow.commit()``; leaving the block without a commit rolls back.
"""
from __future__ import annotations

from abc import ABC, abstractmethod

from core.contracts import Contract
from core.identity import Partner, Token


class PartnerRepository(ABC):
    @abstractmethod
    def add(self, partner: Partner) -> None: ...

    @abstractmethod
    def get(self, partner_id: str) -> Partner | None: ...

    @abstractmethod
    def subtree_ids(self, partner_id: str) -> set[str]:
        """The partner's id and the ids of all its descendants."""


class TokenRepository(ABC):
    @abstractmethod
    def add(self, token: Token) -> None: ...

    @abstractmethod
    def get(self, token_id: str) -> Token | None: ...

    @abstractmethod
    def by_hash_with_partner(self, token_hash: str) -> tuple[Token, Partner] | None:
        """The token with this SHA-256 hash and its partner, in one lookup."""

    @abstractmethod
    def list_for_partner(self, partner_id: str) -> list[Token]:
        """All of a partner's tokens, newest first."""

    @abstractmethod
    def revoke(self, token_id: str, at) -> None: ...

    @abstractmethod
    def touch(self, token_id: str, at, older_than) -> None:
        """Set ``last_used_at`` to ``at`` unless it is already later than ``older_than``."""


class ContractRepository(ABC):
    @abstractmethod
    def add(self, contract: Contract) -> None: ...

    @abstractmethod
    def get(self, contract_id: str) -> Contract | None: ...


class UnitOfWork(ABC):
    partners: PartnerRepository
    tokens: TokenRepository
    contracts: ContractRepository

    @abstractmethod
    def __enter__(self) -> "UnitOfWork": ...

    @abstractmethod
    def __exit__(self, *exc) -> None:
        """Roll back whatever was not committed."""

    @abstractmethod
    def commit(self) -> None: ...

    def emit(self, event) -> None:
        """Announce a ``ports.events.Event`` on the event bus once this unit of work
        commits; dropped on rollback."""

    def reading(self):
        """A read-only transaction of this unit of work (a context manager). Default:
        the ordinary one."""
        return self
