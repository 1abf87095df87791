"""Releases, health-gated redeploys, rollback and cancel, with the in-memory unit of work
and the fake engine."""
from __future__ import annotations

import threading

import pytest

from core.errors import Conflict, Forbidden, NotFound
from core.panel import deploys, releases, routes, services
from core.panel.containers import JOB_LABEL, ContainerSpec, keep_tag
from core.panel.deploy_job import Deployer, DeploySettings, run_job
from core.panel.customers import Quota
from tests.support.fakes import FakeResolver, parse, principal_of

QUOTA = Quota(services=20, memory_mb=4096, cpus=4, read_compose=parse)
DOMAIN = "apps.example.test"


def _create(uow, clock, principal, customer, methods, name="web"):
    request = {"name": name, "deploy_method": "compose", "customer_id": customer.id,
               "components": [("web", 64, ("data",))]}
    return services.create_service(uow, clock, principal, request, methods, {}, QUOTA)


def _run(uow, clock, runtime, job, cancel=None, routes_changed=lambda: None, **settings):
    settings = DeploySettings(**{"base_domain": DOMAIN, "health_timeout": 90, "settle_seconds": 0, "drain_seconds": 0,
                                 **settings})
    run_job(uow, Deployer(clock, runtime, settings, routes_changed=routes_changed, resolver=FakeResolver()), job, cancel=cancel)
    with uow:
        return uow.services.get(job.service_id), uow.deploy_jobs.get(job.id)


def _redeploy(uow, clock, runtime, admin, service_id, **kw):
    _, job = services.redeploy(uow, clock, admin, service_id, QUOTA)
    return _run(uow, clock, runtime, job, **kw)


@pytest.fixture
def deployed(uow, clock, admin, customer, methods, runtime):
    service, job = _create(uow, clock, admin, customer, methods)
    done, _ = _run(uow, clock, runtime, job)
    assert done.status == "running" and done.release == 1
    return done


def _timeline(uow, admin, service_id):
    return [(e.type, e.status) for e in reversed(services.list_events(uow, admin, service_id, page=1,
                                                                      per_page=100)[0])]



def _without_kept_ports(uow, service_id):
    """As a service deployed before host ports were kept: its redeploy switches without a
    take-back of the host ports (whose order of steps tests/unit/core/test_deploy_steps.py
    holds), so the proxy is told once, after the switch."""
    with uow:
        uow.services.keep_host_ports(service_id, {})
        uow.commit()

def test_each_success_records_the_next_release_with_its_images_kept(uow, clock, admin, runtime, deployed):
    for expected in (2, 3):
        service, job = _redeploy(uow, clock, runtime, admin, deployed.id)
        assert service.release == expected and job.state == "succeeded" and job.finished_at is not None
    found, total = releases.list_releases(uow, admin, deployed.id, page=1, per_page=10)
    assert total == 3 and [r.number for r in found] == [3, 2, 1]
    newest = found[0]
    assert newest.deploy_job_id == job.id and job.release_id == newest.id and newest.id.startswith("rel_")
    assert newest.images[0]["component"] == "web" and newest.images[0]["image_id"].startswith("sha256:")
    assert newest.created_by == f"key:{admin.key.id}" and newest.commit is None
    assert runtime.tags[keep_tag(deployed.id, 3, "web")] == newest.images[0]["image_id"]


def test_a_service_deleted_before_its_release_images_are_kept_keeps_none(uow, clock, admin, runtime, deployed):
    """Keeping a release's images comes after its job's success (and a gated job's drain):
    a delete of the service in between removed the tags it found, and the tags made after
    it go too (seen in CI: a leftover ``slw-keep-<id>:3-web`` after a rollback and delete)."""
    service, job = _redeploy(uow, clock, runtime, admin, deployed.id)
    found, _ = releases.list_releases(uow, admin, deployed.id, page=1, per_page=10)
    for tag in [t for t in runtime.tags if t.startswith(f"localhost/slw-keep-{deployed.id}")]:
        runtime.remove_image(tag)
    services.delete_service(uow, None, admin, deployed.id)
    assert releases.keep_images(uow, runtime, found[0]) == [keep_tag(deployed.id, 2, "web")]
    assert not [t for t in runtime.tags if t.startswith(f"localhost/slw-keep-{deployed.id}")]
    assert ("tag_image", found[0].images[0]["image_id"], keep_tag(deployed.id, 2, "web")) in runtime.calls


