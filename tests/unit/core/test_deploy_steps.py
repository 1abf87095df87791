"""The deploy job's rules of time (core.panel.deploy_job), with a driven clock and the fake
engine: the health-gated switch, the health timeout, the settle window, the drain and a
cancel mid-job. Every wait goes through the clock port, so these jobs wait 90 s, 3 s or 2 s
of the driven clock in no time; the clock runs what a test scheduled at its moment (a
container turning healthy, exiting, a cancel)."""
from __future__ import annotations

import threading
from dataclasses import replace

import pytest

from core.panel import deploys, releases, services
from core.panel.containers import JOB_LABEL, NotInEngine
from core.panel.customers import Quota
from core.panel.containers import TAKE_BACK_SUFFIX
from core.panel.deploy_job import (DELETE_GRACE_SECONDS, DELETE_REMOVAL_SECONDS, STEPS, Deployer,
                                   DeploySettings, run_job)
from tests.support.fakes import FakeResolver, parse

QUOTA = Quota(services=20, memory_mb=4096, cpus=4, read_compose=parse)
DOMAIN = "apps.example.test"
#: the operator's defaults but no registry lookup (there is no network in a unit test)
SETTINGS = DeploySettings(health_timeout=90, settle_seconds=3.0, drain_seconds=2.0, base_domain=DOMAIN,
                          registry_allow_private=True, quota=QUOTA)


class Moments:
    """When (on the driven clock) each thing of interest happened."""

    def __init__(self, clock):
        self.clock, self.seen = clock, []

    def mark(self, what: str) -> None:
        self.seen.append((what, self.clock.monotonic()))

    def at(self, what: str) -> float:
        return next(moment for name, moment in self.seen if name == what)


def _run(uow, clock, runtime, job, *, cancel=None, routes_changed=lambda: None, **settings):
    deployer = Deployer(clock, runtime, replace(SETTINGS, **settings), routes_changed=routes_changed,
                        resolver=FakeResolver())
    run_job(uow, deployer, job, cancel=cancel)
    with uow:
        return uow.services.get(job.service_id), uow.deploy_jobs.get(job.id)


def _routes(uow, service_id):
    with uow:
        return [r.target for r in uow.routes.for_service(service_id)]


def _message(uow, admin, service_id) -> str:
    return services.list_events(uow, admin, service_id, page=1, per_page=1)[0][0].message


@pytest.fixture
def deployed(uow, clock, admin, customer, methods, runtime):
    """A service running its first release (deployed with the default settle window)."""
    _, job = services.create_service(uow, clock, admin, {"name": "web", "deploy_method": "compose",
                                                         "customer_id": customer.id}, methods, {}, QUOTA)
    service, job = _run(uow, clock, runtime, job)
    assert (service.status, job.state) == ("running", "succeeded")
    return service


def _starting(runtime):
    """Containers started from now on report their healthcheck ``starting``; returns the
    function that makes them all healthy."""
    run = runtime.run

    def run_starting(spec):
        cid = run(spec)
        runtime.states[cid] = replace(runtime.states[cid], health="starting")
        return cid

    runtime.run = run_starting

    def healthy():
        for cid, state in list(runtime.states.items()):
            if state.health == "starting":
                runtime.states[cid] = replace(state, health="healthy")
    return healthy


def test_the_steps_run_in_this_order():
    assert [step.__name__ for step in STEPS] == [
        "check_target", "prepare_source", "read_plan", "check_images", "clear_slate", "create_network",
        "create_volumes", "start_containers", "wait_healthy", "take_back_ports", "switch_release"]


def test_a_first_deploy_waits_the_settle_window_on_the_clock(uow, clock, admin, customer, methods, runtime):
    _, job = services.create_service(uow, clock, admin, {"name": "web", "deploy_method": "compose",
                                                         "customer_id": customer.id}, methods, {}, QUOTA)
    start = clock.monotonic()
    service, job = _run(uow, clock, runtime, job, settle_seconds=3)
    assert (service.status, job.state) == ("running", "succeeded")
    assert clock.monotonic() - start == pytest.approx(3, abs=0.31)  # polls of 0.3 s until 3 s have passed
    assert set(clock.slept) == {0.3}


