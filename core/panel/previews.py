"""Preview environments: a git service with ``previews`` on gets a service of its own for
each pull (merge) request against its tracked branch, deployed from the request's head.

A preview is an ordinary service of the parent's customer (``preview_of`` = the parent's
id, ``preview_number`` = the request's number), named ``<parent>-pr-<n>``: it is made
through the create path of every service (``core.panel.services.create_service``: the
name's rules, the customer's limits under its row lock, a queued deploy job), so it
has a host name of its own under the base domain and a route like any service. It
deploys the parent's repository (a fork's ``head_clone_url`` for a request from a fork,
when the parent allows forks) at the request's head branch, with the parent's variables
plus ``SLIPWAY_PREVIEW=1``. A request from the parent's own repository gets the
parent's secret variables too (kept encrypted as every service's), its deploy key, its
pinned ssh host key (``core.panel.host_keys``) and its ``customer_network``; a request
from a fork runs a stranger's code, so its preview gets none of the parent's secret
variables (only the others), no deploy key, and never joins the customer network (its
redeploys too); its clones pin the fork's host key of their own (learned anew when the
fork's repository URL changes).

Turning ``previews`` or ``previews_from_forks`` on, and minting the webhook secret of a
service that has previews, need ``services:create`` and ``services:delete`` besides
``services:deploy`` (``core.panel.services.require_preview_permissions``): a delivery
signed with that secret creates and deletes services, so it does no more than the key
that armed it could.

The webhook route (``POST /api/hooks/git/{id}``) calls :func:`on_pull_request` for each
verified pull-request delivery; it answers 202 with what this returns.

- ``opened`` / ``reopened`` / ``updated``: create the preview, or redeploy it (its head
  branch and repository as the request has them now). Past one of the customer's limits
  (or refused for another reason: a name taken, a fork's repository the git settings
  refuse) there is no preview and the parent's timeline gets a ``deploy`` ``failed``
  event saying why.
- ``closed`` (merged or not): the preview is deleted as any service is
  (``core.panel.services.delete_service``: its containers, volumes and route go).
- Deleting a parent deletes its previews (``delete_service``).

The deploy clones the head branch's newest commit; the request's head commit is named
in the deploy's timeline entry.
"""
from __future__ import annotations

import secrets as random
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from core.errors import Conflict, Invalid, NotFound
from core.panel import capabilities, services
from core.panel.customers import DEFAULT_QUOTA, Quota

PREVIEW_VARIABLE = "SLIPWAY_PREVIEW"
OPENED, REOPENED, UPDATED, CLOSED = "opened", "reopened", "updated", "closed"  # ports.git_providers


class _Provider:
    """Who asks when a git provider's delivery does: its signature was the
    authentication; it acts on the one service the webhook belongs to."""

    customer_id = None
    user = None
    key = None

    def require(self, permission: str) -> None:
        return None


PROVIDER = _Provider()


#: the source field of the branch a preview deploys (a pull request's head branch), and
#: that a parent tracks: a method with previews keeps it (``DeployMethod.source_fields``)
BRANCH = "git_branch"


def preview_name(parent_name: str, number: int) -> str:
    return f"{parent_name}-pr-{number}"


def screen(parent, pr) -> dict | None:
    """The answer to a pull request that needs no work (a 202 body: ``{"ignored": ...}``,
    as :func:`on_pull_request` gives), from the parent and the request alone; None when
    there is work: a preview to make, redeploy or delete (a ``closed`` request)."""
    if parent.preview_of is not None:
        return {"ignored": "previews"}
    if pr.action is None:
        return {"ignored": "action"}
    if pr.action == CLOSED:  # also when previews or forks were turned off since it was made
        return None
    if not parent.previews:
        return {"ignored": "previews"}
    tracked = parent.source.get(BRANCH)
    if tracked is not None and pr.base_branch != tracked:
        return {"ignored": "branch"}
    if pr.from_fork and (not parent.previews_from_forks or not pr.head_clone_url):
        return {"ignored": "fork"}
    if pr.action not in (OPENED, REOPENED, UPDATED):
        return {"ignored": "action"}
    return None


