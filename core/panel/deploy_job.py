"""A deploy job as a sequence of named steps over one context: deploy, redeploy or roll
back a service through the runtime port. Runs in worker threads; every step is persisted,
so a job interrupted by a restart is found and run again (idempotently) on start-up.

:class:`Deployer` holds what every job of a worker shares (clock, runtime, deploy
methods, :class:`DeploySettings`, the progress reporter, the route sync); :func:`run_job`
opens a :class:`DeployContext` for one job and runs :data:`STEPS` over it in order:

``check_target`` (a rollback's release still exists), ``prepare_source`` (the method
clones and builds; the compose it answers is counted against the customer's limits),
``read_plan`` (core's compose parser, :func:`core.panel.compose.parse_compose`, with the
operator's ``SLIPWAY_HOST_PORTS``), ``check_images`` (pulls, or a rollback's kept
images), ``clear_slate`` (a repeated job's own containers go; a job that cannot be
health-gated stops the old set first), ``create_network``, ``create_volumes``,
``start_containers`` (each published port asking for the host port its component kept),
``wait_healthy`` (running, healthy, then still running after the settle window),
``take_back_ports`` (a gated job's new containers move onto the host ports the old set
held), ``switch_release`` (one transaction: release, route record, status, the host ports
kept from now on).
A step that raises ends the job failed (:func:`fail_gated` when the old set keeps
serving, :func:`fail_job` otherwise); after a success :func:`retire_old_release` waits
for the proxy and the drain and removes the old set.

Every wait (health polls, settle window, drain, a delete's grace) goes through the clock
port (``clock.monotonic()``, ``clock.sleep()``), so core's unit tests drive them with a
clock that moves only when told.

A job can be cancelled (its service was deleted, or a cancel was asked for): the worker
sets the job's ``cancel`` event, which the source preparation and the image pulls are
handed and which the steps look at between steps and while they wait; the job then
removes what it made and ends ``cancelled`` (or ``failed`` "service deleted")."""
from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from core.panel import containerfiles, networks, routes
from core.panel.compose import DEFAULT_HOST_PORTS, parse_compose
from core.panel.containerfiles import engine_local
from core.panel.containers import (COMPONENT_LABEL, JOB_LABEL, SERVICE_LABEL, TAKE_BACK_SUFFIX, ContainerSpec,
                                   NotInEngine, keep_tag)
from core.panel.customers import DEFAULT_QUOTA, Footprint, Quota, reserve
from core.panel.deploys import (CANCELLED, DELETED, KILLED_EXIT_CODES, ContainersGone, ContainersKilled,
                                JobCancelled, cancel_reason, exit_report, health_of, job_suffix, resource_names)
from core.panel.events import deploy_progress, service_status
from core.panel.pushes import OLD_COMMIT, known_to, running_release
from core.panel.releases import keep_images, new_release
from core.panel.services import NOT_CHECKED, record, stop_together

POLL_SECONDS = 0.3  # between two looks at the containers while waiting
STOP_TIMEOUT = 10  # seconds an old container gets to stop gracefully after the switch
DELETE_GRACE_SECONDS = 3.0  # how long a job whose containers vanished waits for the row to go
#: ... and how long while none of its containers is left in the engine: a delete removes
#: them first, then the rest of the service (volumes, network, kept images), then the row
DELETE_REMOVAL_SECONDS = 30.0


def _nothing(*_args) -> None:
    return None


@dataclass(frozen=True, kw_only=True)
class DeploySettings:
    """The operator's rules for every deploy job. The three times are the operator's
    settings, passed in (their defaults are the app's declarations, not core's): how long
    new containers get to run and be healthy, how long they must then keep running, and
    how long after a health-gated switch the old set still serves before it stops."""

    base_domain: str | None = None  # SLIPWAY_BASE_DOMAIN: a service's URL is https://<name>.<base_domain>
    health_timeout: float  # SLIPWAY_DEPLOY_HEALTH_TIMEOUT
    settle_seconds: float  # SLIPWAY_DEPLOY_SETTLE
    drain_seconds: float  # SLIPWAY_DEPLOY_DRAIN
    poll_seconds: float = POLL_SECONDS
    registry_allow_private: bool = False  # SLIPWAY_REGISTRY_ALLOW_PRIVATE
    host_ports: tuple = DEFAULT_HOST_PORTS  # SLIPWAY_HOST_PORTS, for every deploy method
    quota: Quota = DEFAULT_QUOTA  # customer limits, checked when a job's source reveals its compose

    def parse(self, text: str, variables: dict | None = None):
        """Core's compose parser with the operator's host-port range."""
        return parse_compose(text, variables or {}, host_ports=self.host_ports)


@dataclass(frozen=True)
class Deployer:
    """What every deploy job of a worker shares. ``methods``: deploy methods by name (their
    ``prepare`` is the ``source`` step); ``progress(job, step, message, percent)``
    announces progress; ``routes_changed()`` returns once the reverse proxy serves the
    route records (after a switch); ``resolver`` looks registry hosts up
    (:class:`core.addresses.Resolver`; None: a job that must look one up fails saying so).
    ``settings``: the operator's, always passed in."""

    clock: Any
    runtime: Any
    settings: DeploySettings
    methods: Mapping = field(default_factory=dict)
    progress: Callable = _nothing
    routes_changed: Callable = _nothing
    resolver: Any = None

    def run(self, uow, job, *, workdir: str | None = None, cancel=None) -> None:
        run_job(uow, self, job, workdir=workdir, cancel=cancel)