def test_only_the_newest_twenty_releases_keep_their_images(uow, clock, admin, runtime, deployed):
    for _ in range(21):  # releases 2..22
        _redeploy(uow, clock, runtime, admin, deployed.id)
    removed = [c[1] for c in runtime.calls if c[0] == "remove_image"]
    assert keep_tag(deployed.id, 1, "web") in removed and keep_tag(deployed.id, 2, "web") in removed
    assert keep_tag(deployed.id, 3, "web") not in removed
    oldest = releases.list_releases(uow, admin, deployed.id, page=2, per_page=20)[0]
    assert [r.number for r in oldest] == [2, 1]  # the rows stay
    with pytest.raises(Conflict, match="images of release 2 are gone"):
        releases.rollback(uow, clock, runtime, admin, deployed.id, oldest[0].id, services.redeploy, QUOTA)


def test_a_redeploy_of_a_running_service_starts_beside_it_and_switches(uow, clock, admin, runtime, deployed):
    _without_kept_ports(uow, deployed.id)
    (old,) = runtime.containers(deployed.id)
    seen = []
    service, job = _redeploy(uow, clock, runtime, admin, deployed.id,
                             routes_changed=lambda: seen.append(len(runtime.containers(deployed.id))))
    assert seen == [2]  # both sets ran when the proxy was told; the old one went afterwards
    (new,) = runtime.containers(deployed.id)
    assert new.labels[JOB_LABEL] == job.id and new.name != old.name and old.id not in runtime.states
    assert ("stop", old.id) in runtime.calls
    (route,) = routes.list_routes(uow)
    assert route.target == f"http://127.0.0.1:{new.ports[8080]}"


def test_a_failing_redeploy_leaves_the_old_release_serving(uow, clock, admin, runtime, deployed):
    (old,) = runtime.containers(deployed.id)
    (route,) = routes.list_routes(uow)
    runtime.exit_on_run = True
    service, job = _redeploy(uow, clock, runtime, admin, deployed.id)
    assert (service.status, service.release, job.state) == ("running", 1, "failed")
    assert "exited with code 3" in job.error
    assert runtime.containers(deployed.id) == [old] and routes.list_routes(uow) == [route]
    assert _timeline(uow, admin, deployed.id)[-1] == ("redeploy", "failed")


def test_rollback_runs_the_earlier_release_images_and_variables(uow, clock, admin, runtime, deployed):
    _redeploy(uow, clock, runtime, admin, deployed.id)  # release 2
    with pytest.raises(NotFound):
        releases.rollback(uow, clock, runtime, admin, deployed.id, "rel_nope", services.redeploy, QUOTA)
    service, job, target = releases.rollback(uow, clock, runtime, admin, deployed.id, None, services.redeploy,
                                             QUOTA)
    assert (service.status, job.kind, target.number) == ("deploying", "rollback", 1)
    runtime.calls.clear()
    service, job = _run(uow, clock, runtime, job)
    assert (service.status, service.release, job.state) == ("running", 3, "succeeded")
    assert not [c for c in runtime.calls if c[0] == "pull_image"]
    (container,) = runtime.containers(deployed.id)
    assert ("run", container.name) in runtime.calls
    third = releases.get_release(uow, admin, deployed.id, job.release_id)
    assert [i["image_id"] for i in third.images] == [i["image_id"] for i in target.images]
    assert _timeline(uow, admin, deployed.id)[-1] == ("rollback", "success")


def test_rollback_refusals(uow, clock, admin, customer, methods, runtime, deployed):
    with pytest.raises(Conflict, match="no earlier release"):
        releases.rollback(uow, clock, runtime, admin, deployed.id, None, services.redeploy, QUOTA)
    _redeploy(uow, clock, runtime, admin, deployed.id)
    first = releases.list_releases(uow, admin, deployed.id, page=1, per_page=10)[0][-1]
    runtime.gone_images.add(keep_tag(deployed.id, 1, "web"))
    with pytest.raises(Conflict, match="gone"):
        releases.rollback(uow, clock, runtime, admin, deployed.id, first.id, services.redeploy, QUOTA)
    runtime.gone_images.clear()
    other, _ = _create(uow, clock, admin, customer, methods, name="other")
    with pytest.raises(NotFound):  # another service's release
        releases.rollback(uow, clock, runtime, admin, other.id, first.id, services.redeploy, QUOTA)
    viewer = principal_of(uow, clock, role="viewer")
    with pytest.raises(Forbidden):
        releases.rollback(uow, clock, runtime, viewer, deployed.id, None, services.redeploy, QUOTA)
    releases.rollback(uow, clock, runtime, admin, deployed.id, None, services.redeploy, QUOTA)
    with pytest.raises(Conflict, match="deploying"):
        releases.rollback(uow, clock, runtime, admin, deployed.id, None, services.redeploy, QUOTA)


