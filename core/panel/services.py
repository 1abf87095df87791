"""Panel services: create (a deploy job), lifecycle, events; the rules of the status
machine. The container work itself runs in ``core.panel.deploys`` (jobs) and through the
runtime port."""
from __future__ import annotations

import hashlib
import re
import secrets
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from typing import NamedTuple

from core.panel.access import SourcePrincipal
from core.panel import capabilities, containerfiles, deploy_keys, domains, host_keys, leases, networks, routes
from core.panel import secrets as secret_variables
from core.errors import Conflict, Forbidden, Invalid, NotFound
from core.panel.containers import NotInEngine, keep_tag
from core.panel.events import service_status
from core.panel.customers import DEFAULT_QUOTA, Footprint, Quota, reserve

STATUSES = ("running", "stopped", "deploying", "failed")
_NAME = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")


@dataclass(frozen=True)
class Service:
    id: str
    name: str
    customer_id: str
    deploy_method: str
    status: str
    created_at: datetime
    updated_at: datetime
    template_id: str | None = None
    compose: str = ""
    variables: dict | None = None
    url: str = ""
    deployed_at: datetime | None = None
    health_status: str = "unknown"
    health_checked_at: datetime | None = None
    health_failures: int = 0
    #: the fields its deploy method keeps per service (``DeployMethod.source_fields``), by
    #: name: a git service's ``git_url`` (credentials included; redact when shown) and
    #: ``git_branch`` (none: the remote's default branch); a field without a value is left out
    source: dict = field(default_factory=dict)
    commit: str | None = None  # methods that fetch their source: the commit last deployed
    #: what the service counts against its customer's limits (``core.panel.customers``):
    #: its components' container memory (MB) and CPU (thousandths) limits summed, set by
    #: create and redeploy; and its containers (one per compose service)
    memory_mb: int = 0
    millicpus: int = 0
    containers: int = 0
    #: its custom domains, by name (``core.panel.domains``; kept in ``uow.custom_domains``)
    custom_domains: tuple = ()
    release: int | None = None  # the number of the release running (``core.panel.releases``)
    #: the names of its secret variables (``core.panel.secrets``): in ``variables`` in the
    #: clear here, stored encrypted, shown as ``***``
    secrets: tuple = ()
    #: it also joins its customer's network, answering there as its name (``core.panel.networks``)
    customer_network: bool = False
    #: the deploy key its ssh clones use (``core.panel.deploy_keys``; a key of its customer), or None
    deploy_key_id: str | None = None
    #: git services: deploy a preview service of each pull request against the tracked
    #: branch (``core.panel.previews``); also of one from a fork
    previews: bool = False
    previews_from_forks: bool = False
    #: a preview service: its parent's id and its pull request's number
    preview_of: str | None = None
    preview_number: int | None = None
    #: a push to its branch deploys it (``core.panel.pushes``); its webhook secret is kept
    #: apart (``uow.services.webhook_secret``), never on this entity
    auto_deploy: bool = True
    #: the ssh host key its first ssh clone was shown (``<type> <base64>``), which every
    #: later clone must be shown (``core.panel.host_keys``); None until then
    ssh_host_key: str | None = None


class ServiceSummary(NamedTuple):
    """What a list of services shows of each (``GET /api/services``): a read model, read as
    it is stored. A list decides nothing, so it reads none of what a ``Service`` carries for
    the rules (variables decrypted, compose, limits), and an immutable tuple of nine fields
    costs a fraction of making a ``Service`` of thirty (the list page's largest cost when
    it did, ``python -m bench lists``)."""

    id: str
    name: str
    status: str
    url: str
    customer_id: str
    template_id: str | None
    deploy_method: str
    created_at: datetime
    updated_at: datetime

    @classmethod
    def of(cls, service: "Service") -> "ServiceSummary":
        return cls._make(getattr(service, name) for name in cls._fields)


@dataclass(frozen=True)
class DeployJob:
    id: str
    service_id: str
    kind: str  # deploy, redeploy or rollback
    state: str  # queued, running, succeeded, failed, cancelled
    created_at: datetime
    updated_at: datetime
    step: str = ""
    error: str | None = None
    attempts: int = 0  # times a worker claimed it; a job interrupted too often is given up
    release_id: str | None = None  # the release it recorded (a job that succeeded)
    target_release_id: str | None = None  # rollback: the release it runs again
    cancel_requested: bool = False  # a cancel was asked for; the worker running it stops it
    finished_at: datetime | None = None
    created_by: str = "system"  # who asked: key:<id>, user:<id>, git:<provider> (a push), or system
    commit: str | None = None  # the commit to deploy (a push's, the last to come); None: the branch's newest
    #: a push deploy's: every commit pushed into it while it was queued, in the order they came; it
    #: deploys the newest of them in the branch's history (``core.panel.pushes.newest``)
    commits: tuple = ()