@dataclass
class DeployContext:
    """One job on its way: what it was given, and what its steps found and made."""

    uow: Any
    deployer: Deployer
    job: Any
    workdir: str | None = None  # an empty directory of the job's own (None: no source step)
    cancel: Any = None  # a threading.Event-like object, with ``reason``
    service: Any = None  # as the job deploys it (its compose, variables and commit)
    target: Any = None  # the release a rollback runs
    gated: bool = False  # the old set keeps serving until the switch
    note: str = ""  # what the source step said (for the timeline)
    stale: tuple = ()  # images of an earlier build this one no longer uses
    plan: Any = None
    images: list | None = None  # the release's image records
    serving: list = field(default_factory=list)  # the old set a gated job retires after its switch
    removed: list = field(default_factory=list)  # the old set an ungated job removed before it started
    states: list = field(default_factory=list)  # the new set, running and healthy
    release: Any = None
    ended: bool = False  # a step ended the job itself (its service was deleted meanwhile)
    started: int = 0  # containers of the new set the engine has started
    ancestry: tuple = ()  # the ancestors of the commit the source step fetched (kept with the release)
    branch: str | None = None  # the branch the source step cloned (kept with the release)
    #: the host ports the service's components kept from their last deploy,
    #: ``{component: {container port: host port}}`` (``uow.services.host_ports``)
    kept: dict = field(default_factory=dict)
    given_up: list = field(default_factory=list)  # old containers the take-back stopped (started again on a failure)
    replaced: list = field(default_factory=list)  # new containers the take-back replaced (retired with the old set)
    #: the service's url and route records before the take-back pointed them at the new set
    #: (put back when the job fails after that); None until then
    previous: tuple | None = None
    #: the private half of the service's deploy key (``core.panel.deploy_keys.PrivateKey``,
    #: whose repr hides it), read by the source step for its ssh clone and dropped after it
    deploy_key: Any = None

    @property
    def clock(self):
        return self.deployer.clock

    @property
    def runtime(self):
        return self.deployer.runtime

    @property
    def settings(self) -> DeploySettings:
        return self.deployer.settings

    def check(self) -> None:
        """Raise :class:`JobCancelled` once the job's ``cancel`` is set."""
        reason = cancel_reason(self.cancel)
        if reason is not None:
            raise JobCancelled(reason)

    def enter(self, step: str, message: str, percent: int) -> None:
        """Persist the job's current step and announce it (unless cancelled). A service
        deleted meanwhile (by any process: its row is gone) cancels the job here, "service
        deleted", so each step that makes something in the engine is followed by a look at
        the row before the next one, and the job removes what it made."""
        self.check()
        with self.uow:
            alive = self.uow.services.existing({self.job.service_id})
            if alive:
                self.uow.deploy_jobs.set_step(self.job.id, step, self.clock.now())
            self.uow.commit()
        if not alive:
            self.cancel = _cancelled_as(self.cancel, DELETED)
            self.check()
        self.progress(step, message, percent)

    def progress(self, step: str, message: str, percent: int) -> None:
        self.deployer.progress(self.job, step, message, percent)


# --- the steps, in order -------------------------------------------------------------------


def check_target(ctx: DeployContext) -> None:
    """A rollback needs its release, of this service."""
    if ctx.job.kind == "rollback" and (ctx.target is None or ctx.target.service_id != ctx.service.id):
        raise RuntimeError("the release to roll back to is gone")


def prepare_source(ctx: DeployContext) -> None:
    """Step ``source``: the service's method fetches and builds (git, ai) and answers the
    compose to run, kept on the service once counted against the customer's limits. A
    rollback, a method without a source, or a job without a work directory skips it."""
    method = (ctx.deployer.methods or {}).get(ctx.service.deploy_method)
    if ctx.target is not None or method is None or ctx.workdir is None:
        return
    ctx.enter("source", "preparing the source", 2)
    if ctx.service.deploy_key_id and ctx.deploy_key is None:  # read here: a key that does not decrypt fails the job
        with ctx.uow.reading():
            ctx.deploy_key = ctx.uow.deploy_keys.private_key(ctx.service.deploy_key_id)
        if ctx.deploy_key is None:
            raise RuntimeError(f"the service's deploy key {ctx.service.deploy_key_id} no longer exists")
    # only a service naming a key passes one, only a push's job a commit: methods without a
    # source take no such argument
    extra = {"deploy_key": ctx.deploy_key} if ctx.deploy_key is not None else {}
    wanted = _pushed_commits(ctx)  # a push's commits (core.panel.pushes)
    if wanted:
        extra["commit"] = wanted[-1]
    if len(wanted) > 1:
        extra["commits"] = wanted
    try:
        prepared = method.prepare(ctx.service, ctx.runtime, ctx.workdir,
                                  lambda message: ctx.progress("source", message, 8), cancel=ctx.cancel, **extra)
    finally:
        ctx.deploy_key = None  # held no longer than the clone needs it
    if prepared is not None:  # before the look at the cancel: a cancelled job removes what it built
        ctx.note, ctx.stale = prepared.note, tuple(prepared.stale_images or ())
        ctx.ancestry = tuple(getattr(prepared, "ancestry", ()) or ())
        ctx.branch = getattr(prepared, "branch", None)
        ctx.service = replace(ctx.service, compose=prepared.compose, commit=prepared.commit or ctx.service.commit,
                              ssh_host_key=getattr(prepared, "ssh_host_key", None) or ctx.service.ssh_host_key)
    ctx.check()
    if prepared is not None:
        _keep_source(ctx.uow, ctx.settings, ctx.service)


class OldCommit(Exception):
    """A push deploy whose every commit is the release that runs or one of its ancestors."""


def _pushed_commits(ctx: DeployContext) -> tuple:
    """The commits a push deploy may deploy: those pushed into it (in the order they
    came) less those the release running now knows (its own and its recorded ancestors:
    a job queued behind another that deployed something newer). :class:`OldCommit` when
    none is left; () for a job that is not a push's."""
    job = ctx.job
    pushed = tuple(getattr(job, "commits", ()) or ()) or ((job.commit,) if getattr(job, "commit", None) else ())
    if not pushed:
        return ()
    with ctx.uow.reading():
        release = running_release(ctx.uow, ctx.service)
        left = tuple(c for c in pushed if not known_to(ctx.uow, release, c))
    if not left:
        raise OldCommit(f"{OLD_COMMIT}: {', '.join(c[:7] for c in pushed)}: the commit of release "
                        f"{release.number} or its ancestors")
    return left


