"""Deploy jobs around their run: the queue (claim, recovery of interrupted jobs), the
names of what a job makes in the engine, cancellation, the periodic health check and the
start-up reconciliation with the engine. A job's run itself, step by step, is
:mod:`core.panel.deploy_job`.

A job can be cancelled (its service was deleted): the worker sets the job's ``cancel``
event, which the job looks at between steps and while it waits; the job then removes what
it made and ends ``failed`` with "service deleted" (``cancelled`` when a cancel was asked
for).

A deploy succeeds only when its containers run (and pass their healthchecks) and are
still running after a settle window: a container that exits at once fails the deploy
with its exit code and last lines, never a ``running`` service whose container is gone.
Afterwards the health check keeps the status true: a running service whose container
exited (seen on two checks in a row) becomes ``failed``."""
from __future__ import annotations

from dataclasses import replace

from core.panel import leases
from core.panel.containers import JOB_LABEL, taken_back
from core.panel.events import service_status
from core.panel.services import DELETED, NOT_CHECKED, record  # DELETED: "service deleted"


def resource_names(service, component: str | None = None, volume: str | None = None, job=None) -> str:
    """Engine names: ``slw-<service id>-<volume>`` (volumes, shared by every release),
    ``slw-<service name>-<component>-<job suffix>`` (containers) and ``slw-<service
    id>-<job suffix>`` (the job's network): each deploy job's set has names of its own, so
    a health-gated redeploy starts its set beside the serving one."""
    if volume is not None:
        return f"slw-{service.id}-{volume}"
    suffix = f"-{job_suffix(job)}" if job is not None else ""
    if component is not None:
        return f"slw-{service.name}-{component}{suffix}"
    return f"slw-{service.id}{suffix}"


def job_suffix(job) -> str:
    """What a job's container and network names end with: the job id's random part."""
    return job.id.rpartition("_")[2][:8]


class JobCancelled(Exception):
    """The job's ``cancel`` event was set: its service was deleted, or a cancel was asked
    for (the event's ``reason``, "service deleted" when it has none)."""


CANCELLED = "cancelled"


def cancel_reason(cancel) -> str | None:
    """None while ``cancel`` is not set; otherwise why: "cancelled" or "service deleted"."""
    if cancel is None or not cancel.is_set():
        return None
    return getattr(cancel, "reason", None) or DELETED


class ContainersGone(RuntimeError):
    """Containers the job started vanished: most often a delete of the service is under
    way (it removes them from the engine before it removes the service's row)."""


class ContainersKilled(ContainersGone):
    """A container the job started was killed (exit 137 or 143): a delete under way stops
    them before it removes them, so the job gives the delete its grace before calling
    this the reason (an out-of-memory kill still ends the job with the exit report)."""


KILLED_EXIT_CODES = (137, 143)  # 128 + SIGKILL, 128 + SIGTERM


MAX_ATTEMPTS = 3  # claims of one job; the third interrupted run is its last


def claim_next(uow, clock, owner: str | None = None, per_customer: int | None = None):
    """Take the oldest queued job for worker ``owner`` (SKIP LOCKED on PostgreSQL, so
    processes share the queue). With ``per_customer``, jobs of a customer that already
    has that many jobs running (in any process: counted in the database, claims being
    serialized) are skipped and wait."""
    with uow:
        job = uow.deploy_jobs.claim_queued(clock.now(), owner, per_customer=per_customer)
        uow.commit()
    return job


def recover_interrupted(uow, clock) -> list[str]:
    """Jobs left ``running`` by a stopped process (its worker lease is stale or gone,
    ``core.panel.leases``) go back to the queue, to run again; live workers' jobs stay. A job
    whose runs were interrupted ``MAX_ATTEMPTS`` times (one that takes its worker down
    with it, say) is not run again: it and its service end ``failed``."""
    with uow:
        resumed = uow.deploy_jobs.requeue_orphaned(clock.now(), uow.leases.live(leases.stale_before(clock)))
        for job in resumed:
            if job.attempts < MAX_ATTEMPTS:
                record(uow, clock, job.service_id, job.kind, "started",
                       f"{job.kind} job {job.id} resumed after a restart")
                continue
            reason = (f"interrupted {job.attempts} times (its worker stopped while running it each time); "
                      "not run again: redeploy to try once more")
            uow.deploy_jobs.finish(job.id, "failed", reason, clock.now())
            current = uow.services.get(job.service_id, for_update=True)
            if current is not None and current.status == "deploying":
                uow.services.update(replace(current, status="failed", updated_at=clock.now(), **NOT_CHECKED))
                uow.emit(service_status(current, "failed"))
                record(uow, clock, job.service_id, job.kind, "failed", f"{job.kind} failed: {reason}")
        uow.commit()
    return [job.id for job in resumed]


def exit_report(runtime, state) -> str:
    """"container <name> exited with code <n>; last output: <lines>" for a stopped
    container (its last 10 lines, when the engine still has them)."""
    code = getattr(state, "exit_code", None)
    how = f"exited with code {code}" if code is not None else f"stopped ({state.status})"
    try:
        tail = "\n".join(line.message for line in runtime.logs(state.id, tail=10))
    except Exception:  # noqa: BLE001 (the report is worth more than its last lines)
        tail = ""
    return f"container {state.name} {how}; last output:\n{tail}" if tail else f"container {state.name} {how}"