@dataclass(frozen=True)
class ServiceEvent:
    id: int | None
    service_id: str
    type: str  # deploy, redeploy, rollback, start, stop, restart, health, backup, restore
    status: str  # started, success, failed, healthy, unhealthy, progress (a step of a restore; a host port changed)
    message: str
    timestamp: datetime


# health is checked on running services only: one that leaves ``running`` is not healthy
# any more, nor unhealthy, until it runs again and is checked
NOT_CHECKED = {"health_status": "unknown", "health_failures": 0}


def new_id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(8)}"


#: the longest ``caller_name`` a job and its release keep
CALLER_NAME_MAX = 80


def caller_name(principal) -> str:
    """Who asked, as a job and its release record it: ``user:<id>`` for a browser session
    signed in through OIDC, ``key:<id>`` for an API key (or a session opened with one),
    ``source:<auth source>:<subject>`` for a caller a plugin's auth source signed in (a
    subject too long for ``CALLER_NAME_MAX`` as ``~`` and the first 24 hex digits of its
    SHA-256), ``system`` for work nobody asked for."""
    if principal is None:
        return "system"
    if isinstance(principal, SourcePrincipal):
        name = f"source:{principal.source}:{principal.subject}"
        if len(name) <= CALLER_NAME_MAX:
            return name
        return f"source:{principal.source}:~{hashlib.sha256(principal.subject.encode('utf-8')).hexdigest()[:24]}"
    user = getattr(principal, "user", None)
    if user is not None and getattr(user, "id", None):
        return f"user:{user.id}"
    key = getattr(principal, "key", None)
    return f"key:{key.id}" if key is not None else "system"


def visible(principal, service: Service | None, service_id: str) -> Service:
    """404 for a missing service and for one a customer key may not see."""
    if service is None or (principal.customer_id is not None and service.customer_id != principal.customer_id):
        raise NotFound(f"service {service_id} not found")
    return service


def record(uow, clock, service_id: str, type: str, status: str, message: str) -> ServiceEvent:
    return uow.service_events.add(ServiceEvent(None, service_id, type, status, message, clock.now()))


#: the service switches only a deploy method that has previews (``DeployMethod.previews``)
#: has: its pull requests' previews (``core.panel.previews``)
PREVIEW_SWITCHES = ("previews", "previews_from_forks")


#: what turning previews on (or minting the webhook secret of a service with previews)
#: needs besides ``services:deploy``: a pull request's delivery creates and deletes a
#: service, so a webhook does no more than the key that armed it could (DECISIONS.md
#: "Tenant safety, third round")
PREVIEW_PERMISSIONS = ("services:create", "services:delete")


def require_preview_permissions(principal, what: str) -> None:
    """``Forbidden`` (403) unless ``principal`` holds every permission of
    :data:`PREVIEW_PERMISSIONS`; the message names ``what`` was refused and each one it lacks."""
    missing = []
    for permission in PREVIEW_PERMISSIONS:
        try:
            principal.require(permission)
        except Forbidden:
            missing.append(permission)
    if missing:
        raise Forbidden(f"{what} needs services:create and services:delete besides services:deploy (a pull "
                        f"request's preview is a service its webhook creates and deletes): this caller lacks "
                        + " and ".join(missing))


def turns_previews_on(body: dict) -> bool:
    """Whether a create or PATCH body sets ``previews`` or ``previews_from_forks`` to true."""
    return any(body.get(name) is True for name in PREVIEW_SWITCHES)


def _switch_problems(body: dict, method, method_name: str, preview_of: str | None = None) -> dict:
    """422s of ``previews`` and ``previews_from_forks`` in a create or PATCH body."""
    problems = {}
    for name in PREVIEW_SWITCHES:
        if name not in body:
            continue
        if not isinstance(body[name], bool):
            problems[name] = "must be true or false"
        elif method is not None and not capabilities.has_previews(method):
            problems[name] = f"{method_name} services have no previews"
        elif preview_of is not None:
            problems[name] = f"a preview (of {preview_of}) has no previews of its own"
    return problems