def read_plan(ctx: DeployContext) -> None:
    """Step ``plan``: the compose (a rollback's release's, with its variables) read by
    core's parser; only images the service may use. A method whose variables are the
    containers' environment (git, ai) has them put in every component's."""
    ctx.enter("plan", "reading the compose definition", 5)
    target, service = ctx.target, ctx.service
    if target is not None:
        ctx.service = service = replace(service, compose=target.compose, variables=dict(target.variables or {}),
                                        secrets=tuple(target.secrets),
                                        commit=target.commit if target.commit is not None else service.commit)
    ctx.plan = ctx.settings.parse(service.compose, service.variables or {})
    method = (ctx.deployer.methods or {}).get(service.deploy_method)
    if getattr(method, "variables_as_environment", False):
        ctx.plan = with_environment(ctx.plan, service.variables)
    _own_builds_only(ctx.plan, service.id)


def with_environment(plan, variables: dict | None):
    """``plan`` with ``variables`` in every component's environment, over what its compose
    sets (the git and ai methods: ``DeployMethod.variables_as_environment``)."""
    if not variables:
        return plan
    return replace(plan, components=tuple(replace(c, environment={**(c.environment or {}), **variables})
                                          for c in plan.components))


def check_images(ctx: DeployContext) -> None:
    """Step ``images``: registries checked and images pulled (a rollback runs its
    release's kept images instead, pulling nothing)."""
    ctx.enter("images", "checking images", 15)
    allow_private = ctx.settings.registry_allow_private
    resolver = ctx.deployer.resolver or _NO_RESOLVER
    refused = None if ctx.target is not None or allow_private else registries_refusal(ctx.plan, resolver=resolver)
    if refused:  # checked at create and PATCH too; a name may resolve elsewhere now
        raise RuntimeError(refused)
    if ctx.target is not None:
        ctx.plan, ctx.images = _kept_images(ctx.runtime, ctx.plan, ctx.target)
        return
    for image in sorted({c.image for c in ctx.plan.components}):
        try:
            kept = _image(ctx.runtime, image, refresh=ctx.job.kind == "redeploy", cancel=ctx.cancel,
                          strict=not allow_private, resolver=resolver)
        except Exception as exc:  # the engine's or the check's words, and what chose the image
            if (ctx.cancel is None or not ctx.cancel.is_set()) and len(exc.args) == 1 \
                    and isinstance(exc.args[0], str):
                exc.args = (f"{exc.args[0]} ({image_origin(ctx.service, ctx.plan, image)})",)
            raise
        ctx.check()
        if kept:
            ctx.progress("images", kept, 20)


def clear_slate(ctx: DeployContext) -> None:
    """A resumed or repeated job starts from a clean slate of its own containers. Without
    a gate (nothing serves, a fixed host port that cannot be held twice, or a database
    whose volume must have one server: :func:`_single_writer`) the old set
    goes first, its route record before it (the host ports it held are given up);
    volumes stay."""
    runtime, service = ctx.runtime, ctx.service
    for state in runtime.containers(service.id):
        if state.labels.get(JOB_LABEL) == ctx.job.id:
            runtime.remove_container(state.id)
    ctx.serving = runtime.containers(service.id)
    ctx.gated = ctx.gated and any(s.running for s in ctx.serving) and not _fixed_ports(ctx.plan) \
        and not _single_writer(ctx.plan)
    if ctx.gated:
        return
    with ctx.uow:
        ctx.uow.routes.delete_for(service.id)
        ctx.uow.commit()
    for state in ctx.serving:
        runtime.remove_container(state.id)
    ctx.removed, ctx.serving = ctx.serving, []


def create_network(ctx: DeployContext) -> None:
    """Step ``network``: the job's own network (``slw-<service id>-<job suffix>``), and
    the customer's network when the service joins it (``core.panel.networks``)."""
    ctx.enter("network", "creating the network", 30)
    ctx.runtime.create_network(resource_names(ctx.service, job=ctx.job),
                               {SERVICE_LABEL: ctx.service.id, JOB_LABEL: ctx.job.id})
    networks.ensure(ctx.runtime, ctx.service)


def create_volumes(ctx: DeployContext) -> None:
    """Step ``volumes``: the plan's named volumes (shared by every release)."""
    ctx.enter("volumes", "creating volumes", 40)
    for volume in ctx.plan.volumes:
        ctx.runtime.create_volume(resource_names(ctx.service, volume=volume), {SERVICE_LABEL: ctx.service.id})


def start_containers(ctx: DeployContext) -> None:
    """Step ``containers``: one container per component, in start order, labelled with
    the job (beside the serving set of a gated job). A container the engine no longer has
    by the time it starts (:class:`NotInEngine`) is :class:`ContainersGone`: most often a
    delete of the service removed it, and the job ends as the deleted service's."""
    components = ctx.plan.components
    for i, component in enumerate(components):
        ctx.enter("containers", f"starting {component.name}", 45 + int(35 * i / max(1, len(components))))
        ports = tuple(replace(port, prefer=ctx.kept.get(component.name, {}).get(port.container_port))
                      if port.host_port is None else port for port in component.ports)
        try:
            ctx.runtime.run(_container_spec(ctx, component, ports))
        except NotInEngine as exc:
            raise ContainersGone(str(exc)) from exc
        ctx.started += 1


def _container_spec(ctx: DeployContext, component, ports: tuple, suffix: str = "") -> ContainerSpec:
    """The container of ``component`` in the job's set (named with ``suffix``), publishing ``ports``."""
    service, job = ctx.service, ctx.job
    return ContainerSpec(
        name=resource_names(service, component=component.name, job=job) + suffix, image=component.image,
        labels={SERVICE_LABEL: service.id, COMPONENT_LABEL: component.name, JOB_LABEL: job.id},
        command=component.command, environment=component.environment, ports=ports,
        volumes=tuple((resource_names(service, volume=v), path) for v, path in component.volumes),
        network=resource_names(service, job=job), aliases=(component.name,), healthcheck=component.healthcheck,
        cpus=component.cpus, memory_mb=component.memory_mb,
        networks=networks.attachments(service, ctx.plan, component))


