"""The panel API's repositories of worker leases in the storage port (``ports.storage``); the
conventions they keep are in the package's docstring."""
from __future__ import annotations

from abc import abstractmethod
from typing import Any, Protocol




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