def test_the_switch_waits_for_the_new_set_to_be_healthy_and_settled(uow, clock, admin, runtime, deployed):
    (old,) = runtime.containers(deployed.id)
    before = _routes(uow, deployed.id)
    moments = Moments(clock)
    clock.at(10, _starting(runtime))  # the new set's healthcheck passes 10 s after the job starts
    clock.at(11, lambda: moments.mark("still serving") if _routes(uow, deployed.id) == before else None)
    _, job = services.redeploy(uow, clock, admin, deployed.id, QUOTA)
    start = clock.monotonic()
    service, job = _run(uow, clock, runtime, job, routes_changed=lambda: moments.mark("switched"))
    assert (service.status, service.release, job.state) == ("running", 2, "succeeded")
    assert moments.at("still serving") - start == pytest.approx(11)  # healthy but not settled yet: no switch
    assert moments.at("switched") - start >= 10 + SETTINGS.settle_seconds  # healthy, then settled
    assert _routes(uow, deployed.id) != before and old.id not in runtime.states
    (new,) = runtime.containers(deployed.id)
    assert new.labels[JOB_LABEL] == job.id and new.health == "healthy"


def test_a_health_timeout_fails_the_job_and_the_old_release_keeps_serving(uow, clock, admin, runtime, deployed):
    (old,) = runtime.containers(deployed.id)
    before = _routes(uow, deployed.id)
    _starting(runtime)  # never healthy
    _, job = services.redeploy(uow, clock, admin, deployed.id, QUOTA)
    start = clock.monotonic()
    service, job = _run(uow, clock, runtime, job, health_timeout=30)
    assert clock.monotonic() - start == pytest.approx(30, abs=0.31)  # 30 s of the clock, none of the test's
    assert (service.status, service.release, job.state) == ("running", 1, "failed")
    assert "containers not running and healthy after 30 s" in job.error
    assert "the previous release keeps running" in _message(uow, admin, deployed.id)
    assert runtime.containers(deployed.id) == [old] and _routes(uow, deployed.id) == before


def test_a_health_timeout_fails_a_first_deploy(uow, clock, admin, customer, methods, runtime):
    _starting(runtime)
    _, job = services.create_service(uow, clock, admin, {"name": "web", "deploy_method": "compose",
                                                         "customer_id": customer.id}, methods, {}, QUOTA)
    service, job = _run(uow, clock, runtime, job)  # the default timeout: 90 s of the driven clock
    assert (service.status, job.state) == ("failed", "failed")
    assert "after 90 s (healthcheck failing: slw-web-web-" in job.error


@pytest.mark.parametrize("exits_at, status", [(2.0, "failed"), (4.0, "running")])
def test_a_container_that_exits_within_the_settle_window_fails_the_deploy(uow, clock, admin, customer, methods,
                                                                          runtime, exits_at, status):
    """Right after a start a container that is about to exit still shows running: only one
    still running at the end of the settle window (3 s) is a success."""
    def exit_now():
        for cid, state in list(runtime.states.items()):
            runtime.states[cid] = replace(state, running=False, status="exited", exit_code=3)

    _, job = services.create_service(uow, clock, admin, {"name": "web", "deploy_method": "compose",
                                                         "customer_id": customer.id}, methods, {}, QUOTA)
    clock.at(exits_at, exit_now)
    service, job = _run(uow, clock, runtime, job, settle_seconds=3)
    assert service.status == status
    if status == "failed":
        assert "exited with code 3" in job.error


def test_the_old_set_stops_a_drain_after_the_proxy_serves_the_switch(uow, clock, admin, runtime, deployed):
    """(Of a service whose components keep no host port, as one deployed before ports were
    kept: a component that keeps one moves onto it before the switch, below.)"""
    with uow:
        uow.services.keep_host_ports(deployed.id, {})
        uow.commit()
    (old,) = runtime.containers(deployed.id)
    moments = Moments(clock)
    stop = runtime.stop

    def stopping(cid, timeout=10):
        moments.mark(f"stop {cid}")
        stop(cid, timeout)

    runtime.stop = stopping
    _, job = services.redeploy(uow, clock, admin, deployed.id, QUOTA)
    service, job = _run(uow, clock, runtime, job, drain_seconds=7, routes_changed=lambda: moments.mark("served"))
    assert job.state == "succeeded"
    assert moments.at(f"stop {old.id}") - moments.at("served") == pytest.approx(7)
    assert old.id not in runtime.states