def wait_healthy(ctx: DeployContext) -> None:
    """Step ``wait``: every new container runs and is healthy within the health timeout,
    and still runs at the end of the settle window (:func:`wait_for_containers`)."""
    ctx.enter("wait", "waiting for the containers", 85)
    settings = ctx.settings
    ctx.states = wait_for_containers(ctx.clock, ctx.runtime, ctx.service.id, len(ctx.plan.components),
                                     settings.health_timeout, ctx.cancel, settings.settle_seconds,
                                     job_id=ctx.job.id, poll=settings.poll_seconds)
    if ctx.images is None:
        ctx.images = [{"component": c.name, "image": c.image, "image_id": ctx.runtime.image_id(c.image)}
                      for c in ctx.plan.components]


def take_back_ports(ctx: DeployContext) -> None:
    """Step ``ports``: a gated job's new set started beside the old one, so a component
    whose old container holds the host port it kept got another one. Before the switch
    (the service is still ``deploying``: no start, stop or restart runs meanwhile) and
    with no request left unanswered: the service's url and route records point at the
    new set first (:func:`_serve_from_new_set`: the proxy serves them, the drain passes),
    then each such component's old container is stopped and a container of the new
    release started on the kept ports; once it runs and is healthy (the settle window
    too), the switch points everything at it and the one on the other port is retired
    with the old set. Should that fail (the port was taken meanwhile, the container does
    not come up), the one on the other port stays, and the switch says which port moved."""
    if not ctx.gated or not ctx.kept:
        return
    started = {s.labels.get(COMPONENT_LABEL): s for s in ctx.states}
    behind = [c for c in ctx.plan.components if _moved(c, started.get(c.name), ctx.kept.get(c.name))]
    if not behind:
        return
    ctx.enter("ports", "taking the kept host ports back", 92)
    _serve_from_new_set(ctx)
    for component in behind:
        ctx.check()
        _take_back(ctx, component, started[component.name])


def _serve_from_new_set(ctx: DeployContext) -> None:
    """One transaction: the url (without a base domain, it is the upstream) and the route
    records point at the new set, healthy on its other ports, what they pointed at kept
    in ``ctx.previous``; then the proxy serves them (``routes_changed``) and the drain
    passes, so no request still goes to an old container when it stops."""
    uow, clock, service, settings = ctx.uow, ctx.clock, ctx.service, ctx.settings
    upstream = routes.upstream(ctx.plan, ctx.states)
    with uow:
        current = uow.services.get(service.id, for_update=True)
        if current is not None:
            ctx.previous = (current.url, list(uow.routes.for_service(service.id)))
            routes.follow(uow, current, upstream, settings.base_domain, clock.now())
            if not settings.base_domain:
                uow.services.update(replace(current, url=upstream))
        uow.commit()
    try:
        ctx.deployer.routes_changed()
    except Exception:  # noqa: BLE001 (the proxy catches up on its own loop; the drain still holds)
        pass
    clock.sleep(max(0.0, settings.drain_seconds))


def _moved(component, state, kept) -> dict:
    """``{container port: (kept host port, host port now)}`` of ``component``'s published
    ports (those compose gave no host port) whose host port differs from the kept one."""
    if state is None or not kept:
        return {}
    return {p.container_port: (kept[p.container_port], state.ports.get(p.container_port))
            for p in component.ports if p.host_port is None and p.container_port in kept
            and state.ports.get(p.container_port) != kept[p.container_port]}


def _take_back(ctx: DeployContext, component, temporary) -> None:
    """One component's take-back (:func:`take_back_ports`)."""
    runtime, kept = ctx.runtime, ctx.kept[component.name]
    holders = [s for s in ctx.serving if s.labels.get(COMPONENT_LABEL) == component.name
               and set(kept.values()) & set(s.ports.values())]
    if not holders:  # something else took the port: it stays moved
        return
    ctx.given_up += [s.id for s in holders]  # before the stop: one that stops and then errs is given back too
    stop_together(runtime, [s.id for s in holders])
    ports = tuple(replace(p, host_port=kept[p.container_port]) if p.host_port is None and p.container_port in kept
                  else p for p in component.ports)
    spec = _container_spec(ctx, component, ports, suffix=TAKE_BACK_SUFFIX)
    settings = ctx.settings
    try:
        runtime.run(spec)
        now = wait_for_containers(ctx.clock, runtime, ctx.service.id, 1, settings.health_timeout, ctx.cancel,
                                  settings.settle_seconds, job_id=ctx.job.id, poll=settings.poll_seconds,
                                  names={spec.name})
    except JobCancelled:
        raise
    except Exception:  # noqa: BLE001 (the port was taken, or the container did not come up: the other stays)
        _remove_named(runtime, ctx.service.id, spec.name)
        return
    ctx.replaced.append(temporary.id)  # it serves until the proxy serves the switch: retired with the old set
    ctx.states = [now[0] if s.id == temporary.id else s for s in ctx.states]


def _remove_named(runtime, service_id: str, name: str) -> None:
    """Remove the service's container ``name`` when the engine has it (best effort)."""
    try:
        for state in runtime.containers(service_id):
            if state.name == name:
                runtime.remove_container(state.id)
    except Exception:  # noqa: BLE001 (a leftover of the job's set: the next deploy or the delete removes it)
        pass


def published_ports(plan, states) -> dict:
    """``{component: {container port: host port}}`` of what the plan publishes, as the
    engine's container ``states`` have it: the host ports kept from now on."""
    by_component = {s.labels.get(COMPONENT_LABEL): s for s in states}
    found: dict = {}
    for component in plan.components:
        state = by_component.get(component.name)
        for port in component.ports:
            host = state.ports.get(port.container_port) if state is not None else None
            if host:
                found.setdefault(component.name, {})[port.container_port] = int(host)
    return found


