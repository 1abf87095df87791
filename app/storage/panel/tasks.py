"""peewee repositories of scheduled tasks and their runs (``core.panel.tasks``)."""
from __future__ import annotations

import json

import peewee

from core.panel.tasks import Task, TaskRun


class PeeweeTasks:
    def __init__(self, m):
        self.m = m

    @staticmethod
    def _entity(row) -> Task:
        return Task(id=row.id, service_id=row.service_id, name=row.name, schedule=row.schedule,
                    component=row.component, command=tuple(json.loads(row.command)), timeout_s=row.timeout_s,
                    enabled=bool(row.enabled), next_run_at=row.next_run_at, created_at=row.created_at,
                    updated_at=row.updated_at)

    @staticmethod
    def _columns(task: Task) -> dict:
        return dict(name=task.name, schedule=task.schedule, component=task.component,
                    command=json.dumps(list(task.command)), timeout_s=task.timeout_s, enabled=task.enabled,
                    next_run_at=task.next_run_at, updated_at=task.updated_at)

    def add(self, task: Task) -> None:
        self.m.ServiceTask.insert(id=task.id, service=task.service_id, created_at=task.created_at,
                                  **self._columns(task)).execute()

    def get(self, task_id: str) -> Task | None:
        row = self.m.ServiceTask.get_or_none(self.m.ServiceTask.id == task_id)
        return self._entity(row) if row else None

    def update(self, task: Task) -> None:
        T = self.m.ServiceTask
        T.update(**self._columns(task)).where(T.id == task.id).execute()

    def delete(self, task_id: str) -> None:
        T, R = self.m.ServiceTask, self.m.TaskRun
        R.delete().where(R.task == task_id).execute()  # (the foreign key cascades too)
        T.delete().where(T.id == task_id).execute()

    def count(self, service_id: str) -> int:
        T = self.m.ServiceTask
        return T.select().where(T.service == service_id).count()

    def page(self, service_id: str, *, page: int, per_page: int):
        T = self.m.ServiceTask
        query = T.select().where(T.service == service_id)
        total = query.count()
        rows = query.order_by(T.created_at.desc(), T.id.desc()).paginate(page, per_page)
        return [self._entity(r) for r in rows], total

    def due(self, now, limit: int, after: str | None = None) -> list[Task]:
        T = self.m.ServiceTask
        query = T.select().where((T.next_run_at <= now) & (T.enabled == True))  # noqa: E712 (SQL)
        if after is not None:
            query = query.where(T.id > after)
        return [self._entity(r) for r in query.order_by(T.id).limit(limit)]

    def advance(self, task_id: str, due_at, next_run_at) -> bool:
        """One guarded UPDATE (``WHERE next_run_at = due_at``), as a backup policy's run is
        claimed (``PeeweeBackupPolicies.advance``)."""
        T = self.m.ServiceTask
        return T.update(next_run_at=next_run_at).where(
            (T.id == task_id) & (T.next_run_at == due_at) & (T.enabled == True)).execute() == 1  # noqa: E712


class PeeweeTaskRuns:
    def __init__(self, m):
        self.m = m

    @staticmethod
    def _entity(row) -> TaskRun:
        return TaskRun(id=row.id, task_id=row.task_id, service_id=row.service_id, customer_id=row.customer_id,
                       status=row.status, trigger=row.trigger, created_at=row.created_at, started_at=row.started_at,
                       finished_at=row.finished_at, exit_code=row.exit_code, output=row.output or "",
                       owner=row.owner)

    def add(self, run: TaskRun) -> None:
        self.m.TaskRun.insert(id=run.id, task=run.task_id, service_id=run.service_id, customer_id=run.customer_id,
                              status=run.status, trigger=run.trigger, owner=run.owner, created_at=run.created_at,
                              started_at=run.started_at, finished_at=run.finished_at, exit_code=run.exit_code,
                              output=run.output).execute()

    def get(self, run_id: str) -> TaskRun | None:
        row = self.m.TaskRun.get_or_none(self.m.TaskRun.id == run_id)
        return self._entity(row) if row else None

    def running(self, task_id: str) -> TaskRun | None:
        R = self.m.TaskRun
        row = R.select().where((R.task == task_id) & (R.status == "running")).first()
        return self._entity(row) if row else None

    def newest(self, task_id: str) -> TaskRun | None:
        R = self.m.TaskRun
        row = R.select().where(R.task == task_id).order_by(R.created_at.desc(), R.id.desc()).first()
        return self._entity(row) if row else None

    def newest_of(self, task_ids) -> dict:
        """One indexed read per task (a page holds at most 100; a task every minute has
        thousands of runs, which are never all read)."""
        return {task_id: run for task_id in task_ids if (run := self.newest(task_id)) is not None}

    def page(self, task_id: str, *, page: int, per_page: int):
        R = self.m.TaskRun
        query = R.select().where(R.task == task_id)
        total = query.count()
        rows = query.order_by(R.created_at.desc(), R.id.desc()).paginate(page, per_page)
        return [self._entity(r) for r in rows], total

    def claim_queued(self, now, owner: str | None):
        """One at a time per customer (as preview jobs are claimed); on PostgreSQL the row
        is taken SKIP LOCKED, and the guarded UPDATE lets one claimer win on either."""
        R = self.m.TaskRun
        db = R._meta.database
        started = R.select(R.customer_id).where((R.status == "running") & R.started_at.is_null(False))
        query = (R.select().where((R.status == "running") & R.started_at.is_null() & R.customer_id.not_in(started))
                 .order_by(R.created_at, R.id).limit(1))
        if isinstance(db, peewee.PostgresqlDatabase):
            query = query.for_update("FOR UPDATE SKIP LOCKED")
        row = query.first()
        if row is None:
            return None
        taken = R.update(started_at=now, owner=owner).where(
            (R.id == row.id) & (R.status == "running") & R.started_at.is_null()).execute()
        return self.get(row.id) if taken else None

    def finish(self, run: TaskRun) -> None:
        R = self.m.TaskRun
        R.update(status=run.status, exit_code=run.exit_code, output=run.output, finished_at=run.finished_at).where(
            (R.id == run.id) & (R.status == "running")).execute()

    def fail_orphaned(self, live_owners, now, reason: str) -> list[str]:
        R = self.m.TaskRun
        orphans = [r.id for r in R.select(R.id).where(
            (R.status == "running") & R.started_at.is_null(False) & (R.owner.is_null() | R.owner.not_in(live_owners)))]
        for run_id in orphans:
            run = self.get(run_id)
            output = ((run.output + "\n") if run and run.output else "") + reason
            R.update(status="failed", finished_at=now, output=output).where(
                (R.id == run_id) & (R.status == "running")).execute()
        return orphans