def test_a_cancel_while_waiting_removes_the_new_set_and_the_old_keeps_serving(uow, clock, admin, runtime, deployed):
    (old,) = runtime.containers(deployed.id)
    before = _routes(uow, deployed.id)
    _starting(runtime)  # the job waits for a healthcheck that never passes
    cancel = threading.Event()
    cancel.reason = deploys.CANCELLED
    clock.at(5, cancel.set)  # the worker's poll sees the cancel 5 s in
    _, job = services.redeploy(uow, clock, admin, deployed.id, QUOTA)
    start = clock.monotonic()
    service, job = _run(uow, clock, runtime, job, cancel=cancel)
    assert clock.monotonic() - start == pytest.approx(5, abs=0.31)  # stopped at the next poll
    assert (service.status, service.release, job.state, job.error) == ("running", 1, "cancelled", "cancelled")
    assert runtime.containers(deployed.id) == [old] and _routes(uow, deployed.id) == before


def test_a_cancel_of_a_first_deploy_mid_wait_leaves_nothing(uow, clock, admin, customer, methods, runtime):
    _starting(runtime)
    cancel = threading.Event()
    cancel.reason = deploys.CANCELLED
    clock.at(2, cancel.set)
    _, job = services.create_service(uow, clock, admin, {"name": "web", "deploy_method": "compose",
                                                         "customer_id": customer.id}, methods, {}, QUOTA)
    service, job = _run(uow, clock, runtime, job, cancel=cancel)
    assert (service.status, job.state, job.error) == ("failed", "cancelled", "cancelled")
    assert runtime.containers(service.id) == [] and ("remove_network", f"slw-{service.id}-"
                                                     f"{deploys.job_suffix(job)}") in runtime.calls


def _vanishing(runtime, then=None):
    """Every container's start finds it gone (a delete removed it between its create and
    its start), and ``then()`` runs as the engine says so."""
    def run(spec):
        runtime.calls.append(("run", spec.name))
        if then is not None:
            then()
        raise NotInEngine(f"starting container {spec.name}: no such container")
    runtime.run = run


def test_a_container_deleted_before_it_started_ends_the_job_as_the_deleted_services(uow, clock, admin, customer,
                                                                                  methods, runtime):
    """The delete removes the containers first and the row a moment later (here 1 s of the
    clock): the job gives it that moment and ends "service deleted", not with the engine's
    "no such container"."""
    _, job = services.create_service(uow, clock, admin, {"name": "web", "deploy_method": "compose",
                                                         "customer_id": customer.id}, methods, {}, QUOTA)
    _vanishing(runtime, then=lambda: clock.at(1, lambda: services.delete_service(uow, None, admin, job.service_id)))
    service, job = _run(uow, clock, runtime, job)
    assert service is None and (job.state, job.error) == ("failed", deploys.DELETED)


def test_a_container_gone_without_a_delete_fails_the_job_with_the_engines_words(uow, clock, admin, customer,
                                                                               methods, runtime):
    _, job = services.create_service(uow, clock, admin, {"name": "web", "deploy_method": "compose",
                                                         "customer_id": customer.id}, methods, {}, QUOTA)
    _vanishing(runtime)
    start = clock.monotonic()
    service, job = _run(uow, clock, runtime, job)
    assert (service.status, job.state) == ("failed", "failed")
    assert job.error == "starting container slw-web-web-" + deploys.job_suffix(job) + ": no such container"
    # none of its containers is in the engine, as while a delete removes the rest of the
    # service: it waits for the row that long, no more
    assert clock.monotonic() - start == pytest.approx(DELETE_REMOVAL_SECONDS, abs=0.31)