def create_service(uow, clock, principal, request: dict, methods: dict, catalog: dict,
                   quota: Quota = DEFAULT_QUOTA, *, base_domain: str | None = None, reserved_hosts=(), also=None,
                   preset: dict | None = None, note: str = ""):
    """Validate, plan, store the service as ``deploying`` and queue its deploy job. 409
    when the service would take its customer past one of its limits (``quota``): the
    check and the insert are one transaction, under the customer's row lock. With a
    ``base_domain``, a name whose ``<name>.<base domain>`` is one of ``reserved_hosts``
    (the panel's host, Caddy's admin host) or a name above one is 422 on ``name``
    (``domains.service_host_problem``). ``also(uow, service)``, when given, runs in the
    same transaction once the service is stored (a restore into the new service).
    ``preset``: fields of the new service its caller sets beyond what a request gives (a
    preview's variables, parent and number: ``core.panel.previews``); ``note`` ends the
    deploy's timeline entry."""
    principal.require("services:deploy")
    problems = {}
    name = request.get("name", "")
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        problems["name"] = "1-63 lower-case letters, digits and '-', starting and ending with a letter or digit"
    elif base_domain:
        why = domains.service_host_problem(routes.hostname(name, base_domain), reserved_hosts)
        if why is not None:
            problems["name"] = why
    method = methods.get(request.get("deploy_method"))
    if method is None:
        problems["deploy_method"] = "must be one of " + ", ".join(sorted(methods))
    customer_network = request.get("customer_network", False)
    if not isinstance(customer_network, bool):
        problems["customer_network"] = "must be true or false"
    deploy_key_id = request.get("deploy_key_id")
    if deploy_key_id is not None and not isinstance(deploy_key_id, str):
        problems["deploy_key_id"] = "a deploy key's id (dk_...) or null"
    elif deploy_key_id is not None and method is not None \
            and "deploy_key_id" not in (getattr(method, "request_schema", None) or {}).get("properties", {}):
        problems["deploy_key_id"] = f"{method.name} services clone no repository: they have no deploy key"
    problems.update(_switch_problems(request, method, str(request.get("deploy_method"))))
    auto_deploy = request.get("auto_deploy", True)
    if not isinstance(auto_deploy, bool):
        problems["auto_deploy"] = "must be true or false"
    elif "auto_deploy" in request and method is not None and not capabilities.deploys_on_push(method):
        problems["auto_deploy"] = (f"{method.name} services are not deployed on push (only those of "
                                   f"{capabilities.those_that(methods, capabilities.deploys_on_push)} are)")
    if problems:
        raise Invalid("invalid service", fields=problems)
    assert method is not None  # (else a problem above)
    if principal.customer_id is not None and request["customer_id"] != principal.customer_id:
        raise Forbidden("a customer key creates services for its own customer only")
    if turns_previews_on(request):
        require_preview_permissions(principal, "a service with previews")
    plan = method.plan(request, catalog)
    hidden = secret_variables.marked(plan.secrets, request.get(secret_variables.FIELD), plan.variables)
    service_id = new_id("svc")
    _images_allowed(plan, service_id, method)
    # a method that fetches its source knows no components before the build: one default component
    footprint = quota.footprint(plan.components)
    now = clock.now()
    service = Service(id=service_id, name=name, customer_id=request["customer_id"],
                      deploy_method=method.name, status="deploying", created_at=now, updated_at=now,
                      template_id=plan.template_id, compose=plan.compose, variables=plan.variables,
                      source=capabilities.source_of(method, request, plan.source), memory_mb=footprint.memory_mb,
                      millicpus=footprint.millicpus, containers=footprint.containers,
                      secrets=hidden, customer_network=customer_network,
                      deploy_key_id=deploy_key_id, auto_deploy=auto_deploy,
                      previews=request.get("previews", False),
                      previews_from_forks=request.get("previews_from_forks", False))
    if preset:
        service = replace(service, **preset)
    with uow:
        customer = uow.panel_customers.get(service.customer_id, for_update=True)
        if customer is None:
            raise Invalid("invalid service", fields={"customer_id": "no such customer"})
        deploy_keys.check_for_service(uow, deploy_key_id, service.customer_id)  # a key of its customer, locked
        if uow.services.by_name(name) is not None:
            taken = f"a service named {name!r} already exists"
            raise Conflict(taken, fields={"name": taken})  # the field, so a form can say it next to it
        reserve(uow, quota, customer, footprint, new_service=True)
        uow.services.add(service)
        job = _queue(uow, clock, service, "deploy", principal, note=note)
        if also is not None:
            also(uow, service)
        uow.commit()
    return service, job


