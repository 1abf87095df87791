"""Stable host ports, with the in-memory unit of work and the fake engine: a component
keeps the host port it was given across redeploys, rollbacks and restarts while the port
is free; a port taken meanwhile gives another one and a timeline event; behind a proxy
(a base domain) a redeploy stays health-gated and its new set keeps the ports it got; a
host port written in compose is the compose's."""
from __future__ import annotations

from core.panel import host_ports, releases, services
from core.panel.compose import dump_compose
from core.panel.containers import COMPONENT_LABEL, JOB_LABEL
from core.panel.customers import Quota
from core.panel.deploy_job import Deployer, DeploySettings, run_job
from core.panel.containers import PortSpec
from tests.support.fakes import parse

QUOTA = Quota(services=20, memory_mb=4096, cpus=4, read_compose=parse)
DOMAIN = "apps.example.test"


def _run(uow, clock, runtime, job, **settings):
    settings = DeploySettings(**{"settle_seconds": 0, "drain_seconds": 0, **settings})
    run_job(uow, Deployer(clock, runtime, settings), job)
    with uow:
        return uow.services.get(job.service_id), uow.deploy_jobs.get(job.id)


def _deployed(uow, clock, admin, customer, methods, runtime, **settings):
    service, job = services.create_service(
        uow, clock, admin, {"name": "web", "deploy_method": "compose", "customer_id": customer.id,
                            "components": [("web", 64, ()), ("side", 16, ())]}, methods, {}, QUOTA)
    done, finished = _run(uow, clock, runtime, job, **settings)
    assert done.status == "running" and finished.state == "succeeded"
    return done


def _redeploy(uow, clock, runtime, admin, service_id, **settings):
    _, job = services.redeploy(uow, clock, admin, service_id, QUOTA)
    return _run(uow, clock, runtime, job, **settings)


def _port(runtime, service_id) -> int:
    (state,) = [s for s in runtime.containers(service_id) if s.labels[COMPONENT_LABEL] == "web"]
    return state.ports[8080]


def _moved(uow, admin, service_id) -> list:
    events, _ = services.list_events(uow, admin, service_id, page=1, per_page=100)
    return [(e.type, e.message) for e in reversed(events) if e.status == "progress"]


def test_redeploys_and_rollbacks_keep_the_host_port_and_the_url(uow, clock, admin, customer, methods, runtime):
    service = _deployed(uow, clock, admin, customer, methods, runtime)
    first = _port(runtime, service.id)
    assert service.url == f"http://127.0.0.1:{first}"
    with uow.reading():
        assert uow.services.host_ports(service.id) == {("web", 8080, "tcp"): first}
    for _ in range(2):
        again, job = _redeploy(uow, clock, runtime, admin, service.id)
        assert job.state == "succeeded" and _port(runtime, service.id) == first and again.url == service.url
    oldest = releases.list_releases(uow, admin, service.id, page=1, per_page=10)[0][-1]
    _, job, _ = releases.rollback(uow, clock, runtime, admin, service.id, oldest.id, services.redeploy, QUOTA)
    rolled, job = _run(uow, clock, runtime, job)
    assert job.state == "succeeded" and rolled.release == 4 and _port(runtime, service.id) == first
    assert rolled.url == service.url and _moved(uow, admin, service.id) == []


def test_a_restart_keeps_the_containers_and_their_host_port(uow, clock, admin, customer, methods, runtime):
    service = _deployed(uow, clock, admin, customer, methods, runtime)
    first = _port(runtime, service.id)
    for operation in ("restart", "stop", "start"):
        services.operate(uow, clock, runtime, admin, service.id, operation)
        assert _port(runtime, service.id) == first
    assert services.get_service(uow, admin, service.id).url == f"http://127.0.0.1:{first}"


def test_a_port_taken_meanwhile_gives_another_and_says_so(uow, clock, admin, customer, methods, runtime):
    service = _deployed(uow, clock, admin, customer, methods, runtime)
    first = _port(runtime, service.id)
    runtime.taken.add(first)  # something outside the engine listens there now (the old set is gone first)
    again, job = _redeploy(uow, clock, runtime, admin, service.id)
    second = _port(runtime, service.id)
    assert job.state == "succeeded" and second != first and again.url == f"http://127.0.0.1:{second}"
    assert _moved(uow, admin, service.id) == [
        ("redeploy", f"web: host port {first} was taken by something else meanwhile; its port 8080/tcp is now "
                     f"published on {second}")]
    with uow.reading():
        assert uow.services.host_ports(service.id) == {("web", 8080, "tcp"): second}  # kept from now on
    runtime.taken.clear()
    _redeploy(uow, clock, runtime, admin, service.id)
    assert _port(runtime, service.id) == second and len(_moved(uow, admin, service.id)) == 1


def _ops(runtime) -> list:
    return [(c[0], c[1]) for c in runtime.calls if c[0] in ("run", "remove_container")]


def test_a_gated_redeploy_starts_beside_the_old_set_then_takes_the_kept_port_back(uow, clock, admin, customer,
                                                                                  methods, runtime):
    service = _deployed(uow, clock, admin, customer, methods, runtime)
    first = _port(runtime, service.id)
    runtime.calls.clear()
    again, job = _redeploy(uow, clock, runtime, admin, service.id)
    ops = _ops(runtime)
    runs = [name for op, name in ops if op == "run"]
    # the new set beside the old one (the health gate), then a second web on the port it keeps
    assert len(runs) == 3 and runs[2].endswith("-k") and runs[2].startswith("slw-web-web-")
    assert [op for op, _ in ops] == ["run", "run", "remove_container", "remove_container", "run",
                                     "remove_container"]
    assert _port(runtime, service.id) == first
    detail = services.get_service(uow, admin, service.id)
    assert detail.url == f"http://127.0.0.1:{first}" and job.state == "succeeded"
    with uow.reading():
        assert [r.upstream for r in uow.routes.for_service(service.id)] in ([], [f"http://127.0.0.1:{first}"])
        assert uow.services.host_ports(service.id) == {("web", 8080, "tcp"): first}
    assert _moved(uow, admin, service.id) == []


