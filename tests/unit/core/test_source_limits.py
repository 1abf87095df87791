"""Customer limits of git and ai deploys: their compose is known only after the job's
source step (clone, build), so the job counts it there, against the customer's limits,
before anything of it starts; with the in-memory unit of work and the fake engine."""
from __future__ import annotations

import pytest

from core.panel import customers, routes, services
from core.panel.compose.plan import DeployPlan
from core.panel.customers import Quota
from core.panel.deploy_job import Deployer, DeploySettings, run_job
from ports.deploy import Prepared
from tests.support.fakes import FakeMethod, FakeResolver, compose_of, parse

QUOTA = Quota(services=20, memory_mb=4096, cpus=4, read_compose=parse)
DOMAIN = "apps.example.test"


class GitLikeMethod:
    """A deploy method like ``git``: no components before the build; each ``prepare``
    answers the next of ``composes`` (the repository's compose at that commit)."""

    name = "git"

    def __init__(self, *composes):
        self.composes = list(composes)
        self.prepared = 0

    def plan(self, request, catalog):
        return DeployPlan(compose="", components=(), source={"git_url": request["git_url"]})

    def prepare(self, service, runtime, workdir, progress, cancel=None):
        compose = self.composes[min(self.prepared, len(self.composes) - 1)]
        self.prepared += 1
        return Prepared(compose=compose, note=f"commit c{self.prepared} on main", commit=f"c{self.prepared}")


def _tiny(count):
    return compose_of([(f"c{i}", 6, ()) for i in range(count)])  # mem_limit: 6m on every component


def _customer(uow, clock, **limits):
    return customers.create_customer(uow, clock, name="Acme", limits={"memory_mb": 100000, "cpus": 1000, **limits})


def _create_git(uow, clock, admin, customer, method, name="repo"):
    request = {"name": name, "deploy_method": "git", "customer_id": customer.id, "git_url": "file:///repo"}
    return services.create_service(uow, clock, admin, request, {"git": method}, {}, QUOTA)


def _run(uow, clock, runtime, job, method):
    # registry_allow_private: the fake plans' registry host (docker.io) is not looked up, there is no network here
    settings = DeploySettings(health_timeout=90, base_domain=DOMAIN, settle_seconds=0, drain_seconds=0, quota=QUOTA,
                              registry_allow_private=True)
    run_job(uow, Deployer(clock, runtime, settings, methods={"git": method},
                          resolver=FakeResolver()), job, workdir="/nonexistent-work")
    with uow:
        return uow.services.get(job.service_id), uow.deploy_jobs.get(job.id)


def _started(runtime):
    return [c for c in runtime.calls if c[0] == "run"]


def _timeline(uow, admin, service_id):
    events, _ = services.list_events(uow, admin, service_id, page=1, per_page=50)
    return [(e.type, e.status, e.message) for e in reversed(events)]


def test_a_first_build_past_the_containers_limit_fails_and_starts_nothing(uow, clock, admin, runtime):
    acme = _customer(uow, clock, containers=2)
    method = GitLikeMethod(_tiny(3))
    service, job = _create_git(uow, clock, admin, acme, method)
    assert service.containers == 1  # the one default container counted before the build
    done, job = _run(uow, clock, runtime, job, method)
    assert job.state == "failed" and "limits.containers" in job.error, job.error
    assert "3 containers, past its limit of 2" in job.error
    assert done.status == "failed" and not _started(runtime) and runtime.containers(service.id) == []
    assert not [c for c in runtime.calls if c[0] in ("create_network", "create_volume", "pull_image")]
    assert (done.containers, done.compose) == (1, "")  # what was counted stays; the refused plan is not kept
    assert ("deploy", "failed") == _timeline(uow, admin, service.id)[-1][:2]
    assert "limits.containers" in _timeline(uow, admin, service.id)[-1][2]


