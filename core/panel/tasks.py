"""Scheduled tasks: a command run in one of a service's containers on a cron schedule, or
now, with a time limit, and the history of its runs.

A task is ``{id, name, schedule, component, command, timeout_s, enabled}``: ``schedule`` a
five-field cron expression read in UTC (``core.panel.schedules``), ``component`` the
compose service whose running container runs ``command`` (an array of strings, run as
``exec`` does: no shell unless the command names one), ``timeout_s`` 1-3600 (300 by
default). At most ``MAX_TASKS`` per service. Its row holds ``next_run_at``.

A run is ``{id, status, started_at, finished_at, exit_code, output}``: ``running`` from the
moment it is queued (``started_at`` is null until a worker starts it) until it ends
``succeeded`` (exit status 0), ``failed`` (another exit status, or the command could not
run: the output says why), ``timed_out`` (killed at ``timeout_s``; no exit status) or
``skipped`` (it came due while the task's previous run still ran). ``output`` is the last
64 KiB of what the command wrote, standard output and error as the engine passed them on.

Decisions:

- A due run is claimed once across every process sharing the database: the transaction
  that queues the run (or records it ``skipped``) also moves the task's ``next_run_at``
  on, guarded by its old value (``TaskRepository.advance``), as a backup policy's run is.
  The next run is the schedule's first time after *now*: runs missed while no process ran
  make one run, not one per missed time.
- A queued run is started by one worker: ``claim_next`` takes the oldest queued run of a
  customer that has none started, under the worker's lease, so a customer's long task
  holds up only that customer's other runs. A run a stopped process left started (its
  lease stale) ends ``failed``: whether its command finished is unknown, and it is never
  run twice.
- The command runs through the runtime port's ``exec_command`` on the engine's threads,
  never in a transaction nor on a database thread; the engine kills it (and what it
  started) at ``timeout_s``.
"""
from __future__ import annotations

import secrets
from dataclasses import dataclass, replace
from datetime import datetime

from core.errors import Conflict, Invalid, NotFound
from core.panel.schedules import next_run, schedule_problem
from core.panel.services import visible

MAX_TASKS = 20
TIMEOUT_MIN, TIMEOUT_MAX, TIMEOUT_DEFAULT = 1, 3600, 300
OUTPUT_LIMIT = 64 * 1024  # bytes of a run's output kept (the last ones)
NAME_MAX = 100
COMMAND_MAX_ARGS, COMMAND_MAX_BYTES = 64, 16 * 1024
COMPONENT_MAX = 63
DUE_BATCH = 50
STATUSES = ("running", "succeeded", "failed", "timed_out", "skipped")
FIELDS = ("name", "schedule", "component", "command", "timeout_s", "enabled")
STOPPED = "the server running this task stopped before it ended"


@dataclass(frozen=True)
class Task:
    id: str
    service_id: str
    name: str
    schedule: str
    component: str
    command: tuple
    timeout_s: int
    enabled: bool
    next_run_at: datetime
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True)
class TaskRun:
    id: str
    task_id: str
    service_id: str
    customer_id: str
    status: str
    trigger: str  # schedule | manual
    created_at: datetime
    started_at: datetime | None = None
    finished_at: datetime | None = None
    exit_code: int | None = None
    output: str = ""
    owner: str | None = None  # the worker lease of the process that started it


def new_task_id() -> str:
    return f"task_{secrets.token_hex(8)}"


def new_run_id() -> str:
    return f"run_{secrets.token_hex(8)}"


# --- requests -------------------------------------------------------------------------------


def _component_problem(value) -> str | None:
    if not isinstance(value, str) or not 1 <= len(value) <= COMPONENT_MAX \
            or not (value[0].isascii() and value[0].isalnum()) \
            or any(not (c.isascii() and (c.isalnum() or c in "_.-")) for c in value):
        return f"the name of one of the service's components (compose services): 1-{COMPONENT_MAX} of a-z, 0-9, _ . -"
    return None


def _command_problem(value) -> str | None:
    if not isinstance(value, list) or not 1 <= len(value) <= COMMAND_MAX_ARGS \
            or any(not isinstance(a, str) for a in value):
        return f"an array of 1-{COMMAND_MAX_ARGS} strings (run as exec runs it: no shell unless it names one)"
    if not value[0]:
        return "its first string names the program to run"
    if any("\0" in a for a in value):
        return "no string may hold a NUL character"
    if sum(len(a.encode("utf-8", "surrogatepass")) for a in value) > COMMAND_MAX_BYTES:
        return f"at most {COMMAND_MAX_BYTES} bytes in all"
    return None