def test_a_container_stopped_by_a_delete_ends_the_job_as_the_deleted_services(uow, clock, admin, customer,
                                                                             methods, runtime):
    """The delete stops the job's container (the job sees it exit) and removes it, then the
    row: the job's failure is the delete, not the container's exit report."""
    _, job = services.create_service(uow, clock, admin, {"name": "web", "deploy_method": "compose",
                                                         "customer_id": customer.id}, methods, {}, QUOTA)
    runtime.exit_on_run, runtime.exit_code = True, 0
    containers, seen = runtime.containers, []

    def seen_then_deleted(service_id):  # the job sees its container stopped; the delete removes it next
        found = containers(service_id)
        if found and not seen:
            seen.append(found)
            for state in found:
                del runtime.states[state.id]
            clock.at(1, lambda: services.delete_service(uow, None, admin, job.service_id))
        return found
    runtime.containers = seen_then_deleted
    service, job = _run(uow, clock, runtime, job)
    assert service is None and (job.state, job.error) == ("failed", deploys.DELETED)


def test_a_delete_slow_to_remove_the_rest_still_ends_the_job_as_the_deleted_services(uow, clock, admin, customer,
                                                                                     methods, runtime):
    """The delete kills and removes the job's container at once, but removing the rest of
    the service (volumes, network, kept images) on a loaded engine takes 10 s of the clock,
    longer than the grace: the job waits while none of its containers is left (seen in CI:
    "exited with code 137" instead of "service deleted")."""
    _, job = services.create_service(uow, clock, admin, {"name": "web", "deploy_method": "compose",
                                                         "customer_id": customer.id}, methods, {}, QUOTA)
    runtime.exit_on_run, runtime.exit_code = True, 137
    containers, seen = runtime.containers, []

    def killed_then_deleted(service_id):
        found = containers(service_id)
        if found and not seen:
            seen.append(found)
            clock.at(0.5, lambda: [runtime.states.pop(state.id) for state in found])  # killed, then removed
            clock.at(10, lambda: services.delete_service(uow, None, admin, job.service_id))  # the row, 10 s on
        return found
    runtime.containers = killed_then_deleted
    start = clock.monotonic()
    service, job = _run(uow, clock, runtime, job)
    assert service is None and (job.state, job.error) == ("failed", deploys.DELETED)
    assert DELETE_GRACE_SECONDS < clock.monotonic() - start < DELETE_REMOVAL_SECONDS


def test_a_container_killed_without_a_delete_keeps_its_exit_report_after_the_grace(uow, clock, admin, customer,
                                                                                  methods, runtime):
    """Killed (137) some other way, out of memory say: the container stays in the engine, so
    after the grace the exit report is the reason."""
    _, job = services.create_service(uow, clock, admin, {"name": "web", "deploy_method": "compose",
                                                         "customer_id": customer.id}, methods, {}, QUOTA)
    runtime.exit_on_run, runtime.exit_code = True, 137
    start = clock.monotonic()
    service, job = _run(uow, clock, runtime, job)
    assert (service.status, job.state) == ("failed", "failed") and "exited with code 137" in job.error
    assert clock.monotonic() - start == pytest.approx(DELETE_GRACE_SECONDS, abs=0.31)


def test_a_container_that_exits_by_itself_keeps_its_exit_report_at_once(uow, clock, admin, customer, methods,
                                                                       runtime):
    _, job = services.create_service(uow, clock, admin, {"name": "web", "deploy_method": "compose",
                                                         "customer_id": customer.id}, methods, {}, QUOTA)
    runtime.exit_on_run = True
    start = clock.monotonic()
    service, job = _run(uow, clock, runtime, job)
    assert (service.status, job.state) == ("failed", "failed") and "exited with code 3" in job.error
    assert clock.monotonic() - start < DELETE_GRACE_SECONDS  # no delete's grace: its container is still there


