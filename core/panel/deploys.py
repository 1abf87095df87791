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

import threading
import time
from dataclasses import replace

from core.panel import routes, leases
from core.panel import containerfiles
from core.panel.containerfiles import engine_local, image_refusal
from core.panel.containers import COMPONENT_LABEL, JOB_LABEL, SERVICE_LABEL, ContainerSpec, keep_tag
from core.panel.customers import DEFAULT_QUOTA, Footprint, Quota, reserve
from core.panel.events import deploy_progress, service_status
from core.panel.releases import keep_images, new_release
from core.panel.services import NOT_CHECKED, record

WAIT_SECONDS = 90
SETTLE_SECONDS = 3.0
POLL_SECONDS = 0.3
DELETED = "service deleted"
STEPS = ("source", "plan", "images", "network", "volumes", "containers", "wait", "done")


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
DRAIN_SECONDS = 2.0
STOP_TIMEOUT = 10  # seconds an old container gets to stop gracefully after the switch


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
    localhost/slw-<another service>-...`` would run another tenant's build), and no image
    id (:func:`core.panel.containerfiles.image_refusal`, the rule of every image a build
    reads too)."""
    for component in plan.components:
        reason = image_refusal(component.image, service_id)
        if reason:
            raise RuntimeError(f"services.{component.name}.image: {reason}")


def registries_refusal(plan, *, resolve=None) -> str | None:
    """Why an image of ``plan`` may not be used (its registry host is, or resolves to, an
    address that is not public), naming the service, or None. The hosts are looked up at
    once, within one deadline (:func:`core.panel.containerfiles.registries_refusal`); a
    host that does not resolve is judged again, strictly, when its image is pulled
    (:func:`_image`)."""
    return containerfiles.registries_refusal(
        [(f"services.{component.name}.image", component.image) for component in plan.components],
        strict=False, resolve=resolve)


def _check(cancel) -> None:
    reason = cancel_reason(cancel)
    if reason is not None:
        raise JobCancelled(reason)


def _requested(cancel):
    """``cancel`` set as "cancelled" (a new event when the job ran without one, or when a
    cancel was asked for in the database that its worker has not seen yet)."""
    if cancel is not None and cancel.is_set():
        return cancel
    event = threading.Event()
    event.reason = CANCELLED
    event.set()
    return event


def _keep_source(uow, quota: Quota, service, parse) -> None:
    """Keep the compose and commit a source step answered on the service, with what its
    plan counts against the customer's limits (the counting of a create,
    :meth:`Quota.footprint`; it replaces what the service counted so far). Past a limit:
    ``Conflict`` naming it and nothing is written. One transaction under the customer's
    row lock, the order create and redeploy take, so two jobs of one customer cannot
    both pass. An unreadable compose is kept as it is, counts unchanged: the plan step
    fails on it next."""
    try:
        footprint = quota.footprint(parse(service.compose, service.variables or {}).components)
    except Exception:  # noqa: BLE001 (the plan step reads it again and says why)
        footprint = None
    with uow:
        customer = uow.panel_customers.get(service.customer_id, for_update=True) if footprint is not None else None
        current = uow.services.get(service.id, for_update=True)
        if current is None:  # deleted meanwhile: the job finds out below
            return
        counts = {}
        if customer is not None:
            reserve(uow, quota, customer, footprint, new_service=False,
                    replacing=Footprint(current.memory_mb, current.millicpus, current.containers))
            counts = {"memory_mb": footprint.memory_mb, "millicpus": footprint.millicpus,
                      "containers": footprint.containers}
        uow.services.update(replace(current, compose=service.compose, commit=service.commit, **counts))
        uow.commit()


def _step(uow, clock, job, step, progress, message, pct, cancel=None):
    _check(cancel)
    with uow:
        uow.deploy_jobs.set_step(job.id, step, clock.now())
        uow.commit()
    progress(job, step, message, pct)


def run_job(uow, clock, runtime, job, parse, *, base_domain: str | None = None, progress=lambda *a: None,
            wait_seconds: float = WAIT_SECONDS, methods: dict | None = None, workdir: str | None = None,
            cancel=None, settle_seconds: float = SETTLE_SECONDS, routes_changed=lambda: None,
            drain_seconds: float = DRAIN_SECONDS, registry_allow_private: bool = False,
            quota: Quota = DEFAULT_QUOTA):
    """Deploy, redeploy or roll back the job's service. Never raises: failures end the job
    (and a first deploy's service ``failed``) with the reason in the event timeline.

    With ``methods`` (deploy methods by name) and ``workdir`` (an empty directory for this
    job), the service's method first prepares its source (step ``source``: git and ai
    deploys clone and build), and the compose text and commit it answers are kept on the
    service. A rollback (``job.kind`` "rollback") prepares nothing and pulls nothing: it
    runs its target release's kept images, compose and variables.

    Customer limits (``quota``, the operator's defaults): the compose a source step
    answers is counted and checked before anything of it runs (:func:`_keep_source`); a
    plan past a limit fails the job naming it (``limits.containers``, ...), like the 409
    of a create.

    Health gate: a redeploy or rollback of a service whose containers run starts the new
    set beside them (names and a network of the job's own, label ``slipway.job``); only
    once all of the new set run and are healthy (``wait_seconds``, then
    ``settle_seconds``) does one transaction switch the route record, the status and the
    release; ``routes_changed()`` then returns once the reverse proxy serves the switch,
    ``drain_seconds`` later the old set is stopped and removed. A failing new set is
    removed and the old one keeps serving (status ``running`` again). A component with a
    fixed host port cannot run twice: such a service is stopped, then started (no gate).

    ``cancel`` (a ``threading.Event``, with ``reason`` "cancelled" or none for a deleted
    service): once set, the job stops at the next step or poll, removes what it made and
    ends (``cancelled``, or ``failed`` "service deleted"). The final ``deploy.progress``
    (``done``/``failed``) is announced with the job's last transaction, before the
    ``service.status`` it leads to.

    Images: a service uses only images it may (:func:`_own_builds_only`); an image whose
    registry host is not public is never pulled (the job fails naming it) unless
    ``registry_allow_private`` (``SLIPWAY_REGISTRY_ALLOW_PRIVATE``)."""
    with uow.reading():
        service = uow.services.get(job.service_id)
        target = uow.releases.get(job.target_release_id) if job.target_release_id else None
    if service is None:  # deleted meanwhile
        with uow:
            uow.deploy_jobs.finish(job.id, "failed", DELETED, clock.now())
            uow.commit()
        return
    note, stale = "", ()
    try:  # a redeploy or rollback of a running service is gated: its old set keeps serving until the switch
        gated = job.kind in ("redeploy", "rollback") and any(
            s.running and s.labels.get(JOB_LABEL) != job.id for s in runtime.containers(service.id))
    except Exception:  # noqa: BLE001 (an engine that does not answer: the job finds out below)
        gated = False
    try:
        if job.kind == "rollback" and (target is None or target.service_id != service.id):
            raise RuntimeError("the release to roll back to is gone")
        method = (methods or {}).get(service.deploy_method)
        if target is None and method is not None and workdir is not None:
            _step(uow, clock, job, "source", progress, "preparing the source", 2, cancel)
            prepared = method.prepare(service, runtime, workdir, lambda message: progress(job, "source", message, 8),
                                      cancel=cancel)
            _check(cancel)
            if prepared is not None:
                note, stale = prepared.note, tuple(prepared.stale_images or ())
                service = replace(service, compose=prepared.compose, commit=prepared.commit or service.commit)
                _keep_source(uow, quota, service, parse)
        _step(uow, clock, job, "plan", progress, "reading the compose definition", 5, cancel)
        if target is not None:
            service = replace(service, compose=target.compose, variables=dict(target.variables or {}),
                              commit=target.commit if target.commit is not None else service.commit)
        plan = parse(service.compose, service.variables or {})
        _own_builds_only(plan, service.id)
        _step(uow, clock, job, "images", progress, "checking images", 15, cancel)
        refused = None if target is not None or registry_allow_private else registries_refusal(plan)
        if refused:  # checked at create and PATCH too; a name may resolve elsewhere now
            raise RuntimeError(refused)
        if target is not None:
            plan, images = _kept_images(runtime, plan, target)
        else:
            for image in sorted({c.image for c in plan.components}):
                kept = _image(runtime, image, refresh=job.kind == "redeploy", cancel=cancel,
                              strict=not registry_allow_private)
                _check(cancel)
                if kept:
                    progress(job, "images", kept, 20)
            images = None
        # a resumed or repeated job starts from a clean slate of its own containers
        for state in runtime.containers(service.id):
            if state.labels.get(JOB_LABEL) == job.id:
                runtime.remove_container(state.id)
        serving, removed = runtime.containers(service.id), []
        gated = gated and any(s.running for s in serving) and not _fixed_ports(plan)
        if not gated:  # nothing serves (or a fixed host port): today's way, old set first; volumes stay.
            # The route goes first: the host ports those containers held are given up.
            with uow:
                uow.routes.delete_for(service.id)
                uow.commit()
            for state in serving:
                runtime.remove_container(state.id)
            removed, serving = serving, []
        _step(uow, clock, job, "network", progress, "creating the network", 30, cancel)
        labels = {SERVICE_LABEL: service.id}
        network = resource_names(service, job=job)
        runtime.create_network(network, {**labels, JOB_LABEL: job.id})
        _step(uow, clock, job, "volumes", progress, "creating volumes", 40, cancel)
        for volume in plan.volumes:
            runtime.create_volume(resource_names(service, volume=volume), labels)
        for i, component in enumerate(plan.components):
            _step(uow, clock, job, "containers", progress, f"starting {component.name}",
                  45 + int(35 * i / max(1, len(plan.components))), cancel)
            runtime.run(ContainerSpec(
                name=resource_names(service, component=component.name, job=job), image=component.image,
                labels={**labels, COMPONENT_LABEL: component.name, JOB_LABEL: job.id}, command=component.command,
                environment=component.environment, ports=component.ports,
                volumes=tuple((resource_names(service, volume=v), path) for v, path in component.volumes),
                network=network, aliases=(component.name,), healthcheck=component.healthcheck,
                cpus=component.cpus, memory_mb=component.memory_mb))
        _step(uow, clock, job, "wait", progress, "waiting for the containers", 85, cancel)
        states = _wait(runtime, service.id, len(plan.components), wait_seconds, cancel, settle_seconds,
                       job_id=job.id)
        upstream = routes.upstream(plan, states)
        url = f"https://{routes.hostname(service.name, base_domain)}" if base_domain else upstream
        if images is None:
            images = [{"component": c.name, "image": c.image, "image_id": runtime.image_id(c.image)}
                      for c in plan.components]
        _check(cancel)
        now = clock.now()
        release = None
        with uow:
            current = uow.services.get(service.id, for_update=True)
            if current is not None and uow.deploy_jobs.cancels_requested([job.id]):
                cancel = _requested(cancel)  # asked for since the worker's last poll: no switch
                _check(cancel)
            if current is not None:
                if target is not None:  # the rollback's compose and variables are the service's again
                    current = replace(current, compose=target.compose, variables=dict(target.variables or {}),
                                      commit=service.commit)
                release = new_release(uow, clock, current, job, images)
                routes.follow(uow, current, upstream, base_domain, now)  # the record the reverse proxy serves
                uow.services.update(replace(current, status="running", url=url, deployed_at=now, updated_at=now,
                                            health_status=_health(states), health_checked_at=now,
                                            health_failures=0, release=release.number))
                uow.emit(deploy_progress(job, "done", "running", 100, current.customer_id))
                uow.emit(service_status(current, "running"))
                record(uow, clock, service.id, job.kind, "success",
                       f"{job.kind} succeeded (release {release.number})" + (f": {url}" if url else "")
                       + (f" ({note})" if note else ""))
                uow.deploy_jobs.finish(job.id, "succeeded", None, now, release_id=release.id)
            uow.commit()
        if current is None:  # deleted while deploying: take away what this job made, then end it
            runtime.remove_service(service.id)  # first: a job that reads failed has left nothing behind
            with uow:
                uow.deploy_jobs.finish(job.id, "failed", f"{DELETED} during the deploy", clock.now())
                uow.commit()
            progress(job, "failed", f"{DELETED} during the deploy", 100)
            return
    except Exception as exc:  # the reason goes to the timeline, the job and the service
        if gated and cancel_reason(cancel) != DELETED and not isinstance(exc, ContainersGone):
            fail_gated(uow, clock, runtime, job, exc, progress=progress, cancel=cancel)
        else:
            fail_job(uow, clock, job, exc, note=note, progress=progress, runtime=runtime, cancel=cancel)
        return
    _after_switch(uow, runtime, service.id, release, serving if gated else None, removed, stale, routes_changed,
                  drain_seconds)


def _after_switch(uow, runtime, service_id, release, old, removed, stale, routes_changed, drain_seconds) -> None:
    """What follows a success, outside the job's verdict (it has succeeded): retire the
    old set of a gated job (``old``), drop the networks of the sets removed, keep the
    release's images, remove stale builds. Best effort: an engine error here leaves
    leftovers (the next deploy or the delete removes them), never a failed job."""
    steps = [(lambda: _retire(runtime, service_id, old, routes_changed, drain_seconds)) if old is not None
             else (lambda: _drop_networks(runtime, service_id, removed)),
             lambda: keep_images(uow, runtime, release)]
    steps += [(lambda image=image: runtime.remove_image(image)) for image in stale]  # an earlier deploy's builds
    for step in steps:
        try:
            step()
        except Exception:  # noqa: BLE001 (an image still in use stays, ...)
            pass


def _fixed_ports(plan) -> bool:
    return any(p.host_port is not None for c in plan.components for p in c.ports)


def _kept_images(runtime, plan, target):
    """The plan with each component's image replaced by the rollback target's keep tag,
    and the release's image records; a RuntimeError when one is gone."""
    by_component = {i["component"]: i for i in target.images}
    components = []
    for component in plan.components:
        tag = keep_tag(target.service_id, target.number, component.name)
        if component.name not in by_component or runtime.image_id(tag) is None:
            raise RuntimeError(f"the image of {component.name} in release {target.number} is gone")
        components.append(replace(component, image=tag))
    return replace(plan, components=tuple(components)), [dict(i) for i in target.images]


def _retire(runtime, service_id: str, old, routes_changed, drain_seconds: float) -> None:
    """After the switch: wait for the proxy (``routes_changed``) and the drain, then stop
    the ``old`` containers (the set that served when the job began: never one a job
    queued after this one's success started) gracefully, remove them and their networks."""
    try:
        routes_changed()
    except Exception:  # noqa: BLE001 (the proxy catches up on its own loop; the drain still holds)
        pass
    time.sleep(max(0.0, drain_seconds))
    for state in old:
        try:
            runtime.stop(state.id, timeout=STOP_TIMEOUT)
        except Exception:  # noqa: BLE001 (removed below either way)
            pass
    for state in old:
        runtime.remove_container(state.id)
    _drop_networks(runtime, service_id, old)


def _drop_networks(runtime, service_id: str, old) -> None:
    """Remove the networks of the containers ``old`` (removed now): ``slw-<service
    id>-<suffix of their job>``, or ``slw-<service id>`` for those made before jobs had
    networks of their own. Best effort: one still in use stays until the service goes."""
    names = set()
    for state in old:
        job_id = state.labels.get(JOB_LABEL)
        names.add(f"slw-{service_id}-{job_id.rpartition('_')[2][:8]}" if job_id else f"slw-{service_id}")
    for name in sorted(names):
        try:
            runtime.remove_network(name)
        except Exception:  # noqa: BLE001
            pass


def _remove_job_set(runtime, service_id: str, job) -> None:
    """Remove the containers and the network a job made (best effort)."""
    try:
        for state in runtime.containers(service_id):
            if state.labels.get(JOB_LABEL) == job.id:
                runtime.remove_container(state.id)
        runtime.remove_network(f"slw-{service_id}-{job_suffix(job)}")
    except Exception:  # noqa: BLE001 (the engine may be why the job failed)
        pass


def fail_gated(uow, clock, runtime, job, exc: Exception, *, progress=lambda *a: None, cancel=None) -> None:
    """A health-gated redeploy or rollback that failed (or was cancelled): its new set is
    removed, the old release keeps serving with its route record untouched, the service
    is ``running`` again, the timeline has ``<kind>`` ``failed`` with the health output,
    and the job ends ``failed`` (``cancelled`` when cancelled)."""
    reason = cancel_reason(cancel) or (str(exc)[-2000:] or type(exc).__name__)
    state = "cancelled" if reason == CANCELLED else "failed"
    _remove_job_set(runtime, job.service_id, job)
    now = clock.now()
    with uow:
        current = uow.services.get(job.service_id, for_update=True)
        if current is not None:
            if current.status == "deploying":
                current = replace(current, status="running", updated_at=now)
                uow.services.update(current)
            uow.emit(deploy_progress(job, "failed", reason, 100, current.customer_id))
            uow.emit(service_status(current, current.status))
            record(uow, clock, job.service_id, job.kind, "failed",
                   f"{job.kind} {state}: {reason}; the previous release keeps running")
        uow.deploy_jobs.finish(job.id, state, reason if current is not None else DELETED, now)
        uow.commit()
    if current is None:
        progress(job, "failed", DELETED, 100)


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
    reason = cancel_reason(cancel) or reason
    state = "cancelled" if reason == CANCELLED else "failed"
    if state == "cancelled" and runtime is not None:  # what it made goes
        _remove_job_set(runtime, job.service_id, job)
    now = clock.now()
    with uow:
        current = uow.services.get(job.service_id, for_update=True)
        if current is not None:
            uow.routes.delete_for(current.id)
            uow.services.update(replace(current, status="failed", updated_at=now, **NOT_CHECKED))
            uow.emit(deploy_progress(job, "failed", reason, 100, current.customer_id))
            uow.emit(service_status(current, "failed"))
            record(uow, clock, job.service_id, job.kind, "failed",
                   f"{job.kind} {state}" + (f" ({note})" if note else "") + f": {reason}")
            uow.deploy_jobs.finish(job.id, state, reason, now)
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


def _image(runtime, image: str, *, refresh: bool, cancel=None, strict: bool = False) -> str | None:
    """Make sure the engine has ``image``: pull it when missing, and on a redeploy pull it
    again so a moved tag brings the latest image. ``localhost/`` images (without a port)
    are the engine's own (local builds) and are never pulled: one that is absent fails
    "image not found". With ``strict`` (``SLIPWAY_REGISTRY_ALLOW_PRIVATE`` off), a pull
    waits on the registry host resolving now to public addresses only: a host that does
    not resolve (or is not public) is never contacted. A redeploy whose pull fails, or
    may not be made, while a copy is at hand goes on with that copy; the message saying
    so is returned."""
    present = runtime.has_image(image)
    if engine_local(image):
        if not present:
            raise RuntimeError(f"image not found: {image} (localhost/ names the engine's own images; "
                               "they are never pulled)")
        return None
    if present and not refresh:
        return None
    refused = containerfiles.registry_refusal(image, strict=True) if strict else None
    if refused:
        if not present:
            raise RuntimeError(refused)
        return f"not pulling {image} ({refused}); deploying the copy the engine has"
    try:
        runtime.pull_image(image, cancel=cancel)
    except Exception as exc:
        if not present or (cancel is not None and cancel.is_set()):
            raise
        return f"could not pull {image} ({str(exc)[:200]}); deploying the copy the engine has"
    return None


def _wait(runtime, service_id: str, expected: int, seconds: float, cancel=None,
          settle_seconds: float = 0.0, job_id: str | None = None):
    """Poll until every one of the ``expected`` containers runs and is healthy (or has no
    healthcheck), then keep polling for ``settle_seconds``: they must all still run at
    its end. A container that stopped fails the wait with its exit code and last lines.
    With ``job_id`` only that job's containers (label ``slipway.job``) are looked at.
    Right after a start a container that is about to exit still shows running, so
    without the settle window such a deploy would be called a success."""
    deadline = time.monotonic() + seconds
    settled_at = None  # when every container was first seen running and healthy
    while True:
        _check(cancel)
        states = runtime.containers(service_id)
        if job_id is not None:
            states = [s for s in states if s.labels.get(JOB_LABEL) == job_id]
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
            sick = [s for s in states if s.health != "healthy" and s.health is not None]
            raise RuntimeError(f"containers not running and healthy after {seconds:g} s"
                               + (f" (healthcheck failing: {', '.join(s.name for s in sick)})" if sick else "")
                               + "".join(_health_output(runtime, s) for s in sick[:3]))
        else:
            settled_at = None
        time.sleep(POLL_SECONDS)


def _health_output(runtime, state) -> str:
    """The last lines of a container whose healthcheck fails (its own output; the
    engine's healthcheck log when the runtime offers ``health_log``)."""
    lines = []
    try:
        lines = list(getattr(runtime, "health_log", lambda _id: [])(state.id))[-5:]
        lines += [line.message for line in runtime.logs(state.id, tail=5)]
    except Exception:  # noqa: BLE001 (the verdict stands without them)
        pass
    return f"\n{state.name} ({state.health}): " + "\n".join(lines) if lines else f"\n{state.name} ({state.health})"


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
    return own or [s for s in states if JOB_LABEL not in s.labels]


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
    leaves two sets: the containers of every job but the running release's go."""
    if service.release is None:
        return states
    with uow.reading():
        serving = next((r.deploy_job_id for r in uow.releases.for_service(service.id)
                        if r.number == service.release), None)
    if serving is None or not any(s.labels.get(JOB_LABEL) == serving for s in states):
        return states
    kept = []
    for state in states:
        if state.labels.get(JOB_LABEL) == serving:
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
