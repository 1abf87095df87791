"""Deploy jobs: carry a service's plan out through the runtime port, step by step, and
the periodic health check. Runs in worker threads; every step is persisted, so a job
interrupted by a restart is found and run again (idempotently) on start-up."""
from __future__ import annotations

import time
from dataclasses import replace

from core import routes, workers
from core.containers import COMPONENT_LABEL, SERVICE_LABEL, ContainerSpec
from core.events import service_status
from core.services import NOT_CHECKED, record

WAIT_SECONDS = 90
STEPS = ("source", "plan", "images", "network", "volumes", "containers", "wait", "done")


def resource_names(service, component: str | None = None, volume: str | None = None) -> str:
    if volume is not None:
        return f"slw-{service.id}-{volume}"
    if component is not None:
        return f"slw-{service.name}-{component}"
    return f"slw-{service.id}"


def claim_next(uow, clock, owner: str | None = None):
    """Take the oldest queued job for worker ``owner`` (SKIP LOCKED on PostgreSQL, so
    processes share the queue)."""
    with uow:
        job = uow.deploy_jobs.claim_queued(clock.now(), owner)
        uow.commit()
    return job


def recover_interrupted(uow, clock) -> list[str]:
    """Jobs left ``running`` by a stopped process (its worker lease is stale or gone,
    ``core.workers``) go back to the queue, to run again; live workers' jobs stay."""
    with uow:
        resumed = uow.deploy_jobs.requeue_orphaned(clock.now(), uow.leases.live(workers.stale_before(clock)))
        for job in resumed:
            record(uow, clock, job.service_id, job.kind, "started",
                   f"{job.kind} job {job.id} resumed after a restart")
        uow.commit()
    return [job.id for job in resumed]


def _step(uow, clock, job, step, progress, message, pct):
    with uow:
        uow.deploy_jobs.set_step(job.id, step, clock.now())
        uow.commit()
    progress(job, step, message, pct)


def run_job(uow, clock, runtime, job, parse, *, base_domain: str | None = None, progress=lambda *a: None,
            wait_seconds: float = WAIT_SECONDS, methods: dict | None = None, workdir: str | None = None):
    """Deploy (or redeploy) the job's service. Never raises: failures end the job and the
    service ``failed`` with the reason in the event timeline. With ``methods`` (deploy
    methods by name) and ``workdir`` (an empty directory for this job), the service's
    method first prepares its source (step ``source``: git and ai deploys clone and
    build), and the compose text and commit it answers are kept on the service."""
    with uow.reading():
        service = uow.services.get(job.service_id)
    if service is None:  # deleted meanwhile
        with uow:
            uow.deploy_jobs.finish(job.id, "failed", "service deleted", clock.now())
            uow.commit()
        return
    note, stale = "", ()
    try:
        method = (methods or {}).get(service.deploy_method)
        if method is not None and workdir is not None:
            _step(uow, clock, job, "source", progress, "preparing the source", 2)
            prepared = method.prepare(service, runtime, workdir, lambda message: progress(job, "source", message, 8))
            if prepared is not None:
                note, stale = prepared.note, tuple(prepared.stale_images or ())
                service = replace(service, compose=prepared.compose, commit=prepared.commit or service.commit)
                with uow:
                    current = uow.services.get(service.id, for_update=True)
                    if current is not None:
                        uow.services.update(replace(current, compose=service.compose, commit=service.commit))
                    uow.commit()
        _step(uow, clock, job, "plan", progress, "reading the compose definition", 5)
        plan = parse(service.compose, service.variables or {})
        _step(uow, clock, job, "images", progress, "checking images", 15)
        for image in sorted({c.image for c in plan.components}):
            kept = _image(runtime, image, refresh=job.kind == "redeploy")
            if kept:
                progress(job, "images", kept, 20)
        # a resumed or repeated job starts from a clean slate of containers; volumes stay
        for state in runtime.containers(service.id):
            runtime.remove_container(state.id)
        _step(uow, clock, job, "network", progress, "creating the network", 30)
        labels = {SERVICE_LABEL: service.id}
        network = resource_names(service)
        runtime.create_network(network, labels)
        _step(uow, clock, job, "volumes", progress, "creating volumes", 40)
        for volume in plan.volumes:
            runtime.create_volume(resource_names(service, volume=volume), labels)
        for i, component in enumerate(plan.components):
            _step(uow, clock, job, "containers", progress, f"starting {component.name}",
                  45 + int(35 * i / max(1, len(plan.components))))
            runtime.run(ContainerSpec(
                name=resource_names(service, component=component.name), image=component.image,
                labels={**labels, COMPONENT_LABEL: component.name}, command=component.command,
                environment=component.environment, ports=component.ports,
                volumes=tuple((resource_names(service, volume=v), path) for v, path in component.volumes),
                network=network, aliases=(component.name,), healthcheck=component.healthcheck,
                cpus=component.cpus, memory_mb=component.memory_mb))
        _step(uow, clock, job, "wait", progress, "waiting for the containers", 85)
        states = _wait(runtime, service.id, len(plan.components), wait_seconds)
        upstream = _published(plan, states)
        url = f"https://{routes.hostname(service.name, base_domain)}" if base_domain else upstream
        now = clock.now()
        with uow:
            current = uow.services.get(service.id, for_update=True)
            if current is not None:
                if base_domain and upstream:  # the route record the reverse proxy serves
                    uow.routes.put(routes.Route(routes.hostname(service.name, base_domain), service.id, upstream,
                                                now, now))
                else:
                    uow.routes.delete_for(service.id)
                uow.services.update(replace(current, status="running", url=url, deployed_at=now, updated_at=now,
                                            health_status=_health(states), health_checked_at=now,
                                            health_failures=0))
                uow.emit(service_status(current, "running"))
                record(uow, clock, service.id, job.kind, "success", f"{job.kind} succeeded" + (f": {url}" if url else "")
                       + (f" ({note})" if note else ""))
                uow.deploy_jobs.finish(job.id, "succeeded", None, now)
            else:
                uow.deploy_jobs.finish(job.id, "failed", "service deleted during the deploy", now)
            uow.commit()
        if current is None:  # deleted while deploying: take away what this job made
            runtime.remove_service(service.id)
            progress(job, "failed", "service deleted during the deploy", 100)
            return
        progress(job, "done", "running", 100)
        for image in stale:  # what an earlier deploy built; its containers are gone now
            try:
                runtime.remove_image(image)
            except Exception:  # best effort: an image still in use stays
                pass
    except Exception as exc:  # the reason goes to the timeline, the job and the service
        fail_job(uow, clock, job, exc, note=note, progress=progress, runtime=runtime)