def test_a_failing_gated_redeploy_leaves_the_old_set_on_its_port(uow, clock, admin, customer, methods, runtime):
    service = _deployed(uow, clock, admin, customer, methods, runtime)
    first = _port(runtime, service.id)
    runtime.exit_on_run = True  # the new set exits at once: it never passes the gate
    again, job = _redeploy(uow, clock, runtime, admin, service.id)
    assert job.state == "failed" and again.status == "running" and _port(runtime, service.id) == first
    runtime.exit_on_run = False
    _redeploy(uow, clock, runtime, admin, service.id)
    assert _port(runtime, service.id) == first


def test_behind_a_proxy_a_redeploy_stays_gated_and_keeps_the_port(uow, clock, admin, customer, methods, runtime):
    service = _deployed(uow, clock, admin, customer, methods, runtime, base_domain=DOMAIN)
    first = _port(runtime, service.id)
    runtime.calls.clear()
    again, job = _redeploy(uow, clock, runtime, admin, service.id, base_domain=DOMAIN)
    ops = [op for op, _ in _ops(runtime)]
    assert ops.index("run") < ops.index("remove_container")  # the new set started beside the old one
    assert job.state == "succeeded" and _port(runtime, service.id) == first and again.url == f"https://web.{DOMAIN}"
    assert _moved(uow, admin, service.id) == []


def test_a_host_port_in_compose_is_the_composes_and_is_not_kept(uow, clock, admin, customer, methods, runtime):
    compose = dump_compose({"services": {"web": {"image": "docker.io/library/busybox:latest",
                                                 "ports": ["20080:8080", "9090"]}}})
    service, job = services.create_service(
        uow, clock, admin, {"name": "fixed", "deploy_method": "compose", "customer_id": customer.id,
                            "compose": compose}, {"compose": _Compose()}, {}, QUOTA)
    done, _ = _run(uow, clock, runtime, job)
    (state,) = runtime.containers(service.id)
    assert state.ports[8080] == 20080 and done.url == "http://127.0.0.1:20080"
    with uow.reading():
        assert uow.services.host_ports(service.id) == {("web", 9090, "tcp"): state.ports[9090]}
    _redeploy(uow, clock, runtime, admin, service.id)
    (state2,) = runtime.containers(service.id)
    assert state2.labels[JOB_LABEL] != state.labels[JOB_LABEL] and state2.ports == state.ports


def test_the_choice_helpers():
    plan = parse(dump_compose({"services": {"a": {"image": "x", "ports": ["80", "81/udp", "20001:82"]}}}), {})
    preferred = host_ports.prefer(plan, {("a", 80, "tcp"): 20500, ("a", 82, "tcp"): 20999})
    assert [p.preferred for p in preferred.components[0].ports] == [20500, None, None]
    assert host_ports.kept_in(preferred) and not host_ports.kept_in(plan)
    assert host_ports.prefer(plan, {}) is plan
    assert host_ports.moved({("a", 80, "tcp"): 20500}, {("a", 80, "tcp"): 20600}) == [("a", 80, "tcp", 20500, 20600)]
    assert host_ports.moved({("a", 80, "tcp"): 20500}, {("a", 80, "tcp"): 20600}, held=(20500,)) == []
    assert host_ports.moved({("a", 80, "tcp"): 20500}, {("a", 80, "tcp"): 20500}) == []
    assert PortSpec(80).preferred is None


class _Compose:
    """A compose method whose request carries its compose text."""

    name = "compose"

    def plan(self, request, catalog):
        return parse(request["compose"], {})

    def prepare(self, service, runtime, workdir, progress, cancel=None):
        return None


def test_a_deploy_asked_for_before_the_take_back_takes_the_kept_port_itself(uow, clock, admin, customer, methods,
                                                                            runtime):
    service = _deployed(uow, clock, admin, customer, methods, runtime)
    first = _port(runtime, service.id)
    queued = []

    def another_deploy_asked_for():  # told of the switch: a redeploy is asked for before the take-back
        if not queued:
            queued.append(services.redeploy(uow, clock, admin, service.id, QUOTA)[1])

    _, job = services.redeploy(uow, clock, admin, service.id, QUOTA)
    run_job(uow, Deployer(clock, runtime, DeploySettings(settle_seconds=0, drain_seconds=0),
                          routes_changed=another_deploy_asked_for), job)
    names = [s.name for s in runtime.containers(service.id)]
    assert len(names) == 2 and not any(n.endswith("-k") for n in names)  # no take-back: it was deploying again
    assert _port(runtime, service.id) != first
    with uow.reading():
        assert uow.services.host_ports(service.id) == {("web", 8080, "tcp"): first}  # still the kept one
    done, next_job = _run(uow, clock, runtime, queued[0])
    assert next_job.state == "succeeded" and _port(runtime, service.id) == first
    assert done.url == f"http://127.0.0.1:{first}" and _moved(uow, admin, service.id) == []