def _images_allowed(plan, service_id: str, method) -> None:
    """The image rule (``core.panel.containerfiles.components_refusal``: public references
    and the service's own builds only; no image id or id prefix, no other service's
    ``slw-`` build) at create and PATCH: 422 on ``compose`` (on ``variables`` for a
    method without a compose, a template whose image is a variable), naming the image."""
    reason = containerfiles.components_refusal(plan.components, service_id)
    if reason:
        properties = (getattr(method, "request_schema", None) or {}).get("properties", {})
        field = "compose" if "compose" in properties else "variables"
        raise Invalid("invalid compose definition", fields={field: reason})


def _queue(uow, clock, service: Service, kind: str, principal=None, target_release_id=None,
           note: str = "") -> DeployJob:
    """In the caller's transaction: a queued ``kind`` job for ``service`` (now
    ``deploying``), announced and in its timeline."""
    now = clock.now()
    job = DeployJob(id=new_id("job"), service_id=service.id, kind=kind, state="queued", created_at=now,
                    updated_at=now, created_by=caller_name(principal), target_release_id=target_release_id)
    uow.emit(service_status(service))
    uow.deploy_jobs.add(job)
    record(uow, clock, service.id, kind, "started", f"{kind} job {job.id} queued" + (f" ({note})" if note else ""))
    return job


def get_service(uow, principal, service_id: str) -> Service:
    with uow:
        return visible(principal, uow.services.get(service_id), service_id)


def list_services(uow, principal, *, page: int, per_page: int, status=None, customer_id=None, sort=None,
                  order="asc", search=None):
    if principal.customer_id is not None:
        if customer_id not in (None, principal.customer_id):
            return [], 0
        customer_id = principal.customer_id
    with uow:
        return uow.services.page(page=page, per_page=per_page, status=status, customer_id=customer_id,
                                 sort=sort or "created_at", order=order, search=search)


def redeploy(uow, clock, principal, service_id: str, quota: Quota = DEFAULT_QUOTA, *, kind: str = "redeploy",
             release=None, changes: dict | None = None, note: str = "") -> tuple[Service, DeployJob]:
    """Queue a redeploy (or, with ``kind`` "rollback" and ``release``, a rollback to that
    release: its compose and variables count). The service counts what its kept compose
    says now (for git and ai services, the compose their last build ran); 409 when that
    grows a total past the customer's limit. ``changes``: fields of the service set in
    the same transaction (a preview's branch and variables, ``core.panel.previews``);
    ``note`` ends the job's timeline entry (the commit asked for)."""
    principal.require("services:deploy")
    with uow.reading():
        found = visible(principal, uow.services.get(service_id), service_id)
    compose, variables = (release.compose, release.variables) if release is not None else (found.compose,
                                                                                            found.variables)
    footprint = quota.footprint_of_compose(compose, variables)
    with uow:
        # the customer's row first, then the service's: the order create takes too
        customer = uow.panel_customers.get(found.customer_id, for_update=True)
        service = visible(principal, uow.services.get(service_id, for_update=True), service_id)
        if service.status == "deploying":
            raise Conflict("the service is deploying")
        if release is None and service.compose != found.compose:  # a deploy ended meanwhile with another compose
            footprint = quota.footprint_of_compose(service.compose, service.variables)
        if footprint is None:  # nothing to read (yet): what was counted stays
            footprint = Footprint(service.memory_mb, service.millicpus, service.containers)
        if customer is not None:
            reserve(uow, quota, customer, footprint, new_service=False,
                    replacing=Footprint(service.memory_mb, service.millicpus, service.containers))
        service = replace(service, status="deploying", updated_at=clock.now(), memory_mb=footprint.memory_mb,
                          millicpus=footprint.millicpus, containers=footprint.containers, **(changes or {}))
        uow.services.update(service)
        job = _queue(uow, clock, service, kind, principal, target_release_id=release.id if release else None,
                     note=note)
        uow.commit()
    return service, job


OPERATIONS = {
    # operation: (status after, event type, message)
    "start": ("running", "start", "service started"),
    "stop": ("stopped", "stop", "service stopped"),
    "restart": ("running", "restart", "service restarted"),
}


#: at most this many containers of one service are stopped at once
STOP_FAN_OUT = 8


def stop_together(runtime, container_ids: list, **stop) -> None:
    """Stop the containers ``container_ids`` all at once (at most :data:`STOP_FAN_OUT`
    at a time): a container that ignores SIGTERM makes a stop wait the whole stop
    timeout, so a service of many takes one timeout, not one per component
    (docs/decisions.md: one customer's slow engine operations never hold up others).
    Every stop is tried; the first error is raised after."""
    if len(container_ids) < 2:
        for container_id in container_ids:
            _unless_gone(runtime.stop, container_id, **stop)
        return
    with ThreadPoolExecutor(max_workers=min(len(container_ids), STOP_FAN_OUT),
                            thread_name_prefix="slipway-stop") as pool:
        futures = [pool.submit(_unless_gone, runtime.stop, container_id, **stop) for container_id in container_ids]
    failed = [exc for f in futures if (exc := f.exception()) is not None]
    if failed:
        raise failed[0]


