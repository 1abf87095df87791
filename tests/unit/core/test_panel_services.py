"""Panel customers with limits, services, deploy jobs, routes and the health check, with
the in-memory unit of work and a fake engine."""
from __future__ import annotations

from dataclasses import replace

import pytest

from core.panel import deploys, customers as panel_customers, routes, services, leases
from core.panel.deploy_job import Deployer, DeploySettings, run_job
from core.errors import Conflict, Forbidden, Invalid, NotFound
from core.panel.customers import Quota
from tests.support.fakes import FakeResolver, compose_of, parse, principal_of

QUOTA = Quota(services=20, memory_mb=4096, cpus=4, read_compose=parse)
DOMAIN = "apps.example.test"


def _create(uow, clock, principal, customer, methods, name="web", components=None, quota=QUOTA):
    request = {"name": name, "deploy_method": "compose", "customer_id": customer.id, "components": components}
    return services.create_service(uow, clock, principal, request, methods, {}, quota)


def _deploy(uow, clock, runtime, job):
    run_job(uow, Deployer(clock, runtime, DeploySettings(health_timeout=90, drain_seconds=2.0, base_domain=DOMAIN,
                                                         settle_seconds=0), resolver=FakeResolver()), job)
    with uow:
        return uow.services.get(job.service_id)


def _count(uow, customer_id):
    with uow:
        return uow.panel_customers.usage(customer_id)[:3]  # services, memory, CPUs


def _timeline(uow, principal, service_id):
    events, _ = services.list_events(uow, principal, service_id, page=1, per_page=50)
    return [(e.type, e.status) for e in reversed(events)]


# --- customers and limits ---------------------------------------------------------------------


@pytest.mark.parametrize("limits, field", [
    ({"services": -1}, "limits.services"), ({"services": 1.5}, "limits.services"),
    ({"memory_mb": "lots"}, "limits.memory_mb"), ({"cpus": 0.0005}, "limits.cpus"),
    ({"cpus": float("inf")}, "limits.cpus"), ({"disk": 1}, "limits.disk"), ({"services": True}, "limits.services"),
])
def test_invalid_limits_are_refused(uow, clock, limits, field):
    with pytest.raises(Invalid) as raised:
        panel_customers.create_customer(uow, clock, name="Acme", limits=limits)
    assert field in raised.value.fields
    assert panel_customers.list_customers(uow, page=1, per_page=10) == ([], 0)


def test_limits_merge_key_by_key_and_null_restores_the_default(uow, clock):
    made = panel_customers.create_customer(uow, clock, name="Acme", limits={"services": 2, "cpus": 1.5})
    assert (made.limits.services, made.limits.millicpus, made.limits.cpus) == (2, 1500, 1.5)
    changed = panel_customers.update_customer(uow, made.id, {"limits": {"memory_mb": 1024, "services": None}})
    assert (changed.limits.services, changed.limits.memory_mb, changed.limits.millicpus) == (None, 1024, 1500)
    assert QUOTA.effective(changed.limits) == {"services": 20, "memory_mb": 1024, "millicpus": 1500,
                                              "containers": 50}
    with pytest.raises(Invalid):
        panel_customers.update_customer(uow, made.id, {"name": " ", "limits": {"services": 1}})
    assert panel_customers.get_customer(uow, made.id) == changed


def test_customer_list_is_searched_sorted_and_paged(uow, clock):
    for name in ("Beta", "alpha", "Gamma", "alphabet"):
        panel_customers.create_customer(uow, clock, name=name)
        clock.advance(1)
    found, total = panel_customers.list_customers(uow, page=1, per_page=1, sort="name", order="desc",
                                                  search="ALPHA")
    assert total == 2 and [c.name for c in found] == ["alphabet"]
    with pytest.raises(Invalid):
        panel_customers.create_customer(uow, clock, name="X", email="not-an-email")


