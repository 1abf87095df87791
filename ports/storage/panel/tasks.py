"""The panel API's repositories of scheduled tasks and their runs in the storage port
(``ports.storage``); the conventions they keep are in the package's docstring."""
from __future__ import annotations

from abc import abstractmethod
from typing import Protocol

from core.panel.tasks import Task, TaskRun


class TaskRepository(Protocol):
    @abstractmethod
    def add(self, task: Task) -> None:
        """Insert a task."""

    @abstractmethod
    def get(self, task_id: str) -> Task | None:
        """The task, or None."""

    @abstractmethod
    def update(self, task: Task) -> None:
        """Store every field but the id and the service."""

    @abstractmethod
    def delete(self, task_id: str) -> None:
        """Remove the task and its runs."""

    @abstractmethod
    def count(self, service_id: str) -> int:
        """How many tasks the service has."""

    @abstractmethod
    def page(self, service_id: str, *, page: int, per_page: int) -> tuple[list[Task], int]:
        """The service's tasks, newest first (``created_at``, then id), and their number."""

    @abstractmethod
    def due(self, now, limit: int, after: str | None = None) -> list[Task]:
        """At most ``limit`` enabled tasks whose ``next_run_at`` is ``now`` or earlier, by
        id; with ``after``, those whose id comes after it (the next page)."""

    @abstractmethod
    def advance(self, task_id: str, due_at, next_run_at) -> bool:
        """Claim the run due at ``due_at``: set ``next_run_at`` only if the task's is still
        ``due_at``. True when this call changed the row; False when another transaction
        claimed the run first or the task changed or went."""


class TaskRunRepository(Protocol):
    @abstractmethod
    def add(self, run: TaskRun) -> None:
        """Insert a run (a queued one while ``running`` without ``started_at``)."""

    @abstractmethod
    def running(self, task_id: str) -> TaskRun | None:
        """The task's run that is ``running`` (queued or started), or None."""

    @abstractmethod
    def newest(self, task_id: str) -> TaskRun | None:
        """The task's newest run (``created_at``, then id), or None."""

    @abstractmethod
    def newest_of(self, task_ids) -> dict:
        """``{task id: its newest run}`` of those of ``task_ids`` that ran."""

    @abstractmethod
    def page(self, task_id: str, *, page: int, per_page: int) -> tuple[list[TaskRun], int]:
        """The task's runs, newest first, and their number."""

    @abstractmethod
    def claim_queued(self, now, owner: str | None) -> TaskRun | None:
        """The oldest queued run (``running``, not started) of a customer with no run
        started, marked started at ``now`` by ``owner``, or None. Two claimers never get
        one run."""

    @abstractmethod
    def finish(self, run: TaskRun) -> None:
        """Store how a started run ended (status, exit code, output, ``finished_at``)."""

    @abstractmethod
    def fail_orphaned(self, live_owners, now, reason: str) -> list[str]:
        """End ``failed`` (with ``reason`` added to the output) every started run whose
        owner is not among ``live_owners`` (a sub-query of live worker ids); their ids."""
