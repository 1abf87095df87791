"""Handlers of the panel API's scheduled tasks of a service and their runs
(``core.panel.tasks``); the scheduler and the worker that run them are in
``app.workers.tasks``."""
from __future__ import annotations

from app.http.pipeline import Reply
from app.http.timefmt import rfc3339
from core.panel import tasks


def run_json(r) -> dict:
    return {"id": r.id, "task_id": r.task_id, "status": r.status, "trigger": r.trigger,
            "created_at": rfc3339(r.created_at), "started_at": rfc3339(r.started_at),
            "finished_at": rfc3339(r.finished_at), "exit_code": r.exit_code, "output": r.output}


def task_json(t, last_run=None) -> dict:
    return {"id": t.id, "service_id": t.service_id, "name": t.name, "schedule": t.schedule,
            "component": t.component, "command": list(t.command), "timeout_s": t.timeout_s, "enabled": t.enabled,
            "next_run_at": rfc3339(t.next_run_at) if t.enabled else None,
            "created_at": rfc3339(t.created_at), "updated_at": rfc3339(t.updated_at),
            "last_run": None if last_run is None else {k: v for k, v in run_json(last_run).items()
                                                        if k not in ("task_id", "output")}}


class TasksHandlers:
    """``wake()`` tells the task worker a run was queued."""

    def __init__(self, store, clock, wake=lambda: None):
        self.store, self.clock, self.wake = store, clock, wake

    def handlers(self) -> dict:
        return {"listTasks": self.list_tasks, "createTask": self.create_task, "getTask": self.get_task,
                "updateTask": self.update_task, "deleteTask": self.delete_task, "listTaskRuns": self.list_runs,
                "runTask": self.run_task}

    async def list_tasks(self, call):
        p = call.params
        found, total = await self.store.run(tasks.list_tasks, self.store.uow(write=False), call.caller, p["id"],
                                            page=p["page"], per_page=p["per_page"])
        return Reply(200, {"data": [task_json(t, r) for t, r in found], "total": total, "page": p["page"],
                           "per_page": p["per_page"]})

    async def create_task(self, call):
        task = await self.store.run(tasks.create_task, self.store.uow(), self.clock, call.caller, call.params["id"],
                                    call.body)
        return Reply(201, task_json(task))

    async def get_task(self, call):
        task, run = await self.store.run(tasks.get_task, self.store.uow(write=False), call.caller, call.params["id"],
                                         call.params["task_id"])
        return Reply(200, task_json(task, run))

    async def update_task(self, call):
        task, run = await self.store.run(tasks.update_task, self.store.uow(), self.clock, call.caller,
                                         call.params["id"], call.params["task_id"], call.body)
        return Reply(200, task_json(task, run))

    async def delete_task(self, call):
        await self.store.run(tasks.delete_task, self.store.uow(), call.caller, call.params["id"],
                             call.params["task_id"])
        return Reply(204)

    async def list_runs(self, call):
        p = call.params
        found, total = await self.store.run(tasks.list_runs, self.store.uow(write=False), call.caller, p["id"],
                                            p["task_id"], page=p["page"], per_page=p["per_page"])
        return Reply(200, {"data": [run_json(r) for r in found], "total": total, "page": p["page"],
                           "per_page": p["per_page"]})

    async def run_task(self, call):
        run = await self.store.run(tasks.run_now, self.store.uow(), self.clock, call.caller, call.params["id"],
                                   call.params["task_id"])
        self.wake()
        return Reply(202, run_json(run))
