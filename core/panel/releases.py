"""Releases and the deploy history of a service: what each successful deploy, redeploy or
rollback ran (its images, compose and variables), the deploy jobs (list, cancel), and
rollback to an earlier release.

A release's images are kept under tags of the service's own
(``localhost/slw-keep-<service id>:<number>-<component>``, ``core.panel.containers.keep_tag``),
so redeploys, the removal of stale git builds and image prunes do not drop them; the
newest ``KEEP`` releases keep theirs (older tags are removed, the rows stay: rolling back
to one is then 409 "images gone")."""
from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime

from core.errors import Conflict, NotFound
from core.panel.containers import COMPONENT_LABEL, JOB_LABEL, NotInEngine, keep_tag
from core.panel.events import service_status
from core.panel.services import NOT_CHECKED, caller_name, new_id, record, visible  # noqa: F401 (caller_name: part of releases)

KEEP = 20  # releases whose images are kept
CANCELLED = "cancelled"
FINISHED = ("succeeded", "failed", "cancelled")


@dataclass(frozen=True)
class Release:
    id: str
    service_id: str
    number: int
    deploy_job_id: str
    images: tuple  # ({"component", "image", "image_id"}, ...)
    compose: str
    variables: dict
    commit: str | None
    created_at: datetime
    created_by: str = "system"
    #: the names of its secret variables (``core.panel.secrets``): stored encrypted, shown masked
    secrets: tuple = ()
    #: the branch its deploy's clone checked out (git and ai; a rollback: its target's);
    #: a service without ``git_branch`` tracks it for pushes (``core.panel.pushes``)
    branch: str | None = None


def new_release(uow, clock, service, job, images, branch: str | None = None) -> Release:
    """In the caller's (success) transaction: the service's next release. The commit and
    branch deployed are kept for a service with a source of its own (``Service.source``:
    git and ai), none for the others."""
    number = uow.releases.last_number(service.id) + 1
    release = Release(id=new_id("rel"), service_id=service.id, number=number, deploy_job_id=job.id,
                      images=tuple(images), compose=service.compose, variables=dict(service.variables or {}),
                      commit=service.commit if service.source else None,
                      created_at=clock.now(), created_by=job.created_by, secrets=tuple(service.secrets),
                      branch=branch if service.source else None)
    uow.releases.add(release)
    return release


def keep_images(uow, runtime, release: Release) -> list[str]:
    """Tag the release's images under the service's keep tags, then remove the keep tags
    of the releases that fell out of the newest ``KEEP`` (a window of a few, best
    effort). Returns the tags removed. Engine calls; no transaction open.

    It runs after its job's success, so the service may have been deleted meanwhile (the
    delete removed the keep tags it found): the tags just made then go again, never left
    behind by a service that no longer exists."""
    made = []
    for image in release.images:
        source = image.get("image_id") or image["image"]
        tag = keep_tag(release.service_id, release.number, image["component"])
        try:
            runtime.tag_image(source, tag)
            made.append(tag)
        except Exception:  # noqa: BLE001 (the release stands; its rollback will say the images are gone)
            pass
    with uow.reading():
        gone = uow.services.get(release.service_id) is None
        older = [] if gone else [r for r in uow.releases.for_service(release.service_id)
                                 if release.number - KEEP - 5 < r.number <= release.number - KEEP]
    if gone:
        for tag in made:
            try:
                runtime.remove_image(tag)
            except Exception:  # noqa: BLE001 (best effort, as the delete's own)
                pass
        return made
    removed = []
    for old in older:
        for image in old.images:
            tag = keep_tag(old.service_id, old.number, image["component"])
            try:
                runtime.remove_image(tag)
                removed.append(tag)
            except Exception:  # noqa: BLE001 (still in use, or gone)
                pass
    return removed


def images_present(runtime, release: Release) -> bool:
    """Whether the engine still holds every image of ``release`` under its keep tag."""
    for image in release.images:
        if runtime.image_id(keep_tag(release.service_id, release.number, image["component"])) is None:
            return False
    return True


# --- reading ---------------------------------------------------------------------------


def list_releases(uow, principal, service_id: str, *, page: int, per_page: int):
    with uow:
        visible(principal, uow.services.get(service_id), service_id)
        return uow.releases.page(service_id, page=page, per_page=per_page)


def get_release(uow, principal, service_id: str, release_id: str) -> Release:
    with uow:
        visible(principal, uow.services.get(service_id), service_id)
        release = uow.releases.get(release_id)
    if release is None or release.service_id != service_id:
        raise NotFound(f"release {release_id} not found")
    return release


def list_jobs(uow, principal, service_id: str, *, page: int, per_page: int):
    with uow:
        visible(principal, uow.services.get(service_id), service_id)
        return uow.deploy_jobs.page(service_id, page=page, per_page=per_page)