def switch_release(ctx: DeployContext) -> None:
    """One transaction: the new release, the route record the reverse proxy serves, the
    service ``running`` with its URL, the job ``succeeded`` (a cancel asked for in the
    database since the worker's last look stops it here: no switch). A service deleted
    meanwhile loses what the job made and the job ends "service deleted during the
    deploy"."""
    ctx.check()
    uow, clock, service, job, settings = ctx.uow, ctx.clock, ctx.service, ctx.job, ctx.settings
    upstream = routes.upstream(ctx.plan, ctx.states)
    url = f"https://{routes.hostname(service.name, settings.base_domain)}" if settings.base_domain else upstream
    now = clock.now()
    with uow:
        current = uow.services.get(service.id, for_update=True)
        if current is not None and uow.deploy_jobs.cancels_requested([job.id]):
            ctx.cancel = _requested(ctx.cancel)  # asked for since the worker's last poll: no switch
            ctx.check()
        if current is not None:
            if ctx.target is not None:  # the rollback's compose and variables are the service's again
                current = replace(current, compose=ctx.target.compose, variables=dict(ctx.target.variables or {}),
                                  secrets=tuple(ctx.target.secrets), commit=service.commit)
            branch = ctx.target.branch if ctx.target is not None else ctx.branch  # a rollback's: its target's
            ctx.release = release = new_release(uow, clock, current, job, ctx.images, branch)
            ancestry = uow.releases.ancestry(ctx.target.id) if ctx.target is not None else ctx.ancestry
            if ancestry and release.commit:  # a rollback's release keeps its target's
                uow.releases.add_ancestry(release.id, current.id, ancestry)
            routes.follow(uow, current, upstream, settings.base_domain, now)  # the record the reverse proxy serves
            _keep_ports(uow, clock, ctx)
            uow.services.update(replace(current, status="running", url=url, deployed_at=now, updated_at=now,
                                        health_status=health_of(ctx.states), health_checked_at=now,
                                        health_failures=0, release=release.number))
            uow.emit(deploy_progress(job, "done", "running", 100, current.customer_id))
            uow.emit(service_status(current, "running"))
            record(uow, clock, service.id, job.kind, "success",
                   f"{job.kind} succeeded (release {release.number})" + (f": {url}" if url else "")
                   + (f" ({ctx.note})" if ctx.note else ""))
            uow.deploy_jobs.finish(job.id, "succeeded", None, now, release_id=release.id)
        uow.commit()
    if current is None:  # deleted while deploying: take away what this job made, then end it
        ctx.runtime.remove_service(service.id)  # first: a job that reads failed has left nothing behind
        remove_builds(ctx)
        with uow:
            uow.deploy_jobs.finish(job.id, "failed", f"{DELETED} during the deploy", clock.now())
            uow.commit()
        ctx.progress("failed", f"{DELETED} during the deploy", 100)
        ctx.ended = True


def _keep_ports(uow, clock, ctx: DeployContext) -> None:
    """Within the switch: the host ports the new set has are kept from now on; each one
    that is not the port its component kept (taken meanwhile) is said on the timeline."""
    started = {s.labels.get(COMPONENT_LABEL): s for s in ctx.states}
    for component in ctx.plan.components:
        for container_port, (was, now) in sorted(_moved(component, started.get(component.name),
                                                         ctx.kept.get(component.name)).items()):
            if now:
                record(uow, clock, ctx.service.id, ctx.job.kind, "progress",
                       f"host port {was} of {component.name} (port {container_port}) was taken meanwhile: "
                       f"it now has host port {now}")
    uow.services.keep_host_ports(ctx.service.id, published_ports(ctx.plan, ctx.states))


#: the job's steps, in the order they run
STEPS = (check_target, prepare_source, read_plan, check_images, clear_slate, create_network, create_volumes,
         start_containers, wait_healthy, take_back_ports, switch_release)


def run_job(uow, deployer: Deployer, job, *, workdir: str | None = None, cancel=None) -> None:
    """Deploy, redeploy or roll back the job's service: :data:`STEPS` in order over a
    :class:`DeployContext`. Never raises: failures end the job (and a first deploy's
    service ``failed``) with the reason in the event timeline.

    With ``workdir`` (an empty directory for this job), the service's method first
    prepares its source (step ``source``). A rollback (``job.kind`` "rollback") prepares
    nothing and pulls nothing: it runs its target release's kept images, compose and
    variables.

    Customer limits (``settings.quota``): the compose a source step answers is counted and
    checked before anything of it runs (:func:`_keep_source`); a plan past a limit fails
    the job naming it (``limits.containers``, ...), like the 409 of a create.

    Health gate: a redeploy or rollback of a service whose containers run starts the new
    set beside them (names and a network of the job's own, label ``slipway.job``); only
    once all of the new set run and are healthy (``health_timeout``, then
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
    ``settings.registry_allow_private`` (``SLIPWAY_REGISTRY_ALLOW_PRIVATE``)."""
    ctx = open_job(uow, deployer, job, workdir=workdir, cancel=cancel)
    if ctx is None:
        return
    try:
        for step in STEPS:
            step(ctx)
            if ctx.ended:
                return
    except OldCommit as exc:
        end_old_commit(uow, ctx.clock, job, str(exc), gated=ctx.gated, progress=deployer.progress)
        return
    except Exception as exc:  # noqa: BLE001 - the reason goes to the timeline, the job and the service
        if not isinstance(exc, ContainersGone) and _set_removed(ctx):
            exc = ContainersGone(str(exc))  # (the delete's grace first; the reason stays this one)
        if ctx.gated and cancel_reason(ctx.cancel) != DELETED and not isinstance(exc, ContainersGone):
            fail_gated(uow, ctx.clock, ctx.runtime, job, exc, progress=deployer.progress, cancel=ctx.cancel,
                       give_back=ctx.given_up, previous=ctx.previous)
        else:
            fail_job(uow, ctx.clock, job, exc, note=ctx.note, progress=deployer.progress, runtime=ctx.runtime,
                     cancel=ctx.cancel)
        if cancel_reason(ctx.cancel) == DELETED or _gone(uow, job.service_id):
            remove_builds(ctx)
        return
    retire_old_release(ctx)


def _gone(uow, service_id: str) -> bool:
    """Whether the service's row is gone (False when the database does not answer)."""
    try:
        with uow.reading():
            return not uow.services.existing({service_id})
    except Exception:  # noqa: BLE001 (the job has ended; nothing more to learn)
        return False


