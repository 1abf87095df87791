"""Pushes deploy forward only (``core.panel.pushes``), with the in-memory unit of work and
the fake engine: which of the commits pushed into one job is the newest
(:func:`pushes.newest`), a push of the running release's commit or an ancestor ignored,
the commits of a queued job kept, and a job queued behind a newer deploy ending
cancelled without deploying. The same with real git and a real engine:
tests/integration/test_push_forward.py."""
from __future__ import annotations

from dataclasses import replace

import pytest

from core.panel import pushes, services
from core.panel.customers import Quota
from core.panel.deploy_job import Deployer, DeploySettings, run_job
from ports.deploy import Prepared
from ports.git_providers import GitEvent, Push
from tests.support.fakes import FakeResolver, compose_of, parse

QUOTA = Quota(services=20, memory_mb=4096, cpus=4, read_compose=parse)
C = ["%040x" % (0xC0FFEE0 + n) for n in range(8)]  # C[0] <- C[1] <- ... <- C[5] on main; C[6], C[7] off it
PARENT = {C[n]: C[n - 1] for n in range(1, 6)}


def is_ancestor(older: str, newer: str) -> bool:
    """The history of :data:`C` (main: C[0]..C[5])."""
    while newer in PARENT:
        newer = PARENT[newer]
        if newer == older:
            return True
    return False


def test_newest_is_the_one_no_other_descends_from_whatever_the_order_they_came_in():
    assert pushes.newest([C[3], C[1]], is_ancestor) == C[3]
    assert pushes.newest([C[1], C[3], C[2]], is_ancestor) == C[3]
    assert pushes.newest([C[2], C[2]], is_ancestor) == C[2]
    # unrelated commits (a rewritten branch, one the clone does not have): the last to come
    assert pushes.newest([C[4], C[6]], is_ancestor) == C[6]
    assert pushes.newest([C[6], C[2], C[1]], is_ancestor) == C[2]
    assert pushes.newest([], is_ancestor) is None
    assert pushes.newest([C[1], C[3]], lambda a, b: False) == C[3]  # a history it cannot read: arrival decides


class GitLike:
    """A deploy method that clones :data:`C`: it deploys ``commit`` (or the newest of
    ``commits``), the branch head C[5] without one, and answers its ancestry."""

    name = "git"
    request_schema = {"properties": {"git_url": {"type": "string"}, "git_branch": {"type": "string"}}}
    source_fields = ("git_url", "git_branch")
    fetches_source = deploys_on_push = previews = True  # what git says it is

    def __init__(self):
        self.asked = []

    def plan(self, request, catalog):
        return parse(compose_of(), {})

    def prepare(self, service, runtime, workdir, progress, cancel=None, commit=None, commits=()):
        self.asked.append((commit, tuple(commits)))
        chosen = pushes.newest(commits, is_ancestor) if commits else (commit or C[5])
        ancestry, at = [], chosen
        while at in PARENT:
            at = PARENT[at]
            ancestry.append(at)
        return Prepared(compose=compose_of(), note=f"commit {chosen[:12]}", commit=chosen, ancestry=tuple(ancestry))


@pytest.fixture
def git():
    return GitLike()


def _run(uow, clock, runtime, git, job, tmp_path):
    settings = DeploySettings(health_timeout=90, settle_seconds=0, drain_seconds=0)
    work = tmp_path / job.id
    work.mkdir()
    run_job(uow, Deployer(clock, runtime, settings, methods={"git": git},
                          resolver=FakeResolver()), job, workdir=str(work))
    with uow:
        return uow.services.get(job.service_id), uow.deploy_jobs.get(job.id)


@pytest.fixture
def deployed(uow, clock, admin, customer, runtime, git, tmp_path):
    """A git service whose release 1 runs C[2] (ancestors C[1], C[0]), with a webhook."""
    service, job = services.create_service(uow, clock, admin, {"name": "site", "deploy_method": "git",
                                                               "customer_id": customer.id}, {"git": git}, {}, QUOTA)
    with uow:
        uow.services.update(replace(uow.services.get(service.id), source={
            "git_url": "https://git.example.test/site.git", "git_branch": "main"}))
        uow.commit()
    with uow:
        uow.deploy_jobs.retarget(job.id, C[2], "system", clock.now(), commits=(C[2],))
        uow.commit()
    with uow:
        job = uow.deploy_jobs.get(job.id)
    done, finished = _run(uow, clock, runtime, git, job, tmp_path)
    assert (done.status, done.release, done.commit, finished.state) == ("running", 1, C[2], "succeeded")
    return done


def _push(uow, clock, service_id, commit, delivery):
    event = GitEvent(provider="github", kind="push", name="push", push=Push(branch="main", commit=commit))
    return pushes.receive(uow, clock, service_id, "github", delivery, event, methods={"git": GitLike()}, quota=QUOTA)


def _queued(uow, service_id):
    with uow:
        return uow.deploy_jobs.queued_push(service_id)


def test_the_release_keeps_the_ancestry_its_clone_read(uow, deployed):
    with uow:
        release = uow.releases.numbered(deployed.id, 1)
        assert release.commit == C[2] and uow.releases.ancestry(release.id) == tuple(sorted((C[0], C[1])))