def get_job(uow, principal, service_id: str, job_id: str):
    with uow:
        visible(principal, uow.services.get(service_id), service_id)
        job = uow.deploy_jobs.get(job_id)
    if job is None or job.service_id != service_id:
        raise NotFound(f"deploy job {job_id} not found")
    return job


def log_origins(uow, service_id: str, states) -> dict:
    """Where each container's log lines come from: container id -> ``{component, release}``,
    ``release`` the number of the release its deploy job recorded, or None while that job
    has recorded none (the new containers of a deploy in progress). Labels tell the
    component and the job (``slipway.component``, ``slipway.job``); one read maps jobs to
    releases."""
    with uow.reading():
        numbers = {r.deploy_job_id: r.number for r in uow.releases.for_service(service_id)}
    return {s.id: {"component": s.labels.get(COMPONENT_LABEL) or "", "release": numbers.get(s.labels.get(JOB_LABEL))}
            for s in states}


def service_logs(runtime, states, origins: dict, tail: int, since=None) -> list:
    """The service's last ``tail`` log lines, oldest first, each as ``(line, origin)``. A
    container listed in ``states`` that is gone when its lines are read (the old set of a
    deploy that retires it just then, a replica the engine replaced) has none to give:
    it is skipped, not an error of the whole read."""
    lines: list = []
    for state in states:
        try:
            read = runtime.logs(state.id, tail=tail, since=since)
        except NotInEngine:
            continue
        lines.extend((line, origins[state.id]) for line in read)
    lines.sort(key=lambda pair: pair[0].timestamp)
    return lines[-tail:] if tail else []


# --- rollback ---------------------------------------------------------------------------


def rollback_target(uow, service, release_id: str | None) -> Release:
    """The release a rollback runs: ``release_id`` (404 when not this service's), or the
    newest one before the running one (409 when there is none)."""
    if release_id is not None:
        release = uow.releases.get(release_id)
        if release is None or release.service_id != service.id:
            raise NotFound(f"release {release_id} not found")
        return release
    releases = uow.releases.for_service(service.id)
    running = service.release if service.release is not None else (releases[0].number + 1 if releases else 0)
    earlier = [r for r in releases if r.number < running]
    if not earlier:
        raise Conflict("the service has no earlier release to roll back to")
    return earlier[0]


def rollback(uow, clock, runtime, principal, service_id: str, release_id: str | None, redeploy, quota=None):
    """Queue a rollback job to ``release_id`` (default: the release before the running
    one): 409 when there is none, or when its images are gone; the checks of a redeploy
    otherwise (``redeploy`` is ``core.panel.services.redeploy``). Returns (service, job,
    release)."""
    principal.require("services:deploy")
    with uow.reading():
        service = visible(principal, uow.services.get(service_id), service_id)
        target = rollback_target(uow, service, release_id)
    if not images_present(runtime, target):
        raise Conflict(f"the images of release {target.number} are gone; it cannot be rolled back to")
    kwargs = {} if quota is None else {"quota": quota}
    service, job = redeploy(uow, clock, principal, service_id, kind="rollback", release=target, **kwargs)
    return service, job, target


# --- cancel -----------------------------------------------------------------------------


def cancel_job(uow, clock, runtime, principal, service_id: str, job_id: str):
    """Cancel a deploy job: a queued one ends ``cancelled`` at once (the service goes back
    to what its containers say: running, stopped, or failed without any); a running one
    gets a cancel request its worker acts on within seconds. 409 once it has finished."""
    principal.require("services:deploy")
    job = get_job(uow, principal, service_id, job_id)
    if job.state in FINISHED:
        raise Conflict(f"the deploy job has finished ({job.state})")
    states = runtime.containers(service_id) if job.state == "queued" else []
    status = "running" if any(s.running for s in states) else ("stopped" if states else "failed")
    now = clock.now()
    with uow:
        if job.state == "queued" and uow.deploy_jobs.cancel_queued(job.id, now):
            current = uow.services.get(service_id, for_update=True)
            if current is not None and current.status == "deploying":
                changed = replace(current, status=status, updated_at=now,
                                  **({} if status == "running" else NOT_CHECKED))
                uow.services.update(changed)
                uow.emit(service_status(changed))
            record(uow, clock, service_id, job.kind, "failed", f"{job.kind} job {job.id} {CANCELLED}")
        else:
            # the service row first: the job's success transaction locks it too, so a cancel
            # either lands before the switch (the job then ends cancelled) or sees it finished
            uow.services.get(service_id, for_update=True)
            if not uow.deploy_jobs.request_cancel(job.id, now):
                raise Conflict("the deploy job has finished")
        uow.commit()
    with uow.reading():
        return uow.deploy_jobs.get(job.id)