def test_a_customer_with_services_or_keys_is_not_deleted(uow, clock, admin, customer, methods):
    service, _ = _create(uow, clock, admin, customer, methods)
    with pytest.raises(Conflict, match="services"):
        panel_customers.delete_customer(uow, customer.id)
    services.delete_service(uow, _Runtime(), admin, service.id)
    key = principal_of(uow, clock, "customer", customer_id=customer.id).key
    with pytest.raises(Conflict, match="API keys"):
        panel_customers.delete_customer(uow, customer.id)
    from core.panel import access

    access.revoke_api_key(uow, clock, key.id)
    panel_customers.delete_customer(uow, customer.id)
    with pytest.raises(NotFound):
        panel_customers.get_customer(uow, customer.id)


class _Runtime:
    def remove_service(self, service_id):
        pass


# --- create and redeploy ----------------------------------------------------------------------


def test_create_stores_a_deploying_service_and_queues_its_job(uow, clock, admin, customer, methods):
    service, job = _create(uow, clock, admin, customer, methods, components=[("web", 300, ()), ("db", 200, ())])
    assert (service.status, service.memory_mb, service.millicpus) == ("deploying", 500, 1000)
    assert (job.service_id, job.kind, job.state) == (service.id, "deploy", "queued")
    assert [(e.type, e.data["status"]) for e in uow.published] == [("service.status", "deploying")]
    assert _timeline(uow, admin, service.id) == [("deploy", "started")]
    assert _count(uow, customer.id) == (1, 500, 1000)


def test_create_refusals_store_nothing(uow, clock, admin, customer, methods):
    other = panel_customers.create_customer(uow, clock, name="Other")
    _create(uow, clock, admin, customer, methods, name="taken")
    published = len(uow.published)
    viewer = principal_of(uow, clock, "viewer")
    mine = principal_of(uow, clock, "customer", customer_id=customer.id)
    with pytest.raises(Invalid) as raised:
        services.create_service(uow, clock, admin, {"name": "Bad_Name", "deploy_method": "helm",
                                                    "customer_id": customer.id}, methods, {}, QUOTA)
    assert set(raised.value.fields) == {"name", "deploy_method"}
    with pytest.raises(Forbidden):
        _create(uow, clock, viewer, customer, methods, name="fresh")
    with pytest.raises(Forbidden):
        _create(uow, clock, mine, other, methods, name="fresh")
    with pytest.raises(Conflict, match="already exists"):
        _create(uow, clock, admin, other, methods, name="taken")
    with pytest.raises(Invalid, match="invalid service"):
        _create(uow, clock, admin, replace(customer, id="cust_missing"), methods, name="fresh")
    assert _count(uow, other.id) == (0, 0, 0) and _count(uow, customer.id)[0] == 1
    assert len(uow.published) == published


def test_limits_refuse_what_would_go_past_them(uow, clock, admin, methods):
    small = panel_customers.create_customer(uow, clock, name="Small", limits={"services": 2, "memory_mb": 600})
    _create(uow, clock, admin, small, methods, name="one", components=[("web", 256, ()), ("db", 256, ())])
    with pytest.raises(Conflict, match="limits.memory_mb"):
        _create(uow, clock, admin, small, methods, name="two", components=[("web", 256, ())])
    _create(uow, clock, admin, small, methods, name="two", components=[("web", 88, ())])
    with pytest.raises(Conflict, match="limits.services"):
        _create(uow, clock, admin, small, methods, name="three", components=[("web", 6, ())])
    with pytest.raises(Conflict, match="limits.cpus"):
        _create(uow, clock, admin, panel_customers.create_customer(uow, clock, name="Tiny", limits={"cpus": 0.5}),
                methods, name="four", components=[("a", 6, ()), ("b", 6, ())])
    assert _count(uow, small.id) == (2, 600, 1500)