@pytest.mark.parametrize("labels, gated", [("{slipway.backup: postgres}", False), ("{role: cache}", True)])
def test_a_database_is_not_gated_its_old_server_stops_before_the_new_one_starts(uow, clock, admin, runtime, deployed,
                                                                               labels, gated):
    """Two servers must never run on one data volume: a component labelled ``slipway.backup``
    makes redeploys stop the old set first (other labels change nothing)."""
    compose = (f"services:\n  db:\n    image: localhost/busybox:latest\n    labels: {labels}\n"
               "    volumes: ['data:/data']\nvolumes:\n  data: {}\n")
    with uow:
        uow.services.update(replace(uow.services.get(deployed.id), compose=compose))
        uow.commit()
    (old,) = runtime.containers(deployed.id)
    running_at_start, run = [], runtime.run

    def run_watching(spec):
        running_at_start.append([s.id for s in runtime.containers(deployed.id) if s.running])
        return run(spec)

    runtime.run = run_watching
    _, job = services.redeploy(uow, clock, admin, deployed.id, QUOTA)
    service, job = _run(uow, clock, runtime, job)
    assert (service.status, job.state) == ("running", "succeeded")
    assert running_at_start == ([[old.id]] if gated else [[]])


# --- host ports kept across redeploys, rollbacks and restarts ---------------------------------


def _host_port(runtime, service_id) -> int:
    (state,) = runtime.containers(service_id)
    (port,) = state.ports.values()
    return port


def _kept(uow, service_id) -> dict:
    with uow:
        return uow.services.host_ports(service_id)


def _messages(uow, admin, service_id) -> list:
    return [e.message for e in services.list_events(uow, admin, service_id, page=1, per_page=50)[0]]


def test_a_redeploy_and_a_rollback_keep_the_host_port(uow, clock, admin, runtime, deployed):
    port = _host_port(runtime, deployed.id)
    before = _routes(uow, deployed.id)
    assert _kept(uow, deployed.id) == {"web": {8080: port}}
    _, job = services.redeploy(uow, clock, admin, deployed.id, QUOTA)
    service, job = _run(uow, clock, runtime, job)
    assert (service.status, service.release, job.state) == ("running", 2, "succeeded")
    (new,) = runtime.containers(deployed.id)
    assert new.labels[JOB_LABEL] == job.id and new.name.endswith(TAKE_BACK_SUFFIX)  # moved onto the kept port
    assert _host_port(runtime, deployed.id) == port and _routes(uow, deployed.id) == before
    _, job, _ = releases.rollback(uow, clock, runtime, admin, deployed.id, None, services.redeploy, QUOTA)
    service, job = _run(uow, clock, runtime, job)
    assert (service.status, service.release, job.state) == ("running", 3, "succeeded")
    assert _host_port(runtime, deployed.id) == port and _kept(uow, deployed.id) == {"web": {8080: port}}
    assert not any("taken meanwhile" in m for m in _messages(uow, admin, deployed.id))


def test_the_old_container_gives_the_port_up_only_once_the_new_set_is_healthy(uow, clock, admin, runtime, deployed):
    """The take-back comes after the health gate: a new set that never gets healthy never
    stops the old container, which keeps its port and keeps serving."""
    (old,) = runtime.containers(deployed.id)
    _starting(runtime)
    _, job = services.redeploy(uow, clock, admin, deployed.id, QUOTA)
    service, job = _run(uow, clock, runtime, job, health_timeout=20)
    assert (service.status, service.release, job.state) == ("running", 1, "failed")
    assert runtime.containers(deployed.id) == [old] and ("stop", old.id) not in runtime.calls


def test_a_port_taken_meanwhile_gives_another_and_says_so(uow, clock, admin, runtime, deployed):
    port = _host_port(runtime, deployed.id)
    services.operate(uow, clock, runtime, admin, deployed.id, "stop", base_domain=DOMAIN, parse=parse)
    runtime.taken.add(port)  # something else listens there now
    _, job = services.redeploy(uow, clock, admin, deployed.id, QUOTA)  # not gated: nothing runs
    service, job = _run(uow, clock, runtime, job)
    assert (service.status, job.state) == ("running", "succeeded")
    now = _host_port(runtime, deployed.id)
    assert now != port and _kept(uow, deployed.id) == {"web": {8080: now}}
    assert f"host port {port} of web (port 8080) was taken meanwhile: it now has host port {now}" \
        in _messages(uow, admin, deployed.id)