def _problems(body: dict, partial: bool) -> dict:
    problems = {}
    checks = {
        "name": lambda v: None if isinstance(v, str) and 1 <= len(v.strip()) and len(v) <= NAME_MAX
        and v.isprintable() else f"1-{NAME_MAX} printable characters",
        "schedule": schedule_problem,
        "component": _component_problem,
        "command": _command_problem,
        "timeout_s": lambda v: None if isinstance(v, int) and not isinstance(v, bool)
        and TIMEOUT_MIN <= v <= TIMEOUT_MAX else f"an integer from {TIMEOUT_MIN} to {TIMEOUT_MAX} (seconds)",
        "enabled": lambda v: None if isinstance(v, bool) else "true or false",
    }
    for name, check in checks.items():
        if name not in body:
            if not partial and name in ("name", "schedule", "component", "command"):
                problems[name] = "is required"
            continue
        problem = check(body[name])
        if problem:
            problems[name] = problem
    unknown = sorted(set(body) - set(FIELDS))
    for name in unknown:
        problems[name] = "is not a field of a task: " + ", ".join(FIELDS)
    return problems


def create_task(uow, clock, principal, service_id: str, body: dict) -> Task:
    """A new task of the service, due at its schedule's first time from now. 422 naming the
    field that is wrong; 409 for the service's 21st task."""
    principal.require("services:operate")
    body = body if isinstance(body, dict) else {}
    with uow:
        service = visible(principal, uow.services.get(service_id), service_id)
        problems = _problems(body, partial=False)
        if problems:
            raise Invalid("invalid task", fields=problems)
        if uow.tasks.count(service.id) >= MAX_TASKS:
            raise Conflict(f"a service has at most {MAX_TASKS} tasks: delete one first")
        now = clock.now()
        schedule = " ".join(body["schedule"].split())
        task = Task(id=new_task_id(), service_id=service.id, name=body["name"].strip(), schedule=schedule,
                    component=body["component"], command=tuple(body["command"]),
                    timeout_s=body.get("timeout_s", TIMEOUT_DEFAULT), enabled=body.get("enabled", True),
                    next_run_at=next_run(schedule, now), created_at=now, updated_at=now)
        uow.tasks.add(task)
        uow.commit()
    return task


def _visible_task(uow, principal, service_id: str, task_id: str) -> Task:
    service = visible(principal, uow.services.get(service_id), service_id)
    task = uow.tasks.get(task_id)
    if task is None or task.service_id != service.id:
        raise NotFound(f"task {task_id} not found")
    return task


def get_task(uow, principal, service_id: str, task_id: str) -> tuple[Task, TaskRun | None]:
    """The task and its newest run (None: it never ran)."""
    principal.require("services:read")
    with uow:
        task = _visible_task(uow, principal, service_id, task_id)
        return task, uow.task_runs.newest(task.id)


def list_tasks(uow, principal, service_id: str, *, page: int, per_page: int):
    """The service's tasks, newest first, each with its newest run: ``([(task, run)], total)``."""
    principal.require("services:read")
    with uow:
        service = visible(principal, uow.services.get(service_id), service_id)
        tasks, total = uow.tasks.page(service.id, page=page, per_page=per_page)
        newest = uow.task_runs.newest_of([t.id for t in tasks])
        return [(t, newest.get(t.id)) for t in tasks], total


def update_task(uow, clock, principal, service_id: str, task_id: str, body: dict) -> tuple[Task, TaskRun | None]:
    """Change the fields given; a new schedule, or a task enabled again, is next due at
    the schedule's first time from now."""
    principal.require("services:operate")
    body = body if isinstance(body, dict) else {}
    with uow:
        task = _visible_task(uow, principal, service_id, task_id)
        problems = _problems(body, partial=True)
        if problems:
            raise Invalid("invalid task", fields=problems)
        now = clock.now()
        changed = {k: v for k, v in body.items() if k in FIELDS}
        if "schedule" in changed:
            changed["schedule"] = " ".join(changed["schedule"].split())
        if "name" in changed:
            changed["name"] = changed["name"].strip()
        if "command" in changed:
            changed["command"] = tuple(changed["command"])
        updated = replace(task, **changed, updated_at=now)
        if updated.schedule != task.schedule or (updated.enabled and not task.enabled):
            updated = replace(updated, next_run_at=next_run(updated.schedule, now))
        uow.tasks.update(updated)
        uow.commit()
        return updated, uow.task_runs.newest(task.id)


def delete_task(uow, principal, service_id: str, task_id: str) -> None:
    """Remove the task and its runs' history (a run going on ends in its container)."""
    principal.require("services:operate")
    with uow:
        task = _visible_task(uow, principal, service_id, task_id)
        uow.tasks.delete(task.id)
        uow.commit()