def on_pull_request(uow, clock, service, pull_request, *, methods: dict | None = None, catalog: dict | None = None,
                    quota: Quota = DEFAULT_QUOTA, base_domain: str | None = None, reserved_hosts=(),
                    runtime=None) -> dict:
    """What a pull request (``ports.git_providers.PullRequest``) against ``service`` (the
    parent, a ``Service`` or its id) does; returns the webhook's 202 body:

    - ``{"ignored": "previews"}``: the service has no previews (off, or it is a preview);
      ``{"ignored": "action"}``: an action with nothing to deploy (``action`` None);
      ``{"ignored": "branch"}``: against another branch than the tracked one;
      ``{"ignored": "fork"}``: from a fork, and ``previews_from_forks`` is off.
    - ``{"preview_id", "deploy_job_id"}``: the preview's deploy (or redeploy) is queued
      (``deploy_job_id``: the job already under way when the preview was deploying).
    - ``{"preview_id": null, "failed": <why>}``: no preview (past a customer limit, ...);
      the parent's timeline has a ``deploy`` ``failed`` event saying the same. A refused
      redeploy of a preview already there answers its id, the preview left as it was.
    - ``{"deleted": <preview id or null>}``: closed; the preview (if there was one) is gone.

    ``methods``, ``catalog``, ``quota``, ``base_domain`` and ``reserved_hosts`` are what a
    service create takes (the app's own); a parent whose method is not among ``methods``
    or has no previews (``DeployMethod.previews``) is ``{"ignored": "previews"}``
    (its previews are still deleted when their requests close); ``runtime`` the engine a
    closed request's preview is removed from (None: only its rows go)."""
    parent_id = service if isinstance(service, str) else service.id
    with uow.reading():
        parent = uow.services.get(parent_id)
    if parent is None:
        raise NotFound(f"service {parent_id} not found")
    pr = pull_request
    ignored = screen(parent, pr)
    if ignored is not None:
        return ignored
    if pr.action == CLOSED:
        return _close(uow, parent, pr, runtime, methods or {})
    method = (methods or {}).get(parent.deploy_method)
    if not capabilities.has_previews(method) or capabilities.repository_field(method) is None:
        return {"ignored": "previews"}
    return _deploy(uow, clock, parent, pr, method, catalog or {}, quota, base_domain, reserved_hosts)


def _source(parent, pr, field: str) -> dict:
    """The preview's repository (its method's source ``field`` naming it), branch,
    variables and network as the request has them now. A fork's request runs a
    stranger's code: none of the parent's secret variables (only the others) and never
    the customer network."""
    own = parent.variables or {}
    if pr.from_fork:
        secret = set(parent.secrets)
        own = {name: value for name, value in own.items() if name not in secret}
    variables = {**own, PREVIEW_VARIABLE: "1"}
    secrets = () if pr.from_fork else tuple(n for n in parent.secrets if n != PREVIEW_VARIABLE)
    return {field: pr.head_clone_url if pr.from_fork else parent.source.get(field), BRANCH: pr.head_branch,
            "variables": variables, "secrets": secrets,
            "customer_network": bool(parent.customer_network) and not pr.from_fork}