def test_a_queued_job_is_cancelled_at_once_and_a_finished_one_refuses(uow, clock, admin, runtime, deployed):
    _, job = services.redeploy(uow, clock, admin, deployed.id, QUOTA)
    cancelled = releases.cancel_job(uow, clock, runtime, admin, deployed.id, job.id)
    assert cancelled.state == "cancelled" and cancelled.finished_at is not None
    assert services.get_service(uow, admin, deployed.id).status == "running"
    assert deploys.claim_next(uow, clock) is None
    with pytest.raises(Conflict, match="finished"):
        releases.cancel_job(uow, clock, runtime, admin, deployed.id, job.id)
    with pytest.raises(NotFound):
        releases.cancel_job(uow, clock, runtime, admin, deployed.id, "job_nope")


def test_a_cancelled_running_redeploy_removes_its_set_and_keeps_the_old(uow, clock, admin, runtime, deployed):
    (old,) = runtime.containers(deployed.id)
    _, job = services.redeploy(uow, clock, admin, deployed.id, QUOTA)
    job = deploys.claim_next(uow, clock)
    assert releases.cancel_job(uow, clock, runtime, admin, deployed.id, job.id).cancel_requested
    cancel = threading.Event()
    cancel.reason = deploys.CANCELLED
    started = runtime.run

    def run_then_cancel(spec):  # the worker's poll sets the event while the job starts containers
        cid = started(spec)
        cancel.set()
        return cid

    runtime.run = run_then_cancel
    service, job = _run(uow, clock, runtime, job, cancel=cancel)
    assert (service.status, service.release, job.state) == ("running", 1, "cancelled")
    assert runtime.containers(deployed.id) == [old]
    assert _timeline(uow, admin, deployed.id)[-1] == ("redeploy", "failed")


def test_a_cancelled_first_deploy_leaves_the_service_failed(uow, clock, admin, customer, methods, runtime):
    service, job = _create(uow, clock, admin, customer, methods)
    cancel = threading.Event()
    cancel.reason = deploys.CANCELLED
    cancel.set()
    service, job = _run(uow, clock, runtime, deploys.claim_next(uow, clock), cancel=cancel)
    assert (service.status, job.state, job.error) == ("failed", "cancelled", "cancelled")
    assert runtime.containers(service.id) == []


def test_a_resumed_redeploy_removes_only_its_own_leftovers(uow, clock, admin, runtime, deployed):
    (old,) = runtime.containers(deployed.id)
    _, job = services.redeploy(uow, clock, admin, deployed.id, QUOTA)
    job = deploys.claim_next(uow, clock)
    runtime.exit_on_run = False
    leftover = runtime.run(ContainerSpec(name="slw-web-web-left", image="x", labels={
        "slipway.service": deployed.id, "slipway.component": "web", JOB_LABEL: job.id}))
    seen = []
    service, job = _run(uow, clock, runtime, job, routes_changed=lambda: seen.append(
        sorted(s.id for s in runtime.containers(deployed.id))))
    assert leftover not in seen[0] and old.id in seen[0]  # the serving set stayed until the switch
    assert service.release == 2


def test_reconcile_drops_a_set_left_beside_the_running_release(uow, clock, admin, runtime, deployed):
    (serving,) = runtime.containers(deployed.id)
    runtime.run(ContainerSpec(name="slw-web-web-old", image="x", labels={
        "slipway.service": deployed.id, "slipway.component": "web", JOB_LABEL: "job_old"}))
    assert deploys.reconcile(uow, clock, runtime) == []
    assert runtime.containers(deployed.id) == [serving]


def test_the_switch_retires_only_the_set_that_served_when_the_job_began(uow, clock, admin, runtime, deployed):
    _without_kept_ports(uow, deployed.id)
    (old,) = runtime.containers(deployed.id)
    late = []

    def another_job_starts():  # after the success commit, before the drain ends
        late.append(runtime.run(ContainerSpec(name="slw-web-web-next", image="x", labels={
            "slipway.service": deployed.id, "slipway.component": "web", JOB_LABEL: "job_next"})))

    _, job = _redeploy(uow, clock, runtime, admin, deployed.id, routes_changed=another_job_starts)
    names = sorted(s.labels[JOB_LABEL] for s in runtime.containers(deployed.id))
    assert old.id not in runtime.states and late[0] in runtime.states and names == sorted([job.id, "job_next"])


def test_a_cancel_asked_for_after_the_last_poll_still_stops_the_switch(uow, clock, admin, runtime, deployed):
    """The worker polls for cancels every few seconds: a cancel that lands after its last
    poll but before the switch is seen in the switch's transaction (the job ends
    cancelled, the old release keeps serving, only one set runs)."""
    (old,) = runtime.containers(deployed.id)
    _, job = services.redeploy(uow, clock, admin, deployed.id, QUOTA)
    job = deploys.claim_next(uow, clock)
    started = runtime.run

    def run_then_ask(spec):  # the cancel arrives while the job runs; no event is ever set
        cid = started(spec)
        releases.cancel_job(uow, clock, runtime, admin, deployed.id, job.id)
        return cid

    runtime.run = run_then_ask
    service, ended = _run(uow, clock, runtime, job, cancel=threading.Event())
    assert (service.status, service.release, ended.state, ended.error) == ("running", 1, "cancelled", "cancelled")
    assert runtime.containers(deployed.id) == [old]
    with uow:
        assert uow.releases.last_number(deployed.id) == 1