def list_runs(uow, principal, service_id: str, task_id: str, *, page: int, per_page: int):
    """The task's runs, newest first: ``(runs, total)``."""
    principal.require("services:read")
    with uow:
        task = _visible_task(uow, principal, service_id, task_id)
        return uow.task_runs.page(task.id, page=page, per_page=per_page)


def run_now(uow, clock, principal, service_id: str, task_id: str) -> TaskRun:
    """Queue a run of the task now (a worker starts it); 409 while a run of it runs."""
    principal.require("services:operate")
    with uow:
        task = _visible_task(uow, principal, service_id, task_id)
        service = uow.services.get(task.service_id, for_update=True)
        if uow.task_runs.running(task.id) is not None:
            raise Conflict(f"task {task.id} is running: wait until its run ends")
        run = TaskRun(id=new_run_id(), task_id=task.id, service_id=task.service_id, customer_id=service.customer_id,
                      status="running", trigger="manual", created_at=clock.now())
        uow.task_runs.add(run)
        uow.commit()
    return run


# --- the scheduler and the worker -------------------------------------------------------------


def due_tasks(uow, clock, limit: int = DUE_BATCH, after: str | None = None) -> list[Task]:
    """A page of the enabled tasks due now, by id (``after``: the last one of the page before)."""
    with uow.reading():
        return uow.tasks.due(clock.now(), limit, after)


def queue_due(uow, clock, task: Task) -> TaskRun | None:
    """The run of one due time of ``task`` (as ``due_tasks`` read it), queued, or recorded
    ``skipped`` when the task's previous run still runs; claimed in the same transaction.
    None when another process claimed it, or the task changed or went."""
    now = clock.now()
    with uow:
        service = uow.services.get(task.service_id, for_update=True)
        if service is None:
            return None
        busy = uow.task_runs.running(task.id) is not None
        run = TaskRun(id=new_run_id(), task_id=task.id, service_id=task.service_id, customer_id=service.customer_id,
                      status="skipped" if busy else "running", trigger="schedule", created_at=now,
                      started_at=now if busy else None, finished_at=now if busy else None,
                      output="skipped: the task's previous run was still running" if busy else "")
        if not uow.tasks.advance(task.id, task.next_run_at, next_run(task.schedule, now)):
            return None  # another process claimed this run: nothing written here is kept
        uow.task_runs.add(run)
        uow.commit()
    return run


def claim_next(uow, clock, owner: str | None) -> tuple[TaskRun, Task] | None:
    """The oldest queued run of a customer that has no run started, now started by
    ``owner``; with its task."""
    with uow:
        run = uow.task_runs.claim_queued(clock.now(), owner)
        task = uow.tasks.get(run.task_id) if run is not None else None
        uow.commit()
    return (run, task) if run is not None and task is not None else None


def _container_of(runtime, service_id: str, component: str) -> str:
    from core.panel.containers import COMPONENT_LABEL

    for state in runtime.containers(service_id):
        if state.labels.get(COMPONENT_LABEL) == component and state.running:
            return state.id
    raise LookupError(f"component {component!r} of the service has no running container")


def execute(uow, clock, runtime, run: TaskRun, task: Task) -> TaskRun:
    """Run the task's command in its component's running container (blocking: on an
    engine thread) and record how it ended."""
    status, code, output = "failed", None, ""
    try:
        container = _container_of(runtime, task.service_id, task.component)
        result = runtime.exec_command(container, list(task.command), limit=OUTPUT_LIMIT, timeout=task.timeout_s)
    except Exception as exc:  # noqa: BLE001 (the engine's error, or no container: the run ends failed with it)
        output = str(exc) or type(exc).__name__
    else:
        output = result.output.decode("utf-8", "replace")
        if result.timed_out:
            status = "timed_out"
            output = (output + f"\n[killed after {task.timeout_s} s (timeout_s)]")[-OUTPUT_LIMIT:]
        else:
            code = result.exit_code
            status = "succeeded" if code == 0 else "failed"
    ended = replace(run, status=status, exit_code=code, output=output[-OUTPUT_LIMIT:], finished_at=clock.now())
    with uow:
        uow.task_runs.finish(ended)
        uow.commit()
    return ended


def recover_interrupted(uow, clock) -> list[str]:
    """Runs a stopped process left started (its worker lease stale or gone) end
    ``failed``; returns their ids."""
    from core.panel import leases

    with uow:
        taken = uow.task_runs.fail_orphaned(uow.leases.live(leases.stale_before(clock)), clock.now(), STOPPED)
        uow.commit()
    return taken
