"""The health rule: health, status and routes follow the release that serves. The set a
redeploy or rollback retires after its switch, and containers a start, stop or restart
is stopping and starting again, never count and write no ``unhealthy`` event. With the
in-memory unit of work and the fake engine."""
from __future__ import annotations

from dataclasses import replace

from core.panel import deploys, leases, releases, routes, services
from core.panel.containers import JOB_LABEL
from tests.unit.core.test_releases import QUOTA, _redeploy, _run, _timeline, deployed  # noqa: F401 (a fixture)


def _stopped(state):
    """What the engine shows of a container that is being stopped (Podman: ``stopping``,
    not running) or was: killed after its stop timeout."""
    return replace(state, running=False, status="exited", exit_code=137)


def _health_events(uow, admin, service_id):
    return [e for e in _timeline(uow, admin, service_id) if e[0] == "health"]



def _without_kept_ports(uow, service_id):
    """As a service deployed before host ports were kept: its redeploy switches without a
    take-back of the host ports (whose order of steps tests/unit/core/test_deploy_steps.py
    holds), so the proxy is told once, after the switch."""
    with uow:
        uow.services.keep_host_ports(service_id, {})
        uow.commit()

def test_the_set_a_redeploy_retires_does_not_count(uow, clock, admin, runtime, deployed):
    _without_kept_ports(uow, deployed.id)
    (old,) = runtime.containers(deployed.id)
    checks = []

    def retiring():  # after the switch, before the old set stops: the monitor runs while it is killed
        runtime.states[old.id] = _stopped(runtime.states[old.id])
        checks.extend(deploys.check_health(uow, clock, runtime) for _ in range(3))

    service, job = _redeploy(uow, clock, runtime, admin, deployed.id, routes_changed=retiring)
    assert job.state == "succeeded" and checks == [0, 0, 0]
    after = services.get_service(uow, admin, deployed.id)
    assert after.status == "running" and after.release == 2 and after.health_failures == 0
    assert _health_events(uow, admin, deployed.id) == []
    assert [r.hostname for r in routes.list_routes(uow)] != []


def test_a_rollback_is_held_to_the_release_it_runs(uow, clock, admin, runtime, deployed):
    _redeploy(uow, clock, runtime, admin, deployed.id)
    (serving,) = runtime.containers(deployed.id)

    def retiring():
        runtime.states[serving.id] = _stopped(runtime.states[serving.id])
        deploys.check_health(uow, clock, runtime)
        deploys.check_health(uow, clock, runtime)

    _, job, target = releases.rollback(uow, clock, runtime, admin, deployed.id, None, services.redeploy, QUOTA)
    _, job = _run(uow, clock, runtime, job, routes_changed=retiring)
    after = services.get_service(uow, admin, deployed.id)
    assert job.state == "succeeded" and after.status == "running" and after.release == 3
    assert _health_events(uow, admin, deployed.id) == []


def test_only_the_serving_set_counts_a_stopped_container_of_it_still_fails(uow, clock, admin, runtime, deployed):
    _redeploy(uow, clock, runtime, admin, deployed.id)
    (serving,) = runtime.containers(deployed.id)
    # a leftover of an earlier job (a process that stopped before it removed the old set), exited
    runtime.states["c-leftover"] = _stopped(replace(serving, id="c-leftover", name="slw-web-web-leftover",
                                                    labels={**serving.labels, JOB_LABEL: "job_leftover"}))
    assert deploys.check_health(uow, clock, runtime) == 0 and deploys.check_health(uow, clock, runtime) == 0
    assert services.get_service(uow, admin, deployed.id).status == "running"
    runtime.states[serving.id] = _stopped(runtime.states[serving.id])  # the release's own container stops
    deploys.check_health(uow, clock, runtime)
    assert deploys.check_health(uow, clock, runtime) == 1
    assert services.get_service(uow, admin, deployed.id).status == "failed"
    assert _health_events(uow, admin, deployed.id)[-2:] == [("health", "unhealthy"), ("health", "failed")]


class _SwitchWhileReading:
    """A runtime whose container list is read, then a redeploy switches before the
    monitor writes its verdict: the list it holds is the old set's, being killed."""

    def __init__(self, runtime, switch):
        self.runtime, self.switch = runtime, switch

    def containers(self, service_id):
        states = self.runtime.containers(service_id)
        self.switch()
        return [_stopped(s) for s in states]

    def __getattr__(self, name):
        return getattr(self.runtime, name)


def test_a_verdict_read_before_the_switch_is_dropped(uow, clock, admin, runtime, deployed):
    done = []

    def switch():
        if not done:
            done.append(_redeploy(uow, clock, runtime, admin, deployed.id))

    deploys.check_health(uow, clock, _SwitchWhileReading(runtime, switch))
    after = services.get_service(uow, admin, deployed.id)
    assert after.status == "running" and after.release == 2 and after.health_failures == 0
    assert _health_events(uow, admin, deployed.id) == []


def test_a_restart_under_way_is_no_verdict(uow, clock, admin, runtime, deployed):
    restart, checks = runtime.restart, []

    def slow_restart(cid, timeout=10):  # the container shows stopped while it is stopped, then runs again
        runtime.states[cid] = _stopped(runtime.states[cid])
        checks.extend(deploys.check_health(uow, clock, runtime) for _ in range(3))
        restart(cid, timeout)

    runtime.restart = slow_restart
    services.operate(uow, clock, runtime, admin, deployed.id, "restart")
    assert checks == [0, 0, 0]
    deploys.check_health(uow, clock, runtime)
    after = services.get_service(uow, admin, deployed.id)
    assert after.status == "running" and after.health_failures == 0
    assert _health_events(uow, admin, deployed.id) == []
    with uow.reading():
        assert leases.operating(uow, clock, [deployed.id]) == set()  # the lease went with the operation


def test_a_lease_left_by_a_process_that_died_stops_counting(uow, clock, admin, runtime, deployed):
    with uow:
        leases.hold_operation(uow, clock, leases.operation_key(deployed.id))  # and the process never ended it
        uow.commit()
    (container,) = runtime.containers(deployed.id)
    runtime.states[container.id] = _stopped(container)
    assert deploys.check_health(uow, clock, runtime) == 0
    clock.advance(leases.OPERATION_S + 1)
    deploys.check_health(uow, clock, runtime)
    assert deploys.check_health(uow, clock, runtime) == 1
    assert services.get_service(uow, admin, deployed.id).status == "failed"


def test_two_operations_at_once_each_hold_their_own_lease(uow, clock, deployed):
    first, second = leases.operation_key(deployed.id), leases.operation_key(deployed.id)
    with uow:
        leases.hold_operation(uow, clock, first)
        leases.hold_operation(uow, clock, second)
        leases.end_operation(uow, first)  # the first ends while the second goes on
        uow.commit()
    with uow.reading():
        assert leases.operating(uow, clock, [deployed.id, "svc_other"]) == {deployed.id}
    with uow:
        leases.end_operation(uow, second)
        uow.commit()
    with uow.reading():
        assert leases.operating(uow, clock, [deployed.id]) == set()