def health_of(states) -> str:
    """"healthy", "starting" or "unhealthy": the verdict on a set of containers."""
    if not states or any(not s.running or s.health == "unhealthy" for s in states):
        return "unhealthy"
    if any(s.health == "starting" for s in states):
        return "starting"
    return "healthy"


def serving_states(uow, service, states) -> list:
    """Of ``states`` (the service's containers in the engine), those of the release that
    serves: the set its deploy job started (label ``slipway.job``). The set a redeploy or
    rollback is retiring after its switch, or one a failed job left, never counts.
    Containers from before sets were labelled count while none of the release's is found;
    a service without a release (none recorded yet) counts all of its containers."""
    if service.release is None:
        return states
    with uow.reading():
        release = uow.releases.numbered(service.id, service.release)
    if release is None:
        return states
    own = [s for s in states if s.labels.get(JOB_LABEL) == release.deploy_job_id]
    leaving = {s.id for s in taken_back(own)}  # replaced by a take-back of the host ports: not serving
    return [s for s in own if s.id not in leaving] or [s for s in states if JOB_LABEL not in s.labels]


def check_health(uow, clock, runtime) -> int:
    """Look at the containers of every running service's serving release
    (:func:`serving_states`); record changes in the timeline. A service whose container
    stopped (or whose containers are gone) on two checks in a row becomes ``failed``:
    event ``health`` ``failed`` with the exit code and last lines, ``service.status``
    announced, its route record removed (the host port is free). Two sightings, because
    a process may stop while its operation's lease says nothing yet.

    Containers being replaced are no verdict: a service whose start, stop or restart is
    under way (its operation lease, ``core.panel.leases``) is not checked, and a check
    whose service changed between the reading of the list and the verdict (a switch to
    another release, an operation that began or ended, anything that wrote
    ``updated_at``) is dropped: the next one looks again."""
    with uow.reading():
        running = uow.services.with_status("running")
        busy = leases.operating(uow, clock, [s.id for s in running])
    changed = 0
    for service in running:
        if service.id in busy:
            continue
        report = None
        try:
            states = serving_states(uow, service, runtime.containers(service.id))
            status = health_of(states)
            stopped = [s for s in states if not s.running]
            if stopped:
                report = exit_report(runtime, stopped[0])
            elif not states:
                report = "containers missing from the engine: redeploy the service"
        except Exception:  # noqa: BLE001 - an unreachable engine is not a verdict on the service
            status = "unknown"
        now = clock.now()
        with uow:
            current = uow.services.get(service.id, for_update=True)
            if current is None or current.status != "running":
                continue
            if (current.release, current.updated_at) != (service.release, service.updated_at) \
                    or leases.operating(uow, clock, [current.id]):
                continue  # what was read is not what serves now
            if report is not None and current.health_failures >= 1:  # seen on the previous check too
                uow.routes.delete_for(current.id)
                failed = replace(current, status="failed", updated_at=now, **NOT_CHECKED)
                uow.services.update(failed)
                uow.emit(service_status(failed))
                record(uow, clock, service.id, "health", "failed", f"service failed: {report}")
                uow.commit()
                changed += 1
                continue
            failures = current.health_failures + 1 if status == "unhealthy" else 0
            uow.services.update(replace(current, health_status=status, health_checked_at=now,
                                        health_failures=failures))
            if status != current.health_status and status in ("healthy", "unhealthy"):
                record(uow, clock, service.id, "health", status, f"service is {status}")
                changed += 1
            uow.commit()
    return changed


def _drop_superseded(uow, runtime, service, states) -> list:
    """A process that stopped between a health-gated switch and the removal of the old set
    leaves two sets: the containers of every job but the running release's go, and those
    of the running release's that a take-back of the host ports replaced."""
    if service.release is None:
        return states
    with uow.reading():
        serving = next((r.deploy_job_id for r in uow.releases.for_service(service.id)
                        if r.number == service.release), None)
    if serving is None or not any(s.labels.get(JOB_LABEL) == serving for s in states):
        return states
    leaving = {s.id for s in taken_back([s for s in states if s.labels.get(JOB_LABEL) == serving])}
    kept = []
    for state in states:
        if state.labels.get(JOB_LABEL) == serving and state.id not in leaving:
            kept.append(state)
        else:
            runtime.remove_container(state.id)
    return kept


def reconcile(uow, clock, runtime) -> list[str]:
    """Rebuild the panel's view from the engine (its ``slipway.service`` labels) at
    start-up: a service the database calls running or stopped whose containers are gone
    becomes ``failed``; one whose containers all stopped while it was ``running`` becomes
    ``stopped``. Returns the ids changed."""
    with uow.reading():
        candidates = uow.services.with_status("running") + uow.services.with_status("stopped")
    changed = []
    for service in candidates:
        states = runtime.containers(service.id)
        states = _drop_superseded(uow, runtime, service, states)
        if not states:
            new, message = "failed", "containers missing from the engine: redeploy the service"
        elif service.status == "running" and not any(s.running for s in states):
            new, message = "stopped", "containers found stopped in the engine"
        else:
            continue
        with uow:
            current = uow.services.get(service.id, for_update=True)
            if current is None or current.status != service.status:
                continue
            uow.routes.delete_for(current.id)  # no container holds its host port
            uow.services.update(replace(current, status=new, updated_at=clock.now(), **NOT_CHECKED))
            uow.emit(service_status(current, new))
            record(uow, clock, service.id, "deploy" if new == "failed" else "stop",
                   "failed" if new == "failed" else "success", message)
            uow.commit()
        changed.append(service.id)
    return changed
