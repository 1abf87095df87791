"""The deploy job pins the ssh host key its clone was shown (``core.panel.host_keys``):
recorded with the compose and commit after the clone, handed to the next clone on the
service, kept when a clone fails; the detail shows its fingerprint. Core's fakes (no
engine, no git): the method stands for ``git`` and answers what its clone saw."""
from __future__ import annotations

from core.panel import customers, host_keys, services
from core.panel.compose.plan import DeployPlan
from core.panel.customers import Quota
from core.panel.deploy_job import Deployer, DeploySettings, run_job
from ports.deploy import Prepared
from tests.support.fakes import FakeResolver, compose_of, parse

QUOTA = Quota(services=20, memory_mb=4096, cpus=4, read_compose=parse)
KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl"
NEW = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIIazEu89wgQZ4bqs3d63QSMzYVa0MuJ2e2gKTKqu+UUO"


class SshMethod:
    """Like ``git`` over ssh: each ``prepare`` records the pin it was given and answers
    ``shows`` (the key its clone was shown), or fails as ssh's strict check does when a
    pin is given and the server shows another key."""

    name = "git"
    request_schema = {"required": ["git_url"], "properties": {"git_url": {"type": "string"}}}
    source_fields = ("git_url",)
    fetches_source = deploys_on_push = previews = True  # what git says it is

    def __init__(self, shows):
        self.shows, self.given = shows, []

    def plan(self, request, catalog):
        return DeployPlan(compose="", components=(), source={"git_url": request["git_url"]})

    def prepare(self, service, runtime, workdir, progress, cancel=None):
        self.given.append(service.ssh_host_key)
        if service.ssh_host_key is not None and service.ssh_host_key != self.shows:
            raise RuntimeError(host_keys.changed("cloning ssh://git@example.com/acme/site.git", service.ssh_host_key))
        return Prepared(compose=compose_of(), note="commit c1 on main", commit="c1", ssh_host_key=self.shows)


def _run(uow, clock, runtime, job, method):
    settings = DeploySettings(health_timeout=90, settle_seconds=0, drain_seconds=0, quota=QUOTA,
                              registry_allow_private=True)
    run_job(uow, Deployer(clock, runtime, settings, methods={"git": method}, resolver=FakeResolver()), job, workdir="/nonexistent-work")
    with uow:
        return uow.services.get(job.service_id), uow.deploy_jobs.get(job.id)


def test_the_first_clone_pins_and_a_later_one_shown_another_key_fails_keeping_the_pin(uow, clock, admin, runtime):
    acme = customers.create_customer(uow, clock, name="Acme")
    method = SshMethod(KEY)
    request = {"name": "site", "deploy_method": "git", "customer_id": acme.id,
               "git_url": "ssh://git@example.com/acme/site.git"}
    service, job = services.create_service(uow, clock, admin, request, {"git": method}, {}, QUOTA)
    assert service.ssh_host_key is None
    done, job = _run(uow, clock, runtime, job, method)
    assert job.state == "succeeded" and done.ssh_host_key == KEY and method.given == [None]
    assert host_keys.shown(done.ssh_host_key) == "SHA256:+DiY3wvvV6TuJJhbpZisF/zLDA0zPMSvHdkr4UvCOqU"

    _, again = services.redeploy(uow, clock, admin, service.id, QUOTA)
    assert _run(uow, clock, runtime, again, method)[1].state == "succeeded" and method.given[-1] == KEY

    method.shows = NEW  # the server's key changed
    _, again = services.redeploy(uow, clock, admin, service.id, QUOTA)
    kept, failed = _run(uow, clock, runtime, again, method)
    assert failed.state == "failed" and "host key changed" in failed.error, failed.error
    assert kept.ssh_host_key == KEY and kept.status == "running" and kept.release == done.release + 1

    forgotten = services.patch_service(uow, clock, admin, service.id, {"ssh_host_key": None}, {"git": method}, {})
    assert forgotten.ssh_host_key is None
    _, again = services.redeploy(uow, clock, admin, service.id, QUOTA)
    repinned, job = _run(uow, clock, runtime, again, method)
    assert job.state == "succeeded" and repinned.ssh_host_key == NEW and method.given[-1] is None
