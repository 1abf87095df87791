"""Deploy jobs: carry a service's plan out through the runtime port, step by step, and
the periodic health check. Runs in worker threads; every step is persisted, so a job
interrupted by a restart is found and run again (idempotently) on start-up.

A job can be cancelled (its service was deleted): the worker sets the job's ``cancel``
event, which the source preparation and the image pulls are handed and which the job
looks at between steps and while it waits; the job then removes what it made and ends
``failed`` with "service deleted".

A deploy succeeds only when its containers run (and pass their healthchecks) and are
still running after a settle window (``settle_seconds``): a container that exits at once
fails the deploy with its exit code and last lines, never a ``running`` service whose
container is gone. Afterwards the health check keeps the status true: a running
service whose container exited (seen on two checks in a row) becomes ``failed``."""
from __future__ import annotations

import time
from dataclasses import replace

from core.panel import routes, leases
from core.panel.containers import BUILT_IMAGES, COMPONENT_LABEL, SERVICE_LABEL, ContainerSpec, built_image_prefix
from core.panel.events import deploy_progress, service_status
from core.panel.services import NOT_CHECKED, record

WAIT_SECONDS = 90
SETTLE_SECONDS = 3.0
POLL_SECONDS = 0.3
DELETED = "service deleted"
STEPS = ("source", "plan", "images", "network", "volumes", "containers", "wait", "done")


def resource_names(service, component: str | None = None, volume: str | None = None) -> str:
    if volume is not None:
        return f"slw-{service.id}-{volume}"
    if component is not None:
        return f"slw-{service.name}-{component}"
    return f"slw-{service.id}"


class JobCancelled(Exception):
    """The job's ``cancel`` event was set: its service was deleted."""


class ContainersGone(RuntimeError):
    """Containers the job started vanished: most often a delete of the service is under
    way (it removes them from the engine before it removes the service's row)."""


class ContainersKilled(ContainersGone):
    """A container the job started was killed (exit 137 or 143): a delete under way stops
    them before it removes them, so the job gives the delete its grace before calling
    this the reason (an out-of-memory kill still ends the job with the exit report)."""


KILLED_EXIT_CODES = (137, 143)  # 128 + SIGKILL, 128 + SIGTERM


MAX_ATTEMPTS = 3  # claims of one job; the third interrupted run is its last
DELETE_GRACE_SECONDS = 3.0  # how long a job whose containers vanished waits for the row to go


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


def _own_builds_only(plan, service_id: str) -> None:
    """A compose may name the images built for its own service only (``image:
    localhost/slw-<another service>-...`` would run another tenant's build)."""
    own = built_image_prefix(service_id)
    for component in plan.components:
        image = component.image.lower()
        # a short name (no registry host) is looked up under localhost/ by Podman
        named = image if "/" in image.split(":", 1)[0] else "localhost/" + image
        if named.startswith(BUILT_IMAGES) and not named.startswith(own):
            raise RuntimeError(f"services.{component.name}.image: {component.image} was built for another "
                               "service; a service runs only images it built itself or pulls")


def _check(cancel) -> None:
    if cancel is not None and cancel.is_set():
        raise JobCancelled(DELETED)


def _step(uow, clock, job, step, progress, message, pct, cancel=None):
    _check(cancel)
    with uow:
        uow.deploy_jobs.set_step(job.id, step, clock.now())
        uow.commit()
    progress(job, step, message, pct)