def test_redeploy_counts_the_kept_compose_and_refuses_only_growth(uow, clock, admin, customer, methods, runtime):
    service, job = _create(uow, clock, admin, customer, methods, components=[("web", 512, ())])
    with pytest.raises(Conflict, match="deploying"):
        services.redeploy(uow, clock, admin, service.id, QUOTA)
    assert _deploy(uow, clock, runtime, job).status == "running"
    panel_customers.update_customer(uow, customer.id, {"limits": {"memory_mb": 256}})  # lowered below usage
    again, job2 = services.redeploy(uow, clock, admin, service.id, QUOTA)  # not growing: allowed
    assert (again.status, job2.kind) == ("deploying", "redeploy")
    _deploy(uow, clock, runtime, job2)
    with uow:  # the kept compose grew meanwhile (a git build): now it would go past the limit
        current = uow.services.get(service.id)
        uow.services.update(replace(current, compose=compose_of([("web", 512, ()), ("cache", 64, ())])))
        uow.commit()
    with pytest.raises(Conflict, match="limits.memory_mb"):
        services.redeploy(uow, clock, admin, service.id, QUOTA)
    assert services.get_service(uow, admin, service.id).status == "running"


# --- deploy jobs ------------------------------------------------------------------------------


def test_a_deploy_runs_the_plan_and_writes_the_route(uow, clock, admin, customer, methods, runtime):
    service, job = _create(uow, clock, admin, customer, methods, components=[("web", 64, ("data",))])
    claimed = deploys.claim_next(uow, clock, owner="wkr_1")
    assert (claimed.id, claimed.state, claimed.attempts) == (job.id, "running", 1)
    assert deploys.claim_next(uow, clock, owner="wkr_1") is None
    done = _deploy(uow, clock, runtime, claimed)
    assert (done.status, done.url, done.health_status) == ("running", f"https://web.{DOMAIN}", "healthy")
    (route,) = routes.list_routes(uow)
    assert (route.hostname, route.service_id, route.target) == (f"web.{DOMAIN}", service.id,
                                                               "http://127.0.0.1:40001")
    assert ("create_volume", f"slw-{service.id}-data") in runtime.calls
    with uow:
        assert uow.deploy_jobs.get(job.id).state == "succeeded"
    assert [e.type for e in uow.published[-2:]] == ["deploy.progress", "service.status"]
    assert _timeline(uow, admin, service.id) == [("deploy", "started"), ("deploy", "success")]


def test_a_container_that_exits_fails_the_deploy(uow, clock, admin, customer, methods, runtime):
    service, job = _create(uow, clock, admin, customer, methods)
    runtime.exit_on_run = True
    failed = _deploy(uow, clock, runtime, job)
    assert failed.status == "failed" and routes.list_routes(uow) == []
    with uow:
        stored = uow.deploy_jobs.get(job.id)
    assert stored.state == "failed" and "exited with code 3" in stored.error
    assert uow.published[-1].data == {"id": service.id, "status": "failed"}


def test_a_container_killed_by_a_delete_under_way_ends_the_job_as_deleted(uow, clock, admin, customer, methods,
                                                                          runtime, monkeypatch):
    """A delete kills the containers before it removes the row: a deploy that sees its
    container killed (137) waits for the delete and names it, not the exit code."""
    service, job = _create(uow, clock, admin, customer, methods)
    job = deploys.claim_next(uow, clock, owner="wkr_1")  # running: a delete ends queued jobs itself
    runtime.exit_on_run, runtime.exit_code = True, 137
    # the delete's own transaction lands while the job waits for it
    clock.at(0, lambda: services.delete_service(uow, runtime, admin, service.id))
    states_at_removal = []
    remove = runtime.remove_service

    def remove_service(service_id):  # what a client polling the job sees while the engine is cleaned
        with uow.reading():
            states_at_removal.append(uow.deploy_jobs.get(job.id).state)
        remove(service_id)

    monkeypatch.setattr(runtime, "remove_service", remove_service)
    _deploy(uow, clock, runtime, job)
    with uow:
        stored = uow.deploy_jobs.get(job.id)
    assert stored.state == "failed" and stored.error == deploys.DELETED and clock.slept
    # the job's own clean-up comes before it reads failed: a finished job has left nothing behind
    assert states_at_removal[-1] != "failed" and runtime.containers(service.id) == []


def test_a_container_killed_without_a_delete_fails_with_its_exit_code(uow, clock, admin, customer, methods, runtime):
    service, job = _create(uow, clock, admin, customer, methods)
    runtime.exit_on_run, runtime.exit_code = True, 137
    failed = _deploy(uow, clock, runtime, job)  # after the delete's grace (of the driven clock)
    with uow:
        stored = uow.deploy_jobs.get(job.id)
    assert failed.status == "failed" and "exited with code 137" in stored.error