def test_a_cancel_of_a_job_that_finished_meanwhile_is_refused(uow, clock, admin, runtime, deployed):
    """A running job read as running but finished before the cancel's write: 409, and the
    finished job does not gain ``cancel_requested``."""
    _, job = services.redeploy(uow, clock, admin, deployed.id, QUOTA)
    job = deploys.claim_next(uow, clock)
    finish = uow.deploy_jobs.request_cancel

    with uow:
        uow.deploy_jobs.finish(job.id, "succeeded", None, clock.now())
        uow.commit()
    with uow:
        assert finish(job.id, clock.now()) is False
    with uow:
        assert not uow.deploy_jobs.get(job.id).cancel_requested
    with pytest.raises(Conflict, match="finished"):
        releases.cancel_job(uow, clock, runtime, admin, deployed.id, job.id)


def test_a_redeploy_whose_healthcheck_fails_keeps_the_old_release_and_says_why(uow, clock, admin, runtime,
                                                                                deployed):
    """The health gate: past the timeout the new set goes, the status is running again, the
    route record is untouched and the job and the timeline carry the health output."""
    from dataclasses import replace as _replace

    (old,) = runtime.containers(deployed.id)
    (route,) = routes.list_routes(uow)
    started = runtime.run

    def run_unhealthy(spec):
        cid = started(spec)
        runtime.states[cid] = _replace(runtime.states[cid], health="unhealthy")
        return cid

    runtime.run = run_unhealthy
    runtime.health_log = lambda cid: ["curl: (7) Failed to connect to localhost port 8080"]
    service, job = _redeploy(uow, clock, runtime, admin, deployed.id, health_timeout=0)
    assert (service.status, service.release, job.state) == ("running", 1, "failed")
    assert "healthcheck failing" in job.error and "Failed to connect to localhost port 8080" in job.error
    assert runtime.containers(deployed.id) == [old] and routes.list_routes(uow) == [route]
    (event,) = [e for e in services.list_events(uow, admin, deployed.id, page=1, per_page=1)[0]]
    assert (event.type, event.status) == ("redeploy", "failed")
    assert "Failed to connect to localhost port 8080" in event.message


def test_an_explicit_rollback_to_the_running_release_runs_it_again(uow, clock, admin, runtime, deployed):
    """Decided (docs/decisions.md): ``release_id`` of the running release is allowed, a
    re-run of exactly that release (kept images, no pull); the default is the one before."""
    (running,) = releases.list_releases(uow, admin, deployed.id, page=1, per_page=10)[0]
    _, job, target = releases.rollback(uow, clock, runtime, admin, deployed.id, running.id, services.redeploy, QUOTA)
    assert target.id == running.id and job.kind == "rollback"
    runtime.calls.clear()
    service, job = _run(uow, clock, runtime, job)
    assert (service.status, service.release, job.state) == ("running", 2, "succeeded")
    assert not [c for c in runtime.calls if c[0] == "pull_image"]


def test_the_logs_skip_a_container_that_is_gone_when_its_lines_are_read():
    """CI saw the logs of a Swarm service fail while a redeploy retired its old set: the
    listing named a container that was gone by the time its lines were read."""
    from collections import namedtuple
    from core.panel.containers import NotInEngine

    Line, State = namedtuple("Line", "timestamp message"), namedtuple("State", "id")

    class Engine:
        def logs(self, cid, tail=100, since=None):
            if cid == "old":
                raise NotInEngine("no such container: old")
            return [Line(2, "second"), Line(1, "first"), Line(3, "third")][:tail]

    states = [State("old"), State("new")]
    origins = {"old": {"component": "web", "release": 1}, "new": {"component": "web", "release": 2}}
    lines = releases.service_logs(Engine(), states, origins, tail=2)
    assert [(line.message, origin["release"]) for line, origin in lines] == [("first", 2), ("second", 2)]
    assert releases.service_logs(Engine(), states, origins, tail=0) == []


def test_the_logs_fail_when_the_engine_fails_for_another_reason():
    from collections import namedtuple

    class Engine:
        def logs(self, cid, tail=100, since=None):
            raise RuntimeError("engine down")

    with pytest.raises(RuntimeError):
        releases.service_logs(Engine(), [namedtuple("State", "id")("a")], {"a": {}}, tail=5)