def _deploy(uow, clock, parent, pr, method, catalog, quota, base_domain, reserved_hosts) -> dict:
    field = capabilities.repository_field(method)
    assert field is not None, "previews_for checks that the method names its repository field"
    source = _source(parent, pr, field)
    note = f"pull request #{pr.number} at commit {pr.head_commit[:12]} on {pr.head_branch}"
    with uow.reading():
        existing = uow.services.preview(parent.id, pr.number)
    try:
        if existing is None:
            request = {"name": preview_name(parent.name, pr.number), "customer_id": parent.customer_id,
                       "deploy_method": parent.deploy_method, **{k: v for k, v in parent.source.items()
                                                                 if k in capabilities.created_fields(method)},
                       field: source[field], BRANCH: source[BRANCH], "customer_network": source["customer_network"]}
            if parent.deploy_key_id and not pr.from_fork:  # the parent's repository: the parent's key
                request["deploy_key_id"] = parent.deploy_key_id
            preset = {"variables": source["variables"], "secrets": source["secrets"], "preview_of": parent.id,
                      "preview_number": pr.number}
            if parent.ssh_host_key and not pr.from_fork:  # the parent's repository: the host key it pinned
                preset["ssh_host_key"] = parent.ssh_host_key
            created, job = services.create_service(
                uow, clock, PROVIDER, request, {parent.deploy_method: method}, catalog, quota,
                base_domain=base_domain, reserved_hosts=reserved_hosts, preset=preset, note=note)
            return {"preview_id": created.id, "deploy_job_id": job.id}
        if existing.status == "deploying":  # its job clones the head branch's newest commit when it starts
            return _under_way(uow, clock, existing, note)
        # the source as a create checks it (a fork's repository may have changed)
        wanted = {**existing.source, field: source[field], BRANCH: source[BRANCH]}
        plan = method.plan({**wanted, "name": existing.name, "customer_id": existing.customer_id,
                            "deploy_method": existing.deploy_method}, catalog)
        changes = {"source": capabilities.source_of(method, wanted, plan.source),
                   "variables": source["variables"], "secrets": source["secrets"]}
        if pr.from_fork:  # a fork's preview leaves the customer network whatever it was set to meanwhile
            changes["customer_network"] = False
        if existing.source.get(field) != source[field]:  # another repository (a fork moved): its key is learned anew
            changes["ssh_host_key"] = None
        updated, job = services.redeploy(uow, clock, PROVIDER, existing.id, quota, changes=changes, note=note)
        return {"preview_id": updated.id, "deploy_job_id": job.id}
    except (Conflict, Invalid) as exc:
        why = _why(exc)
        if existing is not None and isinstance(exc, Conflict) and "deploying" in str(exc):
            return _under_way(uow, clock, existing, note)  # a deploy began meanwhile
        if existing is None and isinstance(exc, Conflict):  # the same request delivered twice at once
            with uow.reading():
                made = uow.services.preview(parent.id, pr.number)
            if made is not None:
                return _under_way(uow, clock, made, note)
        with uow:
            services.record(uow, clock, parent.id, "deploy", "failed",
                            f"no preview of pull request #{pr.number}: {why}")
            uow.commit()
        return {"preview_id": existing.id if existing is not None else None, "failed": why}


def _why(exc) -> str:
    fields = getattr(exc, "fields", None) or {}
    detail = "; ".join(f"{name}: {problem}" for name, problem in fields.items())
    return f"{exc} ({detail})" if detail else str(exc)


def _under_way(uow, clock, preview, note: str) -> dict:
    """The preview is deploying: the job under way (or queued) answers for this update."""
    with uow:
        jobs, _ = uow.deploy_jobs.page(preview.id, page=1, per_page=1)
        services.record(uow, clock, preview.id, "redeploy", "started",
                        f"{note}: a deploy of the preview is already under way")
        uow.commit()
    return {"preview_id": preview.id, "deploy_job_id": jobs[0].id if jobs else None}


def _close(uow, parent, pr, runtime, methods) -> dict:
    with uow.reading():
        preview = uow.services.preview(parent.id, pr.number)
    if preview is None:
        return {"deleted": None}
    try:
        gone = services.delete_service(uow, runtime, PROVIDER, preview.id)
    except NotFound:  # a delivery repeated at once: the other one deleted it
        return {"deleted": preview.id}
    method = methods.get(gone.deploy_method)
    if runtime is not None and method is not None:
        for image in method.built_images(gone):  # best effort: the service is gone either way
            try:
                runtime.remove_image(image)
            except Exception:  # noqa: BLE001
                pass
    return {"deleted": gone.id}


def list_previews(uow, principal, service_id: str, *, page: int, per_page: int):
    """``GET /api/services/{id}/previews``: the previews of a service the caller sees,
    by pull-request number (404 for a service it may not see)."""
    with uow.reading():
        services.visible(principal, uow.services.get(service_id), service_id)
        return uow.services.previews_page(service_id, page=page, per_page=per_page)


# --- preview jobs: what a pull-request delivery queues ----------------------------------