def remove_builds(ctx: DeployContext) -> None:
    """Remove the images the job's method built for the service (``built_images`` of the
    compose the source step answered): a job of a deleted service leaves none behind,
    also one built after the delete removed the service's images. Best effort."""
    method = (ctx.deployer.methods or {}).get(ctx.service.deploy_method)
    built = getattr(method, "built_images", None)
    for image in built(ctx.service) if built is not None else ():
        try:
            ctx.runtime.remove_image(image)
        except Exception:  # noqa: BLE001 (an image already gone, an engine that does not answer)
            pass


def _set_removed(ctx: DeployContext) -> bool:
    """Whether containers the job started are gone from the engine as it fails: a delete of
    the service under way removes them (what the job saw first may be one of them
    stopping: its exit report is no reason of its own then)."""
    if not ctx.started:
        return False
    left = _left_in_engine(ctx.runtime, ctx.job)  # None: no answer, the failure stands as it is
    return left is not None and left < ctx.started


def open_job(uow, deployer: Deployer, job, *, workdir=None, cancel=None) -> DeployContext | None:
    """The job's context: its service and target release read, and whether it is
    health-gated (a redeploy or rollback of a service whose containers run). A service
    deleted meanwhile ends the job (None)."""
    with uow.reading():
        service = uow.services.get(job.service_id)
        target = uow.releases.get(job.target_release_id) if job.target_release_id else None
        kept = uow.services.host_ports(job.service_id) if service is not None else {}
    if service is None:  # deleted meanwhile
        with uow:
            uow.deploy_jobs.finish(job.id, "failed", DELETED, deployer.clock.now())
            uow.commit()
        return None
    if getattr(job, "commit", None) and service.status != "deploying":  # a push's job that waited for another
        with uow:
            current = uow.services.get(job.service_id, for_update=True)
            if current is not None and current.status != "deploying":
                current = replace(current, status="deploying", updated_at=deployer.clock.now())
                uow.services.update(current)
                uow.emit(service_status(current))
                service = current
            uow.commit()
    try:  # a redeploy or rollback of a running service is gated: its old set keeps serving until the switch
        gated = job.kind in ("redeploy", "rollback") and any(
            s.running and s.labels.get(JOB_LABEL) != job.id for s in deployer.runtime.containers(service.id))
    except Exception:  # noqa: BLE001 (an engine that does not answer: the job finds out below)
        gated = False
    return DeployContext(uow, deployer, job, workdir=workdir, cancel=cancel, service=service, target=target,
                         gated=gated, kept=kept)


def retire_old_release(ctx: DeployContext) -> None:
    """What follows a success, outside the job's verdict (it has succeeded): retire the
    old set of a gated job, drop the networks of the sets removed, keep the release's
    images, remove stale builds, remove the customer's network a service left when no
    other uses it. Best effort: an engine error here leaves leftovers (the
    next deploy or the delete removes them), never a failed job."""
    runtime, service_id, settings = ctx.runtime, ctx.service.id, ctx.settings
    steps: list[Callable[[], object]] = [
        (lambda: _retire(ctx.clock, runtime, service_id, ctx.serving, ctx.deployer.routes_changed,
                         settings.drain_seconds, replaced=ctx.replaced)) if ctx.gated
        else (lambda: _drop_networks(runtime, service_id, ctx.removed)),
        lambda: keep_images(ctx.uow, runtime, ctx.release)]
    if not ctx.service.customer_network:  # it may have left its customer's network: the last one out removes it
        steps.append(lambda: networks.drop_if_unused(ctx.uow, runtime, ctx.service.customer_id))
    steps += [functools.partial(runtime.remove_image, image) for image in ctx.stale]  # an earlier deploy's builds
    for step in steps:
        try:
            step()
        except Exception:  # noqa: BLE001 (an image still in use stays, ...)
            pass


# --- what the steps use --------------------------------------------------------------------


def _own_builds_only(plan, service_id: str) -> None:
    """A compose may name the images built for its own service only (``image:
    localhost/slw-<another service>-...`` would run another tenant's build), and no image
    id (:func:`core.panel.containerfiles.image_refusal`, the rule of every image a build
    reads too)."""
    reason = containerfiles.components_refusal(plan.components, service_id)
    if reason:
        raise RuntimeError(reason)


class _NoResolver:
    """The resolver of a deployer built without one: asked, it fails the job naming what
    it lacks (core looks no name up itself)."""

    def resolve(self, host: str, timeout: float = 0.0):
        raise RuntimeError(f"cannot look up the registry host {host}: this deploy worker has no resolver")

    def resolve_all(self, hosts, *, deadline: float = 0.0):
        for host in hosts:
            self.resolve(host)
        return {}


_NO_RESOLVER = _NoResolver()


def registries_refusal(plan, *, resolver) -> str | None:
    """Why an image of ``plan`` may not be used (its registry host is, or resolves to, an
    address that is not public), naming the service, or None. The hosts are looked up at
    once, within one deadline (:func:`core.panel.containerfiles.registries_refusal`); a
    host that does not resolve is judged again, strictly, when its image is pulled
    (:func:`_image`)."""
    return containerfiles.registries_refusal(
        [(f"services.{component.name}.image", component.image) for component in plan.components],
        strict=False, resolver=resolver)


def _requested(cancel):
    """``cancel`` set as "cancelled" (a new event when the job ran without one, or when a
    cancel was asked for in the database that its worker has not seen yet)."""
    return _cancelled_as(cancel, CANCELLED)


def _cancelled_as(cancel, reason: str):
    """``cancel`` when set already; otherwise set with ``reason`` (a new event when the
    job ran without one: "cancelled" asked for in the database, or "service deleted" seen
    in it, neither seen by the job's worker yet)."""
    if cancel is not None and cancel.is_set():
        return cancel
    if hasattr(cancel, "cancel"):  # the worker's own event: the job's later looks see the reason too
        cancel.cancel(reason)
        return cancel
    event = threading.Event()
    event.reason = reason  # type: ignore[attr-defined]  # read as the worker's own event's
    event.set()
    return event