def test_claims_go_oldest_first_and_per_customer(uow, clock, admin, methods):
    a = panel_customers.create_customer(uow, clock, name="A")
    b = panel_customers.create_customer(uow, clock, name="B")
    jobs = []
    for name, owner in (("a1", a), ("a2", a), ("b1", b)):
        jobs.append(_create(uow, clock, admin, owner, methods, name=name)[1])
        clock.advance(1)
    first = deploys.claim_next(uow, clock, owner="w", per_customer=1)
    second = deploys.claim_next(uow, clock, owner="w", per_customer=1)  # a2 waits: A has one running
    assert (first.id, second.id) == (jobs[0].id, jobs[2].id)
    assert deploys.claim_next(uow, clock, owner="w", per_customer=1) is None
    assert deploys.claim_next(uow, clock, owner="w").id == jobs[1].id


def test_interrupted_jobs_are_requeued_and_given_up_after_three_runs(uow, clock, admin, customer, methods):
    leases.beat(uow, clock, "wkr_live")
    service, job = _create(uow, clock, admin, customer, methods, name="orphan")
    clock.advance(1)
    _, kept = _create(uow, clock, admin, customer, methods, name="kept")
    deploys.claim_next(uow, clock, owner="wkr_dead")
    deploys.claim_next(uow, clock, owner="wkr_live")
    assert deploys.recover_interrupted(uow, clock) == [job.id]  # the live worker's job stays
    for _ in range(2):
        leases.beat(uow, clock, "wkr_live")
        assert deploys.claim_next(uow, clock, owner="wkr_dead").id == job.id
        deploys.recover_interrupted(uow, clock)
    with uow:
        assert uow.deploy_jobs.get(job.id).state == "failed" and uow.deploy_jobs.get(kept.id).state == "running"
    assert services.get_service(uow, admin, service.id).status == "failed"
    clock.advance(leases.STALE_S + 1)  # the live worker stops beating: its job is taken back
    assert deploys.recover_interrupted(uow, clock) == [kept.id]


# --- lifecycle --------------------------------------------------------------------------------


def test_stop_and_start_follow_the_containers_and_the_route(uow, clock, admin, customer, methods, runtime):
    service, job = _create(uow, clock, admin, customer, methods)
    with pytest.raises(Conflict, match="deploying"):
        services.operate(uow, clock, runtime, admin, service.id, "stop", base_domain=DOMAIN, parse=parse)
    _deploy(uow, clock, runtime, job)
    stopped, _ = services.operate(uow, clock, runtime, admin, service.id, "stop", base_domain=DOMAIN, parse=parse)
    assert (stopped.status, stopped.health_status) == ("stopped", "unknown") and routes.list_routes(uow) == []
    assert services.operate(uow, clock, runtime, admin, service.id, "stop", parse=parse)[1] == \
        "service already stopped"
    (container,) = runtime.containers(service.id)
    runtime.states[container.id] = replace(container, ports={8080: 41234})  # the engine publishes anew
    started, _ = services.operate(uow, clock, runtime, admin, service.id, "start", base_domain=DOMAIN, parse=parse)
    assert started.status == "running" and routes.list_routes(uow)[0].target == "http://127.0.0.1:41234"
    runtime.fail.add("restart")
    with pytest.raises(RuntimeError):
        services.operate(uow, clock, runtime, admin, service.id, "restart", base_domain=DOMAIN, parse=parse)
    assert routes.list_routes(uow) == []  # given up before the engine was asked
    assert _timeline(uow, admin, service.id)[-1] == ("restart", "failed")
    runtime.remove_service(service.id)
    with pytest.raises(Conflict, match="no containers"):
        services.operate(uow, clock, runtime, admin, service.id, "start", parse=parse)