def run_job(uow, clock, runtime, job, parse, *, base_domain: str | None = None, progress=lambda *a: None,
            wait_seconds: float = WAIT_SECONDS, methods: dict | None = None, workdir: str | None = None,
            cancel=None, settle_seconds: float = SETTLE_SECONDS):
    """Deploy (or redeploy) the job's service. Never raises: failures end the job and the
    service ``failed`` with the reason in the event timeline. With ``methods`` (deploy
    methods by name) and ``workdir`` (an empty directory for this job), the service's
    method first prepares its source (step ``source``: git and ai deploys clone and
    build), and the compose text and commit it answers are kept on the service.
    ``cancel`` (a ``threading.Event``, or None): once set, the job stops at the next step
    or poll (clones, builds and pulls are handed it), removes what it made and ends
    ``failed`` "service deleted". The final ``deploy.progress`` (``done``/``failed``) is
    announced with the job's last transaction, before the ``service.status`` it leads to."""
    with uow.reading():
        service = uow.services.get(job.service_id)
    if service is None:  # deleted meanwhile
        with uow:
            uow.deploy_jobs.finish(job.id, "failed", DELETED, clock.now())
            uow.commit()
        return
    note, stale = "", ()
    try:
        method = (methods or {}).get(service.deploy_method)
        if method is not None and workdir is not None:
            _step(uow, clock, job, "source", progress, "preparing the source", 2, cancel)
            prepared = method.prepare(service, runtime, workdir, lambda message: progress(job, "source", message, 8),
                                      cancel=cancel)
            _check(cancel)
            if prepared is not None:
                note, stale = prepared.note, tuple(prepared.stale_images or ())
                service = replace(service, compose=prepared.compose, commit=prepared.commit or service.commit)
                with uow:
                    current = uow.services.get(service.id, for_update=True)
                    if current is not None:
                        uow.services.update(replace(current, compose=service.compose, commit=service.commit))
                    uow.commit()
        _step(uow, clock, job, "plan", progress, "reading the compose definition", 5, cancel)
        plan = parse(service.compose, service.variables or {})
        _own_builds_only(plan, service.id)
        _step(uow, clock, job, "images", progress, "checking images", 15, cancel)
        for image in sorted({c.image for c in plan.components}):
            kept = _image(runtime, image, refresh=job.kind == "redeploy", cancel=cancel)
            _check(cancel)
            if kept:
                progress(job, "images", kept, 20)
        # a resumed or repeated job starts from a clean slate of containers; volumes stay.
        # The route goes first: the host ports those containers held are given up.
        with uow:
            uow.routes.delete_for(service.id)
            uow.commit()
        for state in runtime.containers(service.id):
            runtime.remove_container(state.id)
        _step(uow, clock, job, "network", progress, "creating the network", 30, cancel)
        labels = {SERVICE_LABEL: service.id}
        network = resource_names(service)
        runtime.create_network(network, labels)
        _step(uow, clock, job, "volumes", progress, "creating volumes", 40, cancel)
        for volume in plan.volumes:
            runtime.create_volume(resource_names(service, volume=volume), labels)
        for i, component in enumerate(plan.components):
            _step(uow, clock, job, "containers", progress, f"starting {component.name}",
                  45 + int(35 * i / max(1, len(plan.components))), cancel)
            runtime.run(ContainerSpec(
                name=resource_names(service, component=component.name), image=component.image,
                labels={**labels, COMPONENT_LABEL: component.name}, command=component.command,
                environment=component.environment, ports=component.ports,
                volumes=tuple((resource_names(service, volume=v), path) for v, path in component.volumes),
                network=network, aliases=(component.name,), healthcheck=component.healthcheck,
                cpus=component.cpus, memory_mb=component.memory_mb))
        _step(uow, clock, job, "wait", progress, "waiting for the containers", 85, cancel)
        states = _wait(runtime, service.id, len(plan.components), wait_seconds, cancel, settle_seconds)
        upstream = routes.upstream(plan, states)
        url = f"https://{routes.hostname(service.name, base_domain)}" if base_domain else upstream
        _check(cancel)
        now = clock.now()
        with uow:
            current = uow.services.get(service.id, for_update=True)
            if current is not None:
                routes.follow(uow, current, upstream, base_domain, now)  # the record the reverse proxy serves
                uow.services.update(replace(current, status="running", url=url, deployed_at=now, updated_at=now,
                                            health_status=_health(states), health_checked_at=now,
                                            health_failures=0))
                uow.emit(deploy_progress(job, "done", "running", 100, current.customer_id))
                uow.emit(service_status(current, "running"))
                record(uow, clock, service.id, job.kind, "success", f"{job.kind} succeeded" + (f": {url}" if url else "")
                       + (f" ({note})" if note else ""))
                uow.deploy_jobs.finish(job.id, "succeeded", None, now)
            uow.commit()
        if current is None:  # deleted while deploying: take away what this job made, then end it
            runtime.remove_service(service.id)  # first: a job that reads failed has left nothing behind
            with uow:
                uow.deploy_jobs.finish(job.id, "failed", f"{DELETED} during the deploy", clock.now())
                uow.commit()
            progress(job, "failed", f"{DELETED} during the deploy", 100)
            return
        for image in stale:  # what an earlier deploy built; its containers are gone now
            try:
                runtime.remove_image(image)
            except Exception:  # best effort: an image still in use stays
                pass
    except Exception as exc:  # the reason goes to the timeline, the job and the service
        fail_job(uow, clock, job, exc, note=note, progress=progress, runtime=runtime, cancel=cancel)


def fail_job(uow, clock, job, exc: Exception, *, note: str = "", progress=lambda *a: None, runtime=None,
             cancel=None) -> None:
    """End the job and its service ``failed``, the reason in the timeline (the final
    ``deploy.progress`` before the ``service.status``), and its route record gone (the
    containers that held its host port are not running). A service deleted meanwhile
    (or a set ``cancel``) loses what the job made in the engine (with ``runtime``); the
    job's error is then "service deleted"."""
    reason = str(exc)[-2000:] or type(exc).__name__
    if isinstance(exc, ContainersGone):
        _await_delete(uow, job.service_id, cancel)
    if cancel is not None and cancel.is_set():
        reason = DELETED
    now = clock.now()
    with uow:
        current = uow.services.get(job.service_id, for_update=True)
        if current is not None:
            uow.routes.delete_for(current.id)
            uow.services.update(replace(current, status="failed", updated_at=now, **NOT_CHECKED))
            uow.emit(deploy_progress(job, "failed", reason, 100, current.customer_id))
            uow.emit(service_status(current, "failed"))
            record(uow, clock, job.service_id, job.kind, "failed",
                   f"{job.kind} failed" + (f" ({note})" if note else "") + f": {reason}")
            uow.deploy_jobs.finish(job.id, "failed", reason, now)
        uow.commit()
    if current is None:  # whatever broke (a network removed under it, ...), the delete is why
        reason = DELETED
        if runtime is not None:  # first: a job that reads failed has left nothing behind
            try:
                runtime.remove_service(job.service_id)
            except Exception:  # noqa: BLE001 (the engine may be the reason the job failed)
                pass
        with uow:
            uow.deploy_jobs.finish(job.id, "failed", reason, clock.now())
            uow.commit()
        progress(job, "failed", reason, 100)  # no status follows: the service is gone