def _keep_source(uow, settings: DeploySettings, service) -> None:
    """Keep the compose, the commit and the ssh host key (the pin, ``core.panel.host_keys``)
    a source step answered on the service, with what its
    plan counts against the customer's limits (the counting of a create,
    :meth:`Quota.footprint`; it replaces what the service counted so far). Past a limit:
    ``Conflict`` naming it and nothing is written. One transaction under the customer's
    row lock, the order create and redeploy take, so two jobs of one customer cannot
    both pass. An unreadable compose is kept as it is, counts unchanged: the plan step
    fails on it next."""
    quota = settings.quota
    try:
        footprint = quota.footprint(settings.parse(service.compose, service.variables or {}).components)
    except Exception:  # noqa: BLE001 (the plan step reads it again and says why)
        footprint = None
    with uow:
        customer = uow.panel_customers.get(service.customer_id, for_update=True) if footprint is not None else None
        current = uow.services.get(service.id, for_update=True)
        if current is None:  # deleted meanwhile: the job finds out below
            return
        counts = {}
        if customer is not None and footprint is not None:  # (a customer is read only for a footprint)
            reserve(uow, quota, customer, footprint, new_service=False,
                    replacing=Footprint(current.memory_mb, current.millicpus, current.containers))
            counts = {"memory_mb": footprint.memory_mb, "millicpus": footprint.millicpus,
                      "containers": footprint.containers}
        uow.services.update(replace(current, compose=service.compose, commit=service.commit,
                                    ssh_host_key=service.ssh_host_key, **counts))
        uow.commit()


def _fixed_ports(plan) -> bool:
    return any(p.host_port is not None for c in plan.components for p in c.ports)


#: the compose label of a database component (``postgres``, ``mysql``, ``redis``): backups dump it
BACKUP_LABEL = "slipway.backup"


def _single_writer(plan) -> bool:
    """Whether a component is a database (labelled ``slipway.backup``): two servers must
    never run on its data volume at once (PostgreSQL in another container does not see
    the first one's lock, Redis would write one append-only file twice), so its redeploys
    stop the old set first, as a fixed host port does."""
    return any(c.labels.get(BACKUP_LABEL) for c in plan.components)


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


def image_origin(service, plan, image: str) -> str:
    """What chose ``image``, for an error about it: the variable (a template's ``IMAGE``)
    whose value it is, else the compose's service ``image:``."""
    chosen = sorted(name for name, value in (service.variables or {}).items() if value == image)
    components = ", ".join(sorted(c.name for c in plan.components if c.image == image))
    if chosen:
        whose = f"of template {service.template_id}" if service.template_id else "of the service"
        return (f"the image is the variable {', '.join(chosen)} {whose} (compose service {components}): "
                "set it to an image the engine has or can pull")
    return f"the image is the compose's service {components} `image:`"


