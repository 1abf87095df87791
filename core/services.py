"""Panel services: create (a deploy job), lifecycle, events; the rules of the status
machine. The container work itself runs in ``core.deploys`` (jobs) and through the
runtime port."""
from __future__ import annotations

import re
import secrets
from dataclasses import dataclass, replace
from datetime import datetime

from core.errors import Conflict, Forbidden, Invalid, NotFound
from core.events import service_status

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
    git_url: str | None = None  # git deploys: the repository (credentials included; redact when shown)
    git_branch: str | None = None  # None: the remote's default branch
    ai_url: str | None = None  # ai deploys: the repository analysed
    commit: str | None = None  # git and ai deploys: the commit last deployed


@dataclass(frozen=True)
class DeployJob:
    id: str
    service_id: str
    kind: str  # deploy or redeploy
    state: str  # queued, running, succeeded, failed
    created_at: datetime
    updated_at: datetime
    step: str = ""
    error: str | None = None


@dataclass(frozen=True)
class ServiceEvent:
    id: int | None
    service_id: str
    type: str  # deploy, redeploy, start, stop, restart, health
    status: str  # started, success, failed, healthy, unhealthy
    message: str
    timestamp: datetime


# health is checked on running services only: one that leaves ``running`` is not healthy
# any more, nor unhealthy, until it runs again and is checked
NOT_CHECKED = {"health_status": "unknown", "health_failures": 0}


def new_id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(8)}"


def visible(principal, service: Service | None, service_id: str) -> Service:
    """404 for a missing service and for one a customer key may not see."""
    if service is None or (principal.customer_id is not None and service.customer_id != principal.customer_id):
        raise NotFound(f"service {service_id} not found")
    return service


def record(uow, clock, service_id: str, type: str, status: str, message: str) -> ServiceEvent:
    return uow.service_events.add(ServiceEvent(None, service_id, type, status, message, clock.now()))


def create_service(uow, clock, principal, request: dict, methods: dict, catalog: dict):
    """Validate, plan, store the service as ``deploying`` and queue its deploy job."""
    principal.require("services:deploy")
    problems = {}
    name = request.get("name", "")
    if not _NAME.match(name):
        problems["name"] = "1-63 lower-case letters, digits and '-', starting and ending with a letter or digit"
    method = methods.get(request.get("deploy_method"))
    if method is None:
        problems["deploy_method"] = "must be one of " + ", ".join(sorted(methods))
    if problems:
        raise Invalid("invalid service", fields=problems)
    if principal.customer_id is not None and request["customer_id"] != principal.customer_id:
        raise Forbidden("a customer key creates services for its own customer only")
    plan = method.plan(request, catalog)
    now = clock.now()
    service = Service(id=new_id("svc"), name=name, customer_id=request["customer_id"],
                      deploy_method=method.name, status="deploying", created_at=now, updated_at=now,
                      template_id=plan.template_id, compose=plan.compose, variables=plan.variables,
                      git_url=plan.source.get("git_url"), git_branch=plan.source.get("git_branch"),
                      ai_url=plan.source.get("ai_url"))
    with uow:
        if uow.panel_customers.get(service.customer_id) is None:
            raise Invalid("invalid service", fields={"customer_id": "no such customer"})
        if uow.services.by_name(name) is not None:
            raise Conflict(f"a service named {name!r} already exists")
        uow.services.add(service)
        job = _queue(uow, clock, service, "deploy")
        uow.commit()
    return service, job


def _queue(uow, clock, service: Service, kind: str) -> DeployJob:
    """In the caller's transaction: a queued ``kind`` job for ``service`` (now
    ``deploying``), announced and in its timeline."""
    now = clock.now()
    job = DeployJob(id=new_id("job"), service_id=service.id, kind=kind, state="queued", created_at=now,
                    updated_at=now)
    uow.emit(service_status(service))
    uow.deploy_jobs.add(job)
    record(uow, clock, service.id, kind, "started", f"{kind} job {job.id} queued")
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


def redeploy(uow, clock, principal, service_id: str) -> tuple[Service, DeployJob]:
    principal.require("services:deploy")
    with uow:
        service = visible(principal, uow.services.get(service_id, for_update=True), service_id)
        if service.status == "deploying":
            raise Conflict("the service is deploying")
        service = replace(service, status="deploying", updated_at=clock.now())
        uow.services.update(service)
        job = _queue(uow, clock, service, "redeploy")
        uow.commit()
    return service, job


OPERATIONS = {
    # operation: (status after, event type, message)
    "start": ("running", "start", "service started"),
    "stop": ("stopped", "stop", "service stopped"),
    "restart": ("running", "restart", "service restarted"),
}


def operate(uow, clock, runtime, principal, service_id: str, operation: str) -> tuple[Service, str]:
    """start, stop or restart every container of the service. The engine is called
    between two short transactions, never while one holds the database."""
    status_after, event_type, message = OPERATIONS[operation]
    with uow.reading():
        service = visible(principal, uow.services.get(service_id), service_id)
    if service.status == "deploying":
        raise Conflict("the service is deploying")
    if operation == "stop" and service.status == "stopped":
        return service, "service already stopped"
    containers = runtime.containers(service.id)
    if not containers:
        raise Conflict("the service has no containers: redeploy it")
    try:
        for c in (reversed(containers) if operation == "stop" else containers):
            getattr(runtime, operation)(c.id)
    except Exception as exc:
        with uow:
            record(uow, clock, service.id, event_type, "failed", f"{operation} failed: {exc}")
            uow.commit()
        raise
    with uow:
        current = uow.services.get(service_id, for_update=True)
        if current is None:
            raise NotFound(f"service {service_id} not found")
        if current.status == "deploying":
            raise Conflict("the service started deploying meanwhile")
        service = replace(current, status=status_after, updated_at=clock.now(),
                          **({} if status_after == "running" else NOT_CHECKED))
        uow.services.update(service)
        if current.status != status_after:
            uow.emit(service_status(service))
        record(uow, clock, service.id, event_type, "success", message)
        uow.commit()
    return service, message


def delete_service(uow, runtime, principal, service_id: str) -> Service:
    """Remove containers, volumes, network and the route record; irreversible. Returns
    the service as it was (the caller may remove the images its deploys built)."""
    with uow.reading():
        service = visible(principal, uow.services.get(service_id), service_id)
    # also while deploying (the spec allows delete from any state): the job notices the
    # service is gone when it ends and removes whatever it made after this
    runtime.remove_service(service.id)
    with uow:
        uow.routes.delete_for(service.id)
        uow.services.delete(service.id)
        uow.emit(service_status(service, "deleted"))
        uow.commit()
    return service


def list_events(uow, principal, service_id: str, *, page: int, per_page: int):
    with uow:
        visible(principal, uow.services.get(service_id), service_id)
        return uow.service_events.page(service_id, page=page, per_page=per_page)