def _await_delete(uow, service_id: str, cancel) -> None:
    """A delete removes the containers first and the row a moment later: give it
    ``DELETE_GRACE_SECONDS`` so the job ends as the deleted service's."""
    deadline = time.monotonic() + DELETE_GRACE_SECONDS
    while time.monotonic() < deadline and not (cancel is not None and cancel.is_set()):
        with uow.reading():
            if uow.services.get(service_id) is None:
                return
        time.sleep(POLL_SECONDS)


def _image(runtime, image: str, *, refresh: bool, cancel=None) -> str | None:
    """Make sure the engine has ``image``: pull it when missing, and on a redeploy pull it
    again so a moved tag brings the latest image. ``localhost/`` images are the engine's
    own (local builds) and are never pulled. A redeploy whose pull fails while a copy is
    at hand goes on with that copy; the message saying so is returned."""
    present = runtime.has_image(image)
    if present and (not refresh or image.startswith("localhost/")):
        return None
    try:
        runtime.pull_image(image, cancel=cancel)
    except Exception as exc:
        if not present or (cancel is not None and cancel.is_set()):
            raise
        return f"could not pull {image} ({str(exc)[:200]}); deploying the copy the engine has"
    return None


def _wait(runtime, service_id: str, expected: int, seconds: float, cancel=None,
          settle_seconds: float = 0.0):
    """Poll until every one of the ``expected`` containers runs and is healthy (or has no
    healthcheck), then keep polling for ``settle_seconds``: they must all still run at
    its end. A container that stopped fails the wait with its exit code and last lines.
    Right after a start a container that is about to exit still shows running, so
    without the settle window such a deploy would be called a success."""
    deadline = time.monotonic() + seconds
    settled_at = None  # when every container was first seen running and healthy
    while True:
        _check(cancel)
        states = runtime.containers(service_id)
        if len(states) < expected:  # all were started before the wait: someone removed them
            raise ContainersGone(f"{expected - len(states)} of the service's containers were removed during the "
                                 "deploy (the service was deleted, or they were removed in the engine)")
        stopped = [s for s in states if not s.running]
        if stopped:
            killed = getattr(stopped[0], "exit_code", None) in KILLED_EXIT_CODES
            raise (ContainersKilled if killed else RuntimeError)(exit_report(runtime, stopped[0]))
        if all(s.health in (None, "healthy") for s in states):
            now = time.monotonic()
            settled_at = settled_at if settled_at is not None else now
            if now - settled_at >= settle_seconds:
                return states
        elif time.monotonic() > deadline:  # an early failing healthcheck may still pass: wait it out
            sick = [s.name for s in states if s.health != "healthy" and s.health is not None]
            raise RuntimeError(f"containers not running and healthy after {seconds:g} s"
                               + (f" (healthcheck failing: {', '.join(sick)})" if sick else ""))
        else:
            settled_at = None
        time.sleep(POLL_SECONDS)


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


def _health(states) -> str:
    if not states or any(not s.running or s.health == "unhealthy" for s in states):
        return "unhealthy"
    if any(s.health == "starting" for s in states):
        return "starting"
    return "healthy"


def check_health(uow, clock, runtime) -> int:
    """Look at every running service's containers; record changes in the timeline. A
    service whose container stopped (or whose containers are gone) on two checks in a
    row becomes ``failed``: event ``health`` ``failed`` with the exit code and last
    lines, ``service.status`` announced, its route record removed (the host port is
    free). Two sightings, because a stop or restart in progress stops containers a
    moment before it writes the new status."""
    with uow.reading():
        running = uow.services.with_status("running")
    changed = 0
    for service in running:
        report = None
        try:
            states = runtime.containers(service.id)
            status = _health(states)
            stopped = [s for s in states if not s.running]
            if stopped:
                report = exit_report(runtime, stopped[0])
            elif not states:
                report = "containers missing from the engine: redeploy the service"
        except Exception:  # an unreachable engine is not a verdict on the service
            status = "unknown"
        now = clock.now()
        with uow:
            current = uow.services.get(service.id, for_update=True)
            if current is None or current.status != "running":
                continue
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