def _unless_gone(call, container_id, **kwargs) -> None:
    """``call(container_id)``; a container the engine no longer has (a deploy's clean-up
    removed it after the list was read: the retired set, or a first container whose
    component took its kept host port back, ``core.panel.host_ports``) needs no stop or
    start, and is no failure of the operation."""
    try:
        call(container_id, **kwargs)
    except NotInEngine:
        pass


def _each_container(runtime, operation: str, containers) -> None:
    """start one after the other, dependencies first; stop all at once
    (:func:`stop_together`); restart: one container by the engine's restart, several all
    stopped at once, then started one after the other, dependencies first (a restart
    waits one stop timeout, not one per component)."""
    if operation == "restart" and len(containers) == 1:
        _unless_gone(runtime.restart, containers[0].id)
        return
    if operation in ("stop", "restart"):
        stop_together(runtime, [c.id for c in reversed(containers)])
    if operation in ("start", "restart"):
        for c in containers:
            _unless_gone(runtime.start, c.id)


def operate(uow, clock, runtime, principal, service_id: str, operation: str, *, base_domain: str | None = None,
            parse=None) -> tuple[Service, str]:
    """start, stop or restart every container of the service. The engine is called
    between short transactions, never while one holds the database.

    The route record follows the containers (``core.panel.routes``): stop and restart remove it
    before they touch a container (the host port is given up, and another tenant's
    container may get it); start and restart write it again from the host port the
    engine published now (the plan's first published port, with ``parse`` the compose
    parser and ``base_domain``), and a service without a base domain gets that upstream
    as its ``url``.

    While it touches the containers the operation holds the service's operation lease
    (``core.panel.leases``): the health check does not take containers being stopped and
    started again for a sick service."""
    with uow.reading():
        service = visible(principal, uow.services.get(service_id), service_id)
    if service.status == "deploying":
        raise Conflict("the service is deploying")
    if operation == "stop" and service.status == "stopped":
        return service, "service already stopped"
    containers = runtime.containers(service.id)
    if not containers:
        raise Conflict("the service has no containers: redeploy it")
    with uow:
        if operation in ("stop", "restart"):
            uow.routes.delete_for(service.id)
        lease = leases.operation_key(service.id)
        leases.hold_operation(uow, clock, lease)
        uow.commit()
    try:
        return _operate(uow, clock, runtime, service, operation, containers, base_domain, parse)
    finally:
        with uow:
            leases.end_operation(uow, lease)
            uow.commit()


def _operate(uow, clock, runtime, service, operation, containers, base_domain, parse):
    status_after, event_type, message = OPERATIONS[operation]
    service_id = service.id
    try:
        _each_container(runtime, operation, containers)
    except Exception as exc:
        with uow:
            record(uow, clock, service.id, event_type, "failed", f"{operation} failed: {exc}")
            uow.commit()
        raise
    target = None  # the upstream now published; None: not looked at (stop)
    if status_after == "running":
        target = _published(runtime, service, parse)
    with uow:
        current = uow.services.get(service_id, for_update=True)
        if current is None:
            raise NotFound(f"service {service_id} not found")
        if current.status == "deploying":
            raise Conflict("the service started deploying meanwhile")
        now = clock.now()
        changes = {} if status_after == "running" else NOT_CHECKED
        if target is not None:
            routes.follow(uow, current, target, base_domain, now)
            if not base_domain and target:
                changes = {**changes, "url": target}
        else:
            uow.routes.delete_for(current.id)
        service = replace(current, status=status_after, updated_at=now, **changes)
        uow.services.update(service)
        if current.status != status_after:
            uow.emit(service_status(service))
        record(uow, clock, service.id, event_type, "success", message)
        uow.commit()
    return service, message


def _published(runtime, service: Service, parse) -> str:
    """The service's upstream as the engine publishes it now, "" when unknown."""
    if parse is None:
        return ""
    try:
        plan = parse(service.compose, service.variables or {})
        return routes.upstream(plan, runtime.containers(service.id))
    except Exception:  # noqa: BLE001 (no upstream known: the record goes rather than point astray)
        return ""


#: the error of a deploy job whose service was deleted (``core.panel.deploys``)
DELETED = "service deleted"
#: how long a delete waits for the deploy jobs of its service running then (in any
#: process) to notice and end; past it the delete answers and a job still running removes
#: what it made itself once it sees the service gone (``core.panel.deploy_job``)
DELETE_JOBS_WAIT_SECONDS = 30.0
DELETE_JOBS_POLL_SECONDS = 0.2


