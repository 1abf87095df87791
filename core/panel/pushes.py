"""Deploy on push: a git provider's webhook delivery to ``POST /api/hooks/git/{id}``,
already recognised and verified by the app (``app.panel.git_hooks``, through the
git-provider plugins), decided here in one transaction.

- A delivery id seen before for the service runs nothing (200 ``{"duplicate": true}``);
  every verified delivery that carries an id is recorded (``uow.git_deliveries``) in the
  same transaction as what it queues, so a delivery sent twice at once runs once; ids
  are remembered :data:`KEEP_DELIVERIES` (30 days).
- A push to another branch than the tracked one is 202 ``{"ignored": "branch"}``; the
  tracked branch is the service's ``git_branch``, or, without one, the branch its last
  deploy cloned (the remote's default branch then: ``Release.branch`` of the release
  that runs), whether or not the payload names a default branch (Bitbucket's never do);
  a service with neither (no release with a recorded branch yet) tracks the default
  branch the payload names (a payload naming none: ignored as another branch's).
- With ``auto_deploy`` off: 202 ``{"ignored": "auto_deploy"}``.
- Forward only: a push whose commit is the commit of the release that runs (the
  service's ``release``, not ``service.commit``, which a job that failed may have set) or
  one of its ancestors is 202 ``{"ignored": "old commit"}`` and queues nothing
  (:func:`old_commit`). The ancestors are those its deploy's clone read
  (``git rev-list``, :data:`plugins.source_common.source.ANCESTRY` commits at most) and
  recorded with the release (``uow.releases.add_ancestry``): git is never asked here,
  inside the delivery's transaction. A commit older than that bound, or not known at
  all, deploys as a new one would.
- A push to the tracked branch queues a health-gated redeploy of the pushed commit
  (``DeployJob.commit``; ``created_by`` ``git:<provider>``), 202 ``{"deploy_job_id"}``.
  While a push deploy of the service is still queued (not started), the new commit joins
  it (coalesced: its id is answered; ``DeployJob.commits`` keeps every commit pushed into
  it, in the order they came, :data:`KEEP_COMMITS` at most): which of them is newest is
  known only once the job has cloned the branch, so the job deploys the newest of them
  in the branch's history (:func:`newest`), not the last to arrive. A job already
  running is left to finish, and the queued one runs after it (one job of a service runs
  at a time); when it starts, the commits the release then running knows (its own and
  its ancestors) are dropped, and a job left with none ends ``cancelled`` ("old commit")
  without deploying (``core.panel.deploy_job``).
- A pull or merge request is answered at once when it needs no work, else its preview's
  create, redeploy or delete is queued as a preview job (202 ``{"preview_job_id"}``,
  :func:`_pull_request_delivery`); every other event is 202 ``{"ignored": "event"}``.
  Nothing here waits on the outside (a fork's host, the engine): a signed delivery is
  answered within a second whatever its payload names.
"""
from __future__ import annotations

import secrets as random
from dataclasses import dataclass, replace
from datetime import timedelta

from core.errors import Conflict, NotFound
from core.panel import capabilities
from core.panel.customers import DEFAULT_QUOTA, Footprint, Quota, reserve
from core.panel.events import service_status
from core.panel.services import DeployJob, new_id, record, require_preview_permissions, visible

#: how long a delivery id is remembered (providers redeliver, by hand too, for a few days)
KEEP_DELIVERIES = timedelta(days=30)
#: the most commits a queued push deploy keeps (the last to come): the job asks git about each
KEEP_COMMITS = 20
#: a push of the deployed commit or one of its ancestors
OLD_COMMIT = "old commit"
#: the same answer for a service that is not there, is not deployed on push, or has no secret:
#: a stranger learns nothing of which ids exist
NO_HOOK = "no git webhook here"


@dataclass(frozen=True)
class Outcome:
    """What the webhook answers: ``status`` and its JSON ``body`` (None: no body)."""

    status: int
    body: dict | None = None


def short(commit: str) -> str:
    return (commit or "")[:7]


def new_webhook_secret(uow, clock, principal, service_id: str, *, methods: dict) -> str:
    """``POST /api/services/{id}/webhook-secret``: a new secret (the old one stops
    working), kept encrypted, answered this once. 409 for a service whose deploy method
    (among ``methods``) does not deploy on push (``DeployMethod.deploys_on_push``: ``git``
    and ``ai`` do). For a service with previews (``previews``
    or ``previews_from_forks`` on) it also needs ``services:create`` and
    ``services:delete`` (403): its deliveries create and delete preview services."""
    principal.require("services:deploy")
    secret = random.token_urlsafe(32)
    with uow:
        service = visible(principal, uow.services.get(service_id, for_update=True), service_id)
        if not capabilities.pushed(methods, service.deploy_method):
            raise Conflict(f"{service.deploy_method} services are not deployed on push (only those of "
                           f"{capabilities.those_that(methods, capabilities.deploys_on_push)} are)")
        if service.previews or service.previews_from_forks:
            require_preview_permissions(principal, "the webhook secret of a service with previews")
        uow.services.set_webhook_secret(service.id, secret)
        uow.commit()
    return secret


