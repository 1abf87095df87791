"""The panel API's repositories of panel users, their sessions, key sessions and pending logins
in the storage port (``ports.storage``); the conventions they keep are in the package's
docstring."""
from __future__ import annotations

from abc import abstractmethod
from typing import Protocol

from core.panel.sessions import KeySession, PanelSession, PanelUser, PendingLogin


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