def delete_service(uow, runtime, principal, service_id: str, *, clock=None) -> Service:
    """Remove containers, volumes, network and the route record; irreversible. Returns
    the service as its row last was (the caller may remove the images its deploys built).
    A service's previews (``core.panel.previews``) go with it, each as a delete of its own
    first (they are services of the same customer; a preview left behind would deploy a
    branch nobody tracks any more). ``runtime`` None: the rows go, the engine is not
    called (a caller without one).

    Nothing of the service runs after it: its queued deploy jobs end ``failed`` "service
    deleted" before the engine is touched (and again in the transaction that deletes the
    rows, for one queued meanwhile), so none is claimed any more; once the rows are gone
    the engine is swept once more (what a job made meanwhile), and with ``clock`` the
    delete waits (``DELETE_JOBS_WAIT_SECONDS`` at most) for the jobs that were running
    (in any process) to end: each removes what it made once it sees the row gone, so
    nothing of theirs is left when the delete answers."""
    with uow.reading():
        service = visible(principal, uow.services.get(service_id), service_id)
        previews = uow.services.preview_ids(service.id)
    for preview_id in previews:
        try:
            delete_service(uow, runtime, principal, preview_id, clock=clock)
        except NotFound:  # deleted meanwhile (its pull request closed)
            pass
    if runtime is None:
        runtime = _NO_ENGINE
    running = _end_queued_jobs(uow, service, clock)
    # also while deploying (the spec allows delete from any state): a job under way stops
    # at its next step once its cancel is set or it sees the row gone, and removes what it made
    runtime.remove_service(service.id)
    with uow.reading():
        kept = [keep_tag(r.service_id, r.number, i["component"]) for r in uow.releases.for_service(service.id)
                for i in r.images]
    for tag in kept:  # the images its releases kept
        try:
            runtime.remove_image(tag)
        except Exception:  # noqa: BLE001 (best effort: the service goes either way)
            pass
    with uow:
        # the service's row first: a PATCH holding it (claiming a domain, writing route
        # records) finishes before its rows are deleted here, so none is left dangling
        current = uow.services.get(service.id, for_update=True)
        if current is None:
            raise NotFound(f"service {service_id} not found")
        uow.deploy_jobs.fail_queued(service.id, DELETED, _now(clock, uow))  # queued since the first look
        running = sorted({*running, *uow.deploy_jobs.running_ids(service.id)})
        uow.routes.delete_for(service.id)
        uow.custom_domains.delete_for(service.id)
        uow.releases.delete_for(service.id)
        uow.services.delete(service.id)
        uow.emit(service_status(service, "deleted"))
        uow.commit()
    _await_jobs(uow, clock, running)
    try:  # what a job made between the removal above and the rows going (it ends without seeing it)
        runtime.remove_service(service.id)
    except Exception:  # noqa: BLE001 (the rows are gone; what is left carries the label of no service)
        pass
    # the last of the customer's services on its network takes the network along (also one
    # whose customer_network was turned off without a redeploy: its containers were on it)
    networks.drop_if_unused(uow, runtime, service.customer_id)
    return current


def _now(clock, uow):
    return clock.now() if clock is not None else datetime.now(tz=timezone.utc)


def _end_queued_jobs(uow, service: Service, clock) -> list[str]:
    """End the service's queued deploy jobs ``failed`` (:data:`DELETED`) under its row
    lock; the ids of those running (in any process), which the delete waits for."""
    with uow:
        if uow.services.get(service.id, for_update=True) is None:
            raise NotFound(f"service {service.id} not found")
        uow.deploy_jobs.fail_queued(service.id, DELETED, _now(clock, uow))
        running = uow.deploy_jobs.running_ids(service.id)
        uow.commit()
    return running


def _await_jobs(uow, clock, job_ids) -> None:
    """Poll until none of ``job_ids`` is ``running`` any more, for
    ``DELETE_JOBS_WAIT_SECONDS`` of ``clock`` at most (no ``clock``: no wait)."""
    if clock is None or not job_ids:
        return
    deadline = clock.monotonic() + DELETE_JOBS_WAIT_SECONDS
    while True:
        with uow.reading():
            left = [job_id for job_id in job_ids
                    if (job := uow.deploy_jobs.get(job_id)) is not None and job.state == "running"]
        if not left or clock.monotonic() >= deadline:
            return
        clock.sleep(DELETE_JOBS_POLL_SECONDS)