def webhook_secret(uow, service_id: str, *, methods: dict) -> str | None:
    """The secret a delivery to ``service_id`` must be signed with; None (the caller
    answers 404, :data:`NO_HOOK`) when there is no such service deployed on push (its
    method among ``methods``) or no secret."""
    with uow.reading():
        service = uow.services.get(service_id)
        if service is None or not capabilities.pushed(methods, service.deploy_method):
            return None
        return uow.services.webhook_secret(service_id)


def tracked_branch(service, default_branch: str | None, cloned: str | None = None) -> str | None:
    """The branch a push must name to deploy ``service``: its ``git_branch``, else the
    branch its last deploy cloned (``cloned``), else the payload's ``default_branch``."""
    return service.source.get("git_branch") or cloned or default_branch


def cloned_branch(uow, service) -> str | None:
    """The branch the deploy of the release that runs ``service`` cloned, or None."""
    if service.source.get("git_branch"):
        return None
    release = running_release(uow, service)
    return getattr(release, "branch", None) if release is not None else None


def newest(commits, is_ancestor) -> str | None:
    """Of ``commits`` (pushed into one job, in the order they came), the one to deploy:
    the last to come of those that no other of them descends from. ``is_ancestor(a, b)``:
    whether ``a`` is an ancestor of ``b`` (another commit); answering False for a pair
    it cannot tell (a commit the clone does not have) leaves their order of arrival to
    decide. None for no commits."""
    commits = list(dict.fromkeys(c for c in commits if c))
    heads = [c for c in commits if not any(other != c and is_ancestor(c, other) for other in commits)]
    return (heads or commits or [None])[-1]


def running_release(uow, service):
    """The release that runs the service (its ``release`` number), or None."""
    return uow.releases.numbered(service.id, service.release) if service.release else None


def known_to(uow, release, commit: str) -> bool:
    """Whether ``commit`` is ``release``'s own commit or a recorded ancestor of it."""
    return release is not None and bool(commit) and (
        release.commit == commit or uow.releases.has_ancestor(release.id, commit))


def old_commit(uow, service, commit: str) -> bool:
    """Whether a push of ``commit`` would move the service backwards: it is the commit of
    the release that runs, or one of its recorded ancestors (:func:`known_to`)."""
    return known_to(uow, running_release(uow, service), commit)


def receive(uow, clock, service_id: str, provider: str, delivery_id: str | None, event, *,
            methods: dict, quota: Quota = DEFAULT_QUOTA, on_pull_request=None) -> Outcome:
    """Decide a verified delivery (``event``: a ``ports.git_providers.GitEvent``, read by
    its attributes: core knows no port) to a service whose method (among ``methods``)
    deploys on push (else :data:`NO_HOOK`). ``on_pull_request(uow, clock, service,
    pull_request)``: previews' reaction (:func:`_pull_request_delivery`); it answers an
    :class:`Outcome` (or a dict body, 202)."""
    kind = getattr(event, "kind", None)
    with uow.reading():
        found = uow.services.get(service_id)
    if found is None or not capabilities.pushed(methods, found.deploy_method):
        raise NotFound(NO_HOOK)
    if kind == "pull_request" and getattr(event, "pull_request", None) is not None:
        return _pull_request_delivery(uow, clock, found, provider, delivery_id, event.pull_request,
                                      on_pull_request)
    footprint = None
    if kind == "push":
        footprint = quota.footprint_of_compose(found.compose, found.variables)
    with uow:
        # the customer's row first, then the service's: the order create and redeploy take (previews
        # create services for a pull request: the same order)
        customer = uow.panel_customers.get(found.customer_id, for_update=True) \
            if kind in ("push", "pull_request") else None
        service = uow.services.get(service_id, for_update=True)
        if service is None:
            raise NotFound(NO_HOOK)
        if delivery_id:
            if uow.git_deliveries.seen(service.id, delivery_id):
                return Outcome(200, {"duplicate": True})
            now = clock.now()
            uow.git_deliveries.forget_before(service.id, now - KEEP_DELIVERIES)  # a provider redelivers for days
            uow.git_deliveries.add(service.id, delivery_id, provider, now)
        outcome = _decide(uow, clock, service, customer, provider, event, kind, quota, footprint, found,
                          on_pull_request)
        uow.commit()
    return outcome