def fail_job(uow, clock, job, exc: Exception, *, note: str = "", progress=lambda *a: None, runtime=None) -> None:
    """End the job and its service ``failed``, the reason in the timeline. A service
    deleted meanwhile loses what the job made in the engine (with ``runtime``)."""
    reason = str(exc)[-2000:] or type(exc).__name__
    now = clock.now()
    with uow:
        current = uow.services.get(job.service_id, for_update=True)
        if current is not None:
            uow.services.update(replace(current, status="failed", updated_at=now, **NOT_CHECKED))
            uow.emit(service_status(current, "failed"))
            record(uow, clock, job.service_id, job.kind, "failed",
                   f"{job.kind} failed" + (f" ({note})" if note else "") + f": {reason}")
        uow.deploy_jobs.finish(job.id, "failed", reason, now)
        uow.commit()
    if current is None and runtime is not None:
        try:
            runtime.remove_service(job.service_id)
        except Exception:  # noqa: BLE001 (the engine may be the reason the job failed)
            pass
    progress(job, "failed", reason, 100)


def _image(runtime, image: str, *, refresh: bool) -> str | None:
    """Make sure the engine has ``image``: pull it when missing, and on a redeploy pull it
    again so a moved tag brings the latest image. ``localhost/`` images are the engine's
    own (local builds) and are never pulled. A redeploy whose pull fails while a copy is
    at hand goes on with that copy; the message saying so is returned."""
    present = runtime.has_image(image)
    if present and (not refresh or image.startswith("localhost/")):
        return None
    try:
        runtime.pull_image(image)
    except Exception as exc:
        if not present:
            raise
        return f"could not pull {image} ({str(exc)[:200]}); deploying the copy the engine has"
    return None


def _wait(runtime, service_id: str, expected: int, seconds: float):
    deadline = time.monotonic() + seconds
    while True:
        states = runtime.containers(service_id)
        if len(states) < expected:  # all were started before the wait: someone removed them
            raise RuntimeError(f"{expected - len(states)} of the service's containers were removed during the "
                               "deploy (the service was deleted, or they were removed in the engine)")
        stopped = [s for s in states if not s.running]
        if stopped:
            last = runtime.logs(stopped[0].id, tail=10)
            tail = "\n".join(line.message for line in last)
            raise RuntimeError(f"container {stopped[0].name} exited ({stopped[0].status}); last output:\n{tail}")
        if len(states) >= expected and all(s.health in (None, "healthy") for s in states):
            return states
        if time.monotonic() > deadline:  # an early failing healthcheck may still pass: wait it out
            sick = [s.name for s in states if s.health != "healthy" and s.health is not None]
            raise RuntimeError(f"containers not running and healthy after {seconds:g} s"
                               + (f" (healthcheck failing: {', '.join(sick)})" if sick else ""))
        time.sleep(0.3)


def _published(plan, states) -> str:
    """``http://127.0.0.1:<host port>`` of the first published port, or ""."""
    by_component = {s.labels.get(COMPONENT_LABEL): s for s in states}
    for component in plan.components:
        state = by_component.get(component.name)
        for port in component.ports:
            host = state.ports.get(port.container_port) if state else None
            if host:
                return f"http://127.0.0.1:{host}"
    return ""


def _health(states) -> str:
    if not states or any(not s.running or s.health == "unhealthy" for s in states):
        return "unhealthy"
    if any(s.health == "starting" for s in states):
        return "starting"
    return "healthy"


def check_health(uow, clock, runtime) -> int:
    """Look at every running service's containers; record changes in the timeline."""
    with uow.reading():
        running = uow.services.with_status("running")
    changed = 0
    for service in running:
        try:
            status = _health(runtime.containers(service.id))
        except Exception:  # an unreachable engine is not a verdict on the service
            status = "unknown"
        now = clock.now()
        with uow:
            current = uow.services.get(service.id, for_update=True)
            if current is None or current.status != "running":
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
            uow.services.update(replace(current, status=new, updated_at=clock.now(), **NOT_CHECKED))
            uow.emit(service_status(current, new))
            record(uow, clock, service.id, "deploy" if new == "failed" else "stop",
                   "failed" if new == "failed" else "success", message)
            uow.commit()
        changed.append(service.id)
    return changed