def test_a_push_of_the_running_commit_or_an_ancestor_is_ignored_and_queues_nothing(uow, clock, deployed):
    for n, commit in enumerate((C[2], C[1], C[0])):
        outcome = _push(uow, clock, deployed.id, commit, f"replay-{n}")
        assert (outcome.status, outcome.body) == (202, {"ignored": "old commit"})
    assert _queued(uow, deployed.id) is None
    with uow:
        assert uow.services.get(deployed.id).status == "running"
    outcome = _push(uow, clock, deployed.id, C[3], "newer")
    assert outcome.status == 202 and _queued(uow, deployed.id).id == outcome.body["deploy_job_id"]


def test_the_running_release_decides_not_the_commit_a_failed_job_left_on_the_service(uow, clock, deployed):
    with uow:  # a job's source step keeps its commit on the service before the job fails later
        uow.services.update(replace(uow.services.get(deployed.id), commit=C[4]))
        uow.commit()
    outcome = _push(uow, clock, deployed.id, C[4], "again")
    assert "deploy_job_id" in outcome.body


def test_pushes_coalesced_into_one_job_deploy_the_newest_not_the_last(uow, clock, runtime, git, deployed, tmp_path):
    ids = {_push(uow, clock, deployed.id, commit, f"d-{n}").body["deploy_job_id"]
           for n, commit in enumerate((C[4], C[3], C[5], C[3]))}
    assert len(ids) == 1
    job = _queued(uow, deployed.id)
    assert job.commits == (C[4], C[3], C[5]) and job.commit == C[5]  # the same commit again joins nothing
    late = _push(uow, clock, deployed.id, C[3], "late")  # the last to come is older than C[5]
    assert late.body["deploy_job_id"] == job.id
    job = _queued(uow, deployed.id)
    assert job.commits == (C[4], C[3], C[5]) and job.commit == C[5]
    older = _push(uow, clock, deployed.id, C[4], "later")
    assert older.body["deploy_job_id"] == job.id
    done, finished = _run(uow, clock, runtime, git, _queued(uow, deployed.id), tmp_path)
    assert git.asked[-1][1] == (C[4], C[3], C[5])  # the method chose among them
    assert (finished.state, done.commit, done.release) == ("succeeded", C[5], 2)
    for commit in (C[5], C[4], C[1]):
        assert _push(uow, clock, deployed.id, commit, f"after-{commit}").body == {"ignored": "old commit"}


def test_a_queued_job_keeps_the_last_commits_only(uow, clock, deployed):
    extra = ["%040x" % (0xD00D00 + n) for n in range(pushes.KEEP_COMMITS + 5)]
    for n, commit in enumerate(extra):
        _push(uow, clock, deployed.id, commit, f"many-{n}")
    job = _queued(uow, deployed.id)
    assert job.commits == tuple(extra[-pushes.KEEP_COMMITS:]) and job.commit == extra[-1]


def test_a_job_queued_behind_a_newer_deploy_ends_cancelled_without_deploying(uow, clock, runtime, git, deployed,
                                                                             tmp_path):
    """A late push of C[1]... that came while a job deploying something newer ran: the
    release that runs when it starts knows it, so it deploys nothing."""
    from core.panel.services import DeployJob

    with uow:
        uow.services.update(replace(uow.services.get(deployed.id), status="deploying"))
        uow.deploy_jobs.add(DeployJob(id="job_late", service_id=deployed.id, kind="redeploy", state="running",
                                      created_at=clock.now(), updated_at=clock.now(), created_by="git:github",
                                      commit=C[1], commits=(C[0], C[1])))
        uow.commit()
    with uow:
        job = uow.deploy_jobs.get("job_late")
    asked = len(git.asked)
    done, finished = _run(uow, clock, runtime, git, job, tmp_path)
    assert finished.state == "cancelled" and finished.error.startswith("old commit")
    assert (done.status, done.release, done.commit) == ("running", 1, C[2])
    assert len(git.asked) == asked  # nothing was cloned
    # with one commit newer than the release among them, that one is deployed (the known ones dropped)
    with uow:
        uow.deploy_jobs.add(DeployJob(id="job_mixed", service_id=deployed.id, kind="redeploy", state="running",
                                      created_at=clock.now(), updated_at=clock.now(), created_by="git:github",
                                      commit=C[1], commits=(C[3], C[1])))
        uow.commit()
    with uow:
        job = uow.deploy_jobs.get("job_mixed")
    done, finished = _run(uow, clock, runtime, git, job, tmp_path)
    assert git.asked[-1] == (C[3], ())
    assert (finished.state, done.commit, done.release) == ("succeeded", C[3], 2)


def test_a_rollback_release_keeps_its_targets_ancestry(uow, clock, admin, runtime, git, deployed, tmp_path):
    _push(uow, clock, deployed.id, C[4], "forward")
    _run(uow, clock, runtime, git, _queued(uow, deployed.id), tmp_path)
    with uow:
        first = uow.releases.numbered(deployed.id, 1)
    _, job = services.redeploy(uow, clock, admin, deployed.id, QUOTA, kind="rollback", release=first)
    done, finished = _run(uow, clock, runtime, git, job, tmp_path)
    assert (finished.state, done.release, done.commit) == ("succeeded", 3, C[2])
    assert _push(uow, clock, deployed.id, C[1], "old").body == {"ignored": "old commit"}
    assert "deploy_job_id" in _push(uow, clock, deployed.id, C[4], "forward again").body