def _pull_request_delivery(uow, clock, service, provider, delivery_id, request, on_pull_request) -> Outcome:
    """A pull or merge request, decided in one transaction that waits on nothing outside:
    what needs no work (previews off, another branch, a fork not allowed, ...) is
    answered at once (:func:`core.panel.previews.screen`); a preview to make, redeploy
    or delete is queued as a preview job (202 ``{"preview_job_id"}``), which the preview
    worker runs (it looks a fork's host up and calls the engine: never on the delivery's
    request). A closed request without a preview is ``{"deleted": null}``. The delivery
    id is recorded in the same transaction as the job, so a delivery sent twice queues
    one job. ``on_pull_request``: a reaction to run here instead of queueing (None: the
    previews' jobs), for callers that run no preview worker."""
    from core.panel import previews

    if on_pull_request is not None:
        return pull_request(uow, clock, service, request, on_pull_request)
    with uow:
        parent = uow.services.get(service.id, for_update=True)
        if parent is None:
            raise NotFound(NO_HOOK)
        if delivery_id and uow.git_deliveries.seen(parent.id, delivery_id):
            return Outcome(200, {"duplicate": True})
        answer = previews.screen(parent, request)
        if answer is None and request.action == previews.CLOSED \
                and uow.services.preview(parent.id, request.number) is None:
            answer = {"deleted": None}
        if answer is None:
            answer = {"preview_job_id": previews.queue(uow, clock, parent, request).id}
        if delivery_id:
            now = clock.now()
            uow.git_deliveries.forget_before(parent.id, now - KEEP_DELIVERIES)
            uow.git_deliveries.add(parent.id, delivery_id, provider, now)
        uow.commit()
    return Outcome(202, answer)


def _decide(uow, clock, service, customer, provider, event, kind, quota, footprint, found, on_pull_request):
    push = getattr(event, "push", None)
    if kind != "push" or push is None or push.deleted:
        return Outcome(202, {"ignored": "event"})
    if push.branch != tracked_branch(service, getattr(push, "default_branch", None), cloned_branch(uow, service)):
        return Outcome(202, {"ignored": "branch"})
    if not service.auto_deploy:
        return Outcome(202, {"ignored": "auto_deploy"})
    if old_commit(uow, service, push.commit):
        return Outcome(202, {"ignored": OLD_COMMIT})
    return Outcome(202, {"deploy_job_id": queue_push(uow, clock, service, customer, provider, push.commit,
                                                     push.branch, quota, footprint, found)})


def previews_reaction():
    """``core.panel.previews.on_pull_request`` when that module is there, else None."""
    try:
        from core.panel import previews
    except ImportError:
        return None
    return getattr(previews, "on_pull_request", None)


def pull_request(uow, clock, service, request, on_pull_request=None) -> Outcome:
    """The one place a pull or merge request goes: ``on_pull_request(uow, clock,
    service, pull_request)`` (by default previews', :func:`previews_reaction`), when there
    is one, else 202 ``{"ignored": "event"}``."""
    on_pull_request = on_pull_request or previews_reaction()
    if on_pull_request is None:
        return Outcome(202, {"ignored": "event"})
    answer = on_pull_request(uow, clock, service, request)
    if isinstance(answer, Outcome):
        return answer
    return Outcome(202, answer if isinstance(answer, dict) else {"ignored": "event"})


def queue_push(uow, clock, service, customer, provider: str, commit: str, branch: str, quota: Quota = DEFAULT_QUOTA,
               footprint: Footprint | None = None, found=None) -> str:
    """In the caller's transaction (the service's row locked): the id of the push deploy
    that will deploy ``commit`` or a newer one: a queued one it joins (its commits, of
    which it deploys the newest: :func:`newest`), or a new one."""
    now, by = clock.now(), f"git:{provider}"
    named = f"commit {short(commit)} ({provider}, {branch})"
    queued = uow.deploy_jobs.queued_push(service.id)
    if queued is not None:
        had = tuple(queued.commits or (queued.commit,))
        if commit in had:  # the same push again under another delivery id
            return queued.id
        commits = tuple(c for c in had if c != commit)[-(KEEP_COMMITS - 1):] + (commit,)
        if uow.deploy_jobs.retarget(queued.id, commit, by, now, commits=commits):
            record(uow, clock, service.id, "redeploy", "started",
                   f"push of {named}: joins queued redeploy job {queued.id}, which deploys the newest of "
                   f"{', '.join(short(c) for c in commits)} in the branch's history")
            return queued.id
    if service.status != "deploying":  # a job running keeps its own count and status; this one waits for it
        if found is not None and service.compose != found.compose:  # a deploy ended meanwhile with another compose
            footprint = quota.footprint_of_compose(service.compose, service.variables)
        if footprint is None:
            footprint = Footprint(service.memory_mb, service.millicpus, service.containers)
        if customer is not None:
            reserve(uow, quota, customer, footprint, new_service=False,
                    replacing=Footprint(service.memory_mb, service.millicpus, service.containers))
        service = replace(service, status="deploying", updated_at=now, memory_mb=footprint.memory_mb,
                          millicpus=footprint.millicpus, containers=footprint.containers)
        uow.services.update(service)
        uow.emit(service_status(service))
    job = DeployJob(id=new_id("job"), service_id=service.id, kind="redeploy", state="queued", created_at=now,
                    updated_at=now, created_by=by, commit=commit, commits=(commit,))
    uow.deploy_jobs.add(job)
    record(uow, clock, service.id, "redeploy", "started", f"push of {named}: redeploy job {job.id} queued")
    return job.id