def _image(runtime, image: str, *, refresh: bool, cancel=None, strict: bool = False,
           resolver=_NO_RESOLVER) -> str | None:
    """Make sure the engine has ``image``: pull it when missing, and on a redeploy pull it
    again so a moved tag brings the latest image. ``localhost/`` images (without a port)
    are the engine's own (local builds) and are never pulled: one that is absent fails
    "image not found". With ``strict`` (``SLIPWAY_REGISTRY_ALLOW_PRIVATE`` off), a pull
    waits on the registry host resolving now (``resolver``) to public addresses only: a host that does
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
    refused = containerfiles.registry_refusal(image, resolve=resolver.resolve, strict=True) if strict else None
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


def wait_for_containers(clock, runtime, service_id: str, expected: int, seconds: float, cancel=None,
                        settle_seconds: float = 0.0, job_id: str | None = None, poll: float = POLL_SECONDS,
                        names=None):
    """Poll (every ``poll`` seconds of ``clock``) until every one of the ``expected``
    containers runs and is healthy (or has no healthcheck), then keep polling for
    ``settle_seconds``: they must all still run at its end. A container that stopped
    fails the wait with its exit code and last lines; one not healthy after ``seconds``
    fails it with its health output. With ``job_id`` only that job's containers (label
    ``slipway.job``) are looked at, with ``names`` only those of these names. Right after a start a container that is about to exit
    still shows running, so without the settle window such a deploy would be called a
    success."""
    deadline = clock.monotonic() + seconds
    settled_at = None  # when every container was first seen running and healthy
    while True:
        reason = cancel_reason(cancel)
        if reason is not None:
            raise JobCancelled(reason)
        states = runtime.containers(service_id)
        if job_id is not None:
            states = [s for s in states if s.labels.get(JOB_LABEL) == job_id]
        if names is not None:
            states = [s for s in states if s.name in names]
        if len(states) < expected:  # all were started before the wait: someone removed them
            raise ContainersGone(f"{expected - len(states)} of the service's containers were removed during the "
                                 "deploy (the service was deleted, or they were removed in the engine)")
        stopped = [s for s in states if not s.running]
        if stopped:
            killed = getattr(stopped[0], "exit_code", None) in KILLED_EXIT_CODES
            raise (ContainersKilled if killed else RuntimeError)(exit_report(runtime, stopped[0]))
        if all(s.health in (None, "healthy") for s in states):
            now = clock.monotonic()
            settled_at = settled_at if settled_at is not None else now
            if now - settled_at >= settle_seconds:
                return states
        elif clock.monotonic() > deadline:  # an early failing healthcheck may still pass: wait it out
            sick = [s for s in states if s.health != "healthy" and s.health is not None]
            raise RuntimeError(f"containers not running and healthy after {seconds:g} s"
                               + (f" (healthcheck failing: {', '.join(s.name for s in sick)})" if sick else "")
                               + "".join(_health_output(runtime, s) for s in sick[:3]))
        else:
            settled_at = None
        clock.sleep(poll)


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


def _retire(clock, runtime, service_id: str, old, routes_changed, drain_seconds: float, replaced=()) -> None:
    """After the switch: wait for the proxy (``routes_changed``) and the drain, then stop
    the ``old`` containers (the set that served when the job began: never one a job
    queued after this one's success started) gracefully, remove them and their networks;
    and remove the new set's containers a take-back of the host ports ``replaced`` (their
    network is the new set's)."""
    try:
        routes_changed()
    except Exception:  # noqa: BLE001 (the proxy catches up on its own loop; the drain still holds)
        pass
    clock.sleep(max(0.0, drain_seconds))
    try:
        stop_together(runtime, [state.id for state in old], timeout=STOP_TIMEOUT)  # one timeout, not one each
    except Exception:  # noqa: BLE001 (removed below either way)
        pass
    for state in old:
        runtime.remove_container(state.id)
    for container_id in replaced:
        runtime.remove_container(container_id)
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


# --- how a job ends when a step fails ------------------------------------------------------


def fail_gated(uow, clock, runtime, job, exc: Exception, *, progress=_nothing, cancel=None,
               give_back=(), previous=None) -> None:
    """A health-gated redeploy or rollback that failed (or was cancelled): its new set is
    removed, the old release keeps serving with its route record untouched (after a
    take-back of the host ports began: the old containers ``give_back`` names started
    again, and the url and route records put back as ``previous`` has them), the service
    is ``running`` again, the timeline has ``<kind>`` ``failed`` with the health output,
    and the job ends ``failed`` (``cancelled`` when cancelled)."""
    reason = cancel_reason(cancel) or (str(exc)[-2000:] or type(exc).__name__)
    state = "cancelled" if reason == CANCELLED else "failed"
    _remove_job_set(runtime, job.service_id, job)
    for container_id in give_back:
        try:
            runtime.start(container_id)
        except Exception:  # noqa: BLE001 (removed meanwhile; the rest of the old set serves)
            pass
    now = clock.now()
    with uow:
        current = uow.services.get(job.service_id, for_update=True)
        if current is not None:
            before = current
            if previous is not None:  # the take-back had pointed them at the new set
                url, records = previous
                if records:
                    uow.routes.replace_for(current.id, records)
                else:
                    uow.routes.delete_for(current.id)
                current = replace(current, url=url)
            if current.status == "deploying":
                current = replace(current, status="running", updated_at=now)
            if current != before:
                uow.services.update(current)
            uow.emit(deploy_progress(job, "failed", reason, 100, current.customer_id))
            uow.emit(service_status(current, current.status))
            record(uow, clock, job.service_id, job.kind, "failed",
                   f"{job.kind} {state}: {reason}; the previous release keeps running")
        uow.deploy_jobs.finish(job.id, state, reason if current is not None else DELETED, now)
        uow.commit()
    if current is None:
        progress(job, "failed", DELETED, 100)


def end_old_commit(uow, clock, job, reason: str, *, gated: bool, progress=_nothing) -> None:
    """A push deploy with nothing newer than the release that runs (:class:`OldCommit`)
    ends ``cancelled`` before it made anything: the release keeps running (the service
    ``running`` again; ``failed`` when none of its containers ran), the timeline says
    why."""
    now = clock.now()
    with uow:
        current = uow.services.get(job.service_id, for_update=True)
        if current is not None:
            if current.status == "deploying":
                current = replace(current, status="running" if gated else "failed", updated_at=now)
                uow.services.update(current)
            uow.emit(deploy_progress(job, "failed", reason, 100, current.customer_id))
            uow.emit(service_status(current, current.status))
            record(uow, clock, job.service_id, job.kind, "failed",
                   f"{job.kind} cancelled: {reason}; the release that runs is newer")
        uow.deploy_jobs.finish(job.id, "cancelled", reason if current is not None else DELETED, now)
        uow.commit()
    if current is None:
        progress(job, "failed", DELETED, 100)


def fail_job(uow, clock, job, exc: Exception, *, note: str = "", progress=_nothing, runtime=None,
             cancel=None) -> None:
    """End the job and its service ``failed``, the reason in the timeline (the final
    ``deploy.progress`` before the ``service.status``), and its route record gone (the
    containers that held its host port are not running). A service deleted meanwhile
    (or a set ``cancel``) loses what the job made in the engine (with ``runtime``); the
    job's error is then "service deleted"."""
    reason = str(exc)[-2000:] or type(exc).__name__
    if isinstance(exc, ContainersGone):
        _await_delete(uow, clock, job.service_id, cancel, removed=lambda: _none_left(runtime, job))
    reason = cancel_reason(cancel) or reason
    state = "cancelled" if reason == CANCELLED else "failed"
    if reason in (CANCELLED, DELETED) and runtime is not None:  # what it made goes
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


def _await_delete(uow, clock, service_id: str, cancel, removed=lambda: False) -> None:
    """A delete removes the containers first, then the rest of the service in the engine,
    then the row: give it ``DELETE_GRACE_SECONDS`` (of ``clock``) so the job ends as the
    deleted service's, and up to ``DELETE_REMOVAL_SECONDS`` while ``removed()`` (none of
    the job's containers left in the engine: the delete is under way, slower on a loaded
    engine). A container killed some other way (out of memory) is still there: the
    grace, then its exit report."""
    started = clock.monotonic()
    while not (cancel is not None and cancel.is_set()):
        with uow.reading():
            if uow.services.get(service_id) is None:
                return
        waited = clock.monotonic() - started
        if waited >= DELETE_REMOVAL_SECONDS or (waited >= DELETE_GRACE_SECONDS and not removed()):
            return
        clock.sleep(POLL_SECONDS)


def _none_left(runtime, job) -> bool:
    """Whether the engine holds none of ``job``'s containers (False without a runtime, or
    when the engine does not answer: the grace alone then)."""
    return _left_in_engine(runtime, job) == 0


def _left_in_engine(runtime, job) -> int | None:
    """How many of ``job``'s containers the engine holds; None without a runtime or when
    the engine does not answer."""
    if runtime is None:
        return None
    try:
        return sum(1 for s in runtime.containers(job.service_id) if s.labels.get(JOB_LABEL) == job.id)
    except Exception:  # noqa: BLE001 (an engine that does not answer)
        return None