class _NoEngine:
    """What a delete without a runtime calls: nothing is there to remove."""

    def remove_service(self, service_id: str) -> None:
        pass

    def remove_image(self, tag: str) -> None:
        pass

    def remove_network(self, name: str) -> None:
        pass


_NO_ENGINE = _NoEngine()


#: what PATCH /api/services/{id} changes besides the source fields of the service's method
#: (``core.panel.capabilities.patched_fields``); ``variables``, ``secret_variables``,
#: ``compose`` and ``deploy_key_id`` belong to the deploy methods whose create request has
#: them (``DeployMethod.request_schema``); ``auto_deploy`` and the pinned ssh host key to
#: those that deploy on push and fetch their source
PATCHABLE = ("variables", secret_variables.FIELD, "custom_domains", "compose", "customer_network",
             "deploy_key_id", "auto_deploy", host_keys.FIELD) + PREVIEW_SWITCHES


def _from_fork(uow, preview, method) -> bool:
    """Whether ``preview`` (a service with ``preview_of``) deploys another repository than
    its parent's: a fork's pull request (``core.panel.previews``)."""
    with uow.reading():
        parent = uow.services.get(preview.preview_of)
    if parent is None:
        return True
    name = capabilities.repository_field(method)
    return name is None or preview.source.get(name) != parent.source.get(name)