#: the fields of a pull request a job keeps (``ports.git_providers.PullRequest``'s)
REQUEST_FIELDS = ("number", "action", "base_branch", "head_branch", "head_commit", "from_fork", "head_clone_url")
#: how long a finished preview job is kept
KEEP_JOBS = timedelta(days=7)


@dataclass(frozen=True)
class PullRequestFields:
    """A pull request as a preview job keeps it (read by the same attributes as
    ``ports.git_providers.PullRequest``)."""

    number: int
    action: str | None
    base_branch: str
    head_branch: str
    head_commit: str
    from_fork: bool = False
    head_clone_url: str | None = None


@dataclass(frozen=True)
class PreviewJob:
    """A pull request's work on the previews of ``service_id`` (the parent): queued by
    the delivery, run by the preview worker (:func:`run_job`), ``answer`` what
    :func:`on_pull_request` gave (or ``{"failed": why}``)."""

    id: str
    service_id: str
    customer_id: str
    number: int
    request: dict
    state: str  # queued, running, done, failed
    created_at: datetime
    updated_at: datetime
    owner: str | None = None
    answer: dict | None = None


def queue(uow, clock, parent, pr) -> PreviewJob:
    """In the caller's transaction: a queued job for ``pr`` against ``parent``."""
    now = clock.now()
    request = {name: getattr(pr, name, None) for name in REQUEST_FIELDS}
    job = PreviewJob(id="pvj_" + random.token_hex(8), service_id=parent.id, customer_id=parent.customer_id,
                     number=int(pr.number), request=request, state="queued", created_at=now, updated_at=now)
    uow.preview_jobs.add(job)
    return job


def claim_next(uow, clock, owner: str | None = None) -> PreviewJob | None:
    """The oldest queued job of a customer with none running, now running."""
    with uow:
        job = uow.preview_jobs.claim_queued(clock.now(), owner)
        uow.commit()
    return job


def run_job(uow, clock, job: PreviewJob, react=None) -> dict:
    """Do what ``job`` asks: ``react(uow, clock, parent id, pull request)`` (by default
    :func:`on_pull_request`, which makes, redeploys or deletes the preview in
    transactions of its own and calls the engine: this runs on a job thread, never on
    the database's). A reaction that raises ends the job ``failed`` with the reason on
    the parent's timeline; a parent deleted meanwhile ends it ``done`` (nothing to do)."""
    react = react or on_pull_request
    fields: dict[str, Any] = {name: job.request.get(name) for name in REQUEST_FIELDS}
    pr = PullRequestFields(**fields)
    state = "done"
    try:
        answer = react(uow, clock, job.service_id, pr)
    except NotFound:  # the parent went meanwhile: its previews went with it
        answer = {"ignored": "previews"}
    except Exception as exc:  # noqa: BLE001 (the job ends; the worker goes on)
        state, answer = "failed", {"failed": _why(exc) or type(exc).__name__}
        with uow:
            if uow.services.get(job.service_id) is not None:
                services.record(uow, clock, job.service_id, "deploy", "failed",
                                f"no preview of pull request #{job.number}: {answer['failed']}")
            uow.commit()
    with uow:
        uow.preview_jobs.finish(job.id, state, answer if isinstance(answer, dict) else {}, clock.now())
        uow.preview_jobs.forget_before(clock.now() - KEEP_JOBS)
        uow.commit()
    return answer


def get_job(uow, principal, service_id: str, job_id: str) -> PreviewJob:
    """``GET /api/services/{id}/preview-jobs/{job_id}``: 404 for a service the caller may
    not see or a job of another service."""
    with uow.reading():
        services.visible(principal, uow.services.get(service_id), service_id)
        job = uow.preview_jobs.get(job_id)
    if job is None or job.service_id != service_id:
        raise NotFound(f"preview job {job_id} not found")
    return job


def recover_interrupted(uow, clock) -> list[str]:
    """Jobs a stopped process left running (its worker lease stale or gone) are queued
    again; returns their ids."""
    from core.panel import leases

    with uow:
        taken = uow.preview_jobs.requeue_orphaned(uow.leases.live(leases.stale_before(clock)), clock.now())
        uow.commit()
    return taken