def test_a_restart_skips_containers_removed_after_it_listed_them(uow, clock, admin, customer, methods, runtime):
    """A deploy's clean-up may remove containers of the service (the retired set, or the
    first containers of components that took their kept host ports back) while a restart
    or start runs: those need neither stop nor start, and the operation succeeds on the
    containers that are there."""
    service, job = _create(uow, clock, admin, customer, methods)
    _deploy(uow, clock, runtime, job)
    (container,) = runtime.containers(service.id)
    gone = replace(container, id="c-removed", name=container.name + "-old")
    listed = runtime.containers

    def with_a_removed_one(service_id):  # the list read before the clean-up removed it
        return [*listed(service_id), gone]

    runtime.containers = with_a_removed_one
    for operation in ("restart", "stop", "start"):
        answered, _ = services.operate(uow, clock, runtime, admin, service.id, operation, base_domain=DOMAIN,
                                       parse=parse)
        assert answered.status == ("stopped" if operation == "stop" else "running"), operation
    assert runtime.states[container.id].running
    assert _timeline(uow, admin, service.id)[-1] == ("start", "success")


def test_delete_removes_everything_and_customers_see_their_own_only(uow, clock, admin, customer, methods,
                                                                     runtime):
    other = panel_customers.create_customer(uow, clock, name="Other")
    service, job = _create(uow, clock, admin, customer, methods)
    theirs, _ = _create(uow, clock, admin, other, methods, name="theirs")
    _deploy(uow, clock, runtime, job)
    mine = principal_of(uow, clock, "customer", customer_id=customer.id)
    assert services.list_services(uow, mine, page=1, per_page=10)[1] == 1
    assert services.list_services(uow, mine, page=1, per_page=10, customer_id=other.id) == ([], 0)
    for call in (lambda: services.get_service(uow, mine, theirs.id),
                 lambda: services.delete_service(uow, runtime, mine, theirs.id)):
        with pytest.raises(NotFound):
            call()
    services.delete_service(uow, runtime, mine, service.id)
    assert runtime.containers(service.id) == [] and routes.list_routes(uow) == []
    assert uow.published[-1].data == {"id": service.id, "status": "deleted"}
    with pytest.raises(NotFound):
        services.get_service(uow, admin, service.id)
    assert services.get_service(uow, admin, theirs.id).name == "theirs"


def test_a_service_whose_container_stopped_fails_on_the_second_check(uow, clock, admin, customer, methods,
                                                                      runtime):
    service, job = _create(uow, clock, admin, customer, methods)
    _deploy(uow, clock, runtime, job)
    (container,) = runtime.containers(service.id)
    runtime.states[container.id] = replace(container, running=False, status="exited", exit_code=137)
    deploys.check_health(uow, clock, runtime)
    assert services.get_service(uow, admin, service.id).status == "running"  # once may be a stop under way
    assert deploys.check_health(uow, clock, runtime) == 1
    failed = services.get_service(uow, admin, service.id)
    assert failed.status == "failed" and routes.list_routes(uow) == []
    assert _timeline(uow, admin, service.id)[-1] == ("health", "failed")


def test_reconcile_marks_services_whose_containers_are_gone(uow, clock, admin, customer, methods, runtime):
    service, job = _create(uow, clock, admin, customer, methods)
    _deploy(uow, clock, runtime, job)
    runtime.remove_service(service.id)
    assert deploys.reconcile(uow, clock, runtime) == [service.id]
    assert services.get_service(uow, admin, service.id).status == "failed"
    assert deploys.reconcile(uow, clock, runtime) == []


def test_a_route_hostname_names_one_service(uow, clock):
    with uow:
        routes.follow(uow, _Svc("svc_1", "web"), "http://127.0.0.1:1", DOMAIN, clock.now())
        routes.follow(uow, _Svc("svc_1", "web"), "http://127.0.0.1:2", DOMAIN, clock.now())
        routes.follow(uow, _Svc("svc_2", "api"), "http://127.0.0.1:3", DOMAIN, clock.now())
        routes.follow(uow, _Svc("svc_2", "api"), "", DOMAIN, clock.now())  # nothing published: gone
        uow.commit()
    assert [(r.hostname, r.target) for r in routes.list_routes(uow)] == [(f"web.{DOMAIN}", "http://127.0.0.1:2")]


class _Svc:
    def __init__(self, id, name):
        self.id, self.name = id, name