@pytest.mark.parametrize("limit, field", [({"memory_mb": 600}, "limits.memory_mb"), ({"cpus": 1}, "limits.cpus")])
def test_memory_and_cpus_of_a_build_are_checked_too(uow, clock, admin, runtime, limit, field):
    # created, it counts one default container (512 MB, 1 CPU); built, three of 256 MB and 0.5 CPU
    acme = customers.create_customer(uow, clock, name="Acme", limits=limit)
    method = GitLikeMethod(compose_of([(f"c{i}", 256, ()) for i in range(3)]))
    service, job = _create_git(uow, clock, admin, acme, method)
    done, job = _run(uow, clock, runtime, job, method)
    assert job.state == "failed" and field in job.error and not _started(runtime)


def test_a_build_counts_in_place_of_what_the_service_counted_and_others_as_stored(uow, clock, admin, runtime,
                                                                                  methods):
    acme = _customer(uow, clock, containers=4)
    other, job = services.create_service(uow, clock, admin, {"name": "other", "deploy_method": "compose",
                                                             "customer_id": acme.id}, methods, {}, QUOTA)
    assert _run(uow, clock, runtime, job, FakeMethod())[0].status == "running"  # 1 container
    method = GitLikeMethod(_tiny(3))
    service, job = _create_git(uow, clock, admin, acme, method)
    done, job = _run(uow, clock, runtime, job, method)  # 1 + 3 = 4: its own default container is replaced
    assert job.state == "succeeded" and done.status == "running", job.error
    assert (done.containers, done.memory_mb, done.millicpus) == (3, 18, 1500)  # what it runs, counted
    _, again = services.redeploy(uow, clock, admin, service.id, QUOTA)  # not stuck: the same size is no growth
    assert _run(uow, clock, runtime, again, method)[1].state == "succeeded"


def test_of_two_jobs_of_one_customer_the_second_sees_what_the_first_counted(uow, clock, admin, runtime):
    acme = _customer(uow, clock, containers=6)
    first, second = GitLikeMethod(_tiny(4)), GitLikeMethod(_tiny(4))
    one, job_one = _create_git(uow, clock, admin, acme, first, name="one")
    two, job_two = _create_git(uow, clock, admin, acme, second, name="two")  # 1 + 1 counted
    assert _run(uow, clock, runtime, job_one, first)[1].state == "succeeded"  # 4 + 1
    done, job = _run(uow, clock, runtime, job_two, second)  # 4 + 4 > 6
    assert job.state == "failed" and "8 containers, past its limit of 6 (limits.containers" in job.error
    assert runtime.containers(two.id) == [] and len(runtime.containers(one.id)) == 4


def test_a_redeploy_whose_build_is_past_a_limit_leaves_the_old_release_serving(uow, clock, admin, runtime):
    acme = _customer(uow, clock, containers=2)
    method = GitLikeMethod(_tiny(1), _tiny(3))
    service, job = _create_git(uow, clock, admin, acme, method)
    deployed, _ = _run(uow, clock, runtime, job, method)
    assert deployed.status == "running" and deployed.release == 1
    (old,) = runtime.containers(service.id)
    (route,) = routes.list_routes(uow)
    runtime.calls.clear()
    _, job = services.redeploy(uow, clock, admin, service.id, QUOTA)  # the kept compose counts 1: queued
    done, job = _run(uow, clock, runtime, job, method)  # the new commit's compose has 3
    assert job.state == "failed" and "limits.containers" in job.error, job.error
    assert not _started(runtime) and runtime.containers(service.id) == [old] and old.running
    assert done.status == "running" and done.release == 1 and done.url == deployed.url
    assert (done.compose, done.commit, done.containers) == (deployed.compose, "c1", 1)
    assert routes.list_routes(uow) == [route]
    kind, status, message = _timeline(uow, admin, service.id)[-1]
    assert (kind, status) == ("redeploy", "failed") and "the previous release keeps running" in message