def patch_service(uow, clock, principal, service_id: str, body: dict, methods: dict, catalog: dict, *,
                  base_domain: str | None = None, quota: Quota = DEFAULT_QUOTA, reserved_hosts=()) -> Service:
    """Change a service's settings in one transaction. ``variables`` (the whole map),
    ``compose`` and the source fields of the service's method that a PATCH takes
    (``core.panel.capabilities.patched_fields``: a git service's ``git_branch``, kept in
    ``Service.source``) are validated as create validates them (the deploy
    method's ``plan``; a compose or variables that would take the customer past a limit
    at the next redeploy: 409) and stored: they apply at the next redeploy. A secret
    variable sent back as ``***`` or left out of ``variables`` keeps its value
    (``core.panel.secrets``). ``customer_network`` (a boolean) applies at the next
    redeploy too (``core.panel.networks``); ``previews`` and ``previews_from_forks``
    (booleans, services of a method with ``previews`` only) apply to the next pull-request event
    (``core.panel.previews``). ``custom_domains`` (the whole list) apply at once: names dropped lose their route
    records, new ones get records to the service's current upstream. 409 for a name
    another service has (also when two requests race for it: the database decides) and
    while the service is deploying. A refused request changes nothing. ``reserved_hosts``:
    the hosts Slipway answers on or talks to, refused as custom domains with the names
    under them (``core.panel.domains``)."""
    principal.require("services:deploy")
    with uow.reading():
        found = visible(principal, uow.services.get(service_id), service_id)
    body = body if isinstance(body, dict) else {}
    if not body:
        raise Invalid("nothing to change", fields={"body": "give at least one of " + ", ".join(PATCHABLE)})
    method = methods.get(found.deploy_method)
    sourced = capabilities.patched_fields(method)  # the method's own fields a PATCH changes (git_branch)
    patchable = PATCHABLE + sourced
    problems = {name: "not a field PATCH changes (" + ", ".join(patchable) + ")" for name in body
                if name not in patchable}
    allowed = set((getattr(method, "request_schema", None) or {}).get("properties", {}))
    problems.update({name: f"{found.deploy_method} services have no {name}" for name in body
                     if name in PATCHABLE and name not in ("custom_domains", "customer_network", "auto_deploy",
                                                           host_keys.FIELD, secret_variables.FIELD)
                     + PREVIEW_SWITCHES and name not in allowed})
    if secret_variables.FIELD in body and "variables" not in allowed:
        problems[secret_variables.FIELD] = f"{found.deploy_method} services have no variables"
    if "customer_network" in body and not isinstance(body["customer_network"], bool):
        problems["customer_network"] = "must be true or false"
    elif body.get("customer_network") is True and found.preview_of is not None and _from_fork(uow, found, method):
        problems["customer_network"] = ("a preview of a pull request from a fork runs a stranger's code: "
                                        "it never joins the customer network")
    if body.get("deploy_key_id") is not None and not isinstance(body["deploy_key_id"], str):
        problems["deploy_key_id"] = "a deploy key's id (dk_...) or null"
    if "auto_deploy" in body:
        if not capabilities.deploys_on_push(method):
            problems["auto_deploy"] = (f"{found.deploy_method} services are not deployed on push (only those of "
                                       f"{capabilities.those_that(methods, capabilities.deploys_on_push)} are)")
        elif not isinstance(body["auto_deploy"], bool):
            problems["auto_deploy"] = "must be true or false"
    if host_keys.FIELD in body:
        if not capabilities.fetches_source(method):
            problems[host_keys.FIELD] = f"{found.deploy_method} services clone no repository: they pin no host key"
        else:
            problems.update(host_keys.check_patch(body))
    problems.update(_switch_problems(body, method, found.deploy_method, found.preview_of))
    if problems:
        raise Invalid("invalid change", fields=problems)
    if turns_previews_on(body):
        require_preview_permissions(principal, "turning previews on")
    wanted = domains.check(body["custom_domains"], base_domain, reserved_hosts) if "custom_domains" in body else None
    changes, footprint = {}, None
    settings = {name: body[name] for name in ("variables", "compose") + sourced if name in body}
    if "variables" in settings:  # a secret variable sent back as *** (or left out) keeps its value
        settings["variables"] = secret_variables.kept(
            settings["variables"], found.variables, found.secrets,
            secret_variables.still_secret(found.secrets, body.get(secret_variables.FIELD),
                                          secret_variables.template_secrets(catalog, found.template_id)))
    elif secret_variables.FIELD in body:  # which are secret changes: the variables as they are, planned again
        settings["variables"] = dict(found.variables or {})
    if "customer_network" in body:
        changes["customer_network"] = body["customer_network"]
    changes.update({name: body[name] for name in PREVIEW_SWITCHES if name in body})
    if "auto_deploy" in body:  # applies to the next push
        changes["auto_deploy"] = body["auto_deploy"]
    if host_keys.FIELD in body:  # null (checked above): the next clone pins the key it is shown
        changes["ssh_host_key"] = None
    if settings:
        request = {**found.source, "template_id": found.template_id, "compose": found.compose,
                   "variables": found.variables or {}, "customer_id": found.customer_id, "name": found.name,
                   "deploy_method": found.deploy_method}
        request = {k: v for k, v in request.items() if v is not None}
        request.update(settings)
        assert method is not None  # (else its fields were problems above)
        plan = method.plan(request, catalog)
        _images_allowed(plan, found.id, method)
        if any(name in settings for name in sourced):  # the method's fields, as its plan read them
            changes["source"] = capabilities.source_of(method, {**found.source, **settings}, {
                name: value for name, value in (plan.source or {}).items() if name in settings})
        if "compose" in settings or "variables" in settings:
            hidden = secret_variables.marked(plan.secrets, body.get(secret_variables.FIELD), plan.variables,
                                             had=found.secrets)
            if set(found.secrets) - set(hidden) & set(plan.variables or {}):
                # a secret made plain shows its value in every answer: only to whoever may read it
                principal.require("services:secrets")
            changes.update(variables=dict(plan.variables or {}), secrets=hidden)
            if plan.compose or "compose" in settings:  # a git or ai service keeps the compose its source gave
                changes["compose"] = plan.compose
            footprint = quota.footprint(plan.components) if plan.components else None
    with uow:
        # the customer's row first, then the service's: the order create and redeploy take
        customer = uow.panel_customers.get(found.customer_id, for_update=True) if footprint else None
        service = visible(principal, uow.services.get(service_id, for_update=True), service_id)
        if service.status == "deploying":
            raise Conflict("the service is deploying")
        if "deploy_key_id" in body:  # a key of the service's customer (its row locked), or null
            changes["deploy_key_id"] = deploy_keys.check_for_service(uow, body["deploy_key_id"], service.customer_id)
        if footprint is not None and customer is not None:  # what the next redeploy will count
            reserve(uow, quota, customer, footprint, new_service=False,
                    replacing=Footprint(service.memory_mb, service.millicpus, service.containers))
        now = clock.now()
        if wanted is not None:
            had = set(service.custom_domains)
            target = routes.current_target(uow, service, base_domain)
            uow.custom_domains.release(service.id, had - set(wanted))
            taken = [name for name in wanted
                     if name not in had and uow.custom_domains.claim(name, service.id, now) != service.id]
            if taken:
                raise Conflict("custom domain " + ", ".join(taken) + (" is" if len(taken) == 1 else " are")
                               + " another service's")
            if target:
                routes.follow(uow, service, target, base_domain, now)
            changes["custom_domains"] = tuple(sorted(wanted))
        service = replace(service, updated_at=now, **changes)
        uow.services.update(service)
        uow.commit()
    return service


def list_events(uow, principal, service_id: str, *, page: int, per_page: int):
    with uow:
        visible(principal, uow.services.get(service_id), service_id)
        return uow.service_events.page(service_id, page=page, per_page=per_page)