def test_a_take_back_that_fails_keeps_the_other_port_and_says_so(uow, clock, admin, runtime, deployed):
    port = _host_port(runtime, deployed.id)
    run = runtime.run

    def no_take_back(spec):
        if spec.name.endswith(TAKE_BACK_SUFFIX):
            raise RuntimeError("address already in use")
        return run(spec)

    runtime.run = no_take_back
    _, job = services.redeploy(uow, clock, admin, deployed.id, QUOTA)
    service, job = _run(uow, clock, runtime, job)
    assert (service.status, service.release, job.state) == ("running", 2, "succeeded")
    now = _host_port(runtime, deployed.id)
    assert now != port and _kept(uow, deployed.id) == {"web": {8080: now}}
    assert _routes(uow, deployed.id) == [f"http://127.0.0.1:{now}"]
    assert any(f"host port {port} of web" in m for m in _messages(uow, admin, deployed.id))


def test_a_cancel_during_the_take_back_starts_the_old_container_again(uow, clock, admin, runtime, deployed):
    (old,) = runtime.containers(deployed.id)
    before = _routes(uow, deployed.id)
    healthy = _starting(runtime)
    clock.at(10, healthy)  # the new set: healthy at 10 s, settled at 13 s; its take-back never gets healthy
    cancel = threading.Event()
    cancel.reason = deploys.CANCELLED
    clock.at(20, cancel.set)
    _, job = services.redeploy(uow, clock, admin, deployed.id, QUOTA)
    service, job = _run(uow, clock, runtime, job, cancel=cancel)
    assert ("stop", old.id) in runtime.calls  # the take-back had begun
    assert (service.status, service.release, job.state) == ("running", 1, "cancelled")
    assert [(s.id, s.running) for s in runtime.containers(deployed.id)] == [(old.id, True)]
    assert _routes(uow, deployed.id) == before


def test_no_request_is_left_unanswered_while_a_port_is_taken_back(uow, clock, admin, runtime, deployed):
    """The route points at the new set (on its other port) and the proxy serves that, a
    drain before the old container stops; the container on the other port goes only after
    the proxy serves the switch back to the kept port."""
    (old,) = runtime.containers(deployed.id)
    port = _host_port(runtime, deployed.id)
    moments = Moments(clock)
    seen = {}
    stop, remove = runtime.stop, runtime.remove_container

    def stopping(cid, timeout=10):
        if cid == old.id and "routes at the old stop" not in seen:  # (the retire stops it again: a no-op)
            seen["routes at the old stop"] = _routes(uow, deployed.id)
            moments.mark("old stops")
        stop(cid, timeout)

    def removing(cid):
        if cid != old.id and not runtime.states[cid].name.endswith(TAKE_BACK_SUFFIX):
            seen["routes when the other goes"] = _routes(uow, deployed.id)
            moments.mark("other goes")
        remove(cid)

    runtime.stop, runtime.remove_container = stopping, removing
    _, job = services.redeploy(uow, clock, admin, deployed.id, QUOTA)
    _, job = _run(uow, clock, runtime, job, drain_seconds=5, routes_changed=lambda: moments.mark("served"))
    assert job.state == "succeeded"
    served = [moment for name, moment in moments.seen if name == "served"]
    assert len(served) == 2 and moments.at("old stops") - served[0] == pytest.approx(5)
    assert seen["routes at the old stop"] != [f"http://127.0.0.1:{port}"]  # the new set, on its other port
    assert moments.at("other goes") - served[1] == pytest.approx(5)
    assert seen["routes when the other goes"] == [f"http://127.0.0.1:{port}"] == _routes(uow, deployed.id)


def test_a_failure_after_the_route_moved_puts_it_back(uow, clock, admin, runtime, deployed):
    before = _routes(uow, deployed.id)
    healthy = _starting(runtime)
    clock.at(10, healthy)
    cancel = threading.Event()
    cancel.reason = deploys.CANCELLED
    clock.at(20, cancel.set)  # while the take-back's container is not healthy yet
    _, job = services.redeploy(uow, clock, admin, deployed.id, QUOTA)
    service, job = _run(uow, clock, runtime, job, cancel=cancel)
    assert job.state == "cancelled" and _routes(uow, deployed.id) == before
    assert service.url == deployed.url
