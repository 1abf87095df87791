"""Deploy on push through a real uvicorn server, real git and a real engine: for each
git provider (GitHub, GitLab, Gitea, Bitbucket Cloud), a push payload shaped and signed
as its documentation says redeploys the service to the pushed commit (also when the
branch moved on past it since: the commit is fetched by its hash) and the page serves
it; a wrong signature is 401 and queues nothing; a repeated delivery runs nothing; a
ping is 204; a push to another branch is ignored. Ten pushes in two seconds end in one
deploy of the last commit beyond the one already running."""
from __future__ import annotations

import os
import time

import httpx
import pytest

from app.storage.database import open_database
from tests.support.engine import wait_for
from tests.support.git_repos import CONTAINERFILE, _create, commit, git, repository
from tests.support.git_webhooks import PROVIDERS, ping, push
from tests.support.panel_server import _get, _until

pytestmark = pytest.mark.runtime

FAST = {"SLIPWAY_RATE_ANON_RPM": "6000", "SLIPWAY_DEPLOY_SETTLE": "1", "SLIPWAY_DEPLOY_DRAIN": "0.5"}


def deliver(client, service_id, headers, body) -> httpx.Response:
    """A delivery as the provider sends it: no API key."""
    return client.post(f"/api/hooks/git/{service_id}", content=body,
                       headers={**headers, "Authorization": ""})


def job_status(client, service_id, job_id) -> str:
    return client.get(f"/api/services/{service_id}/deploys/{job_id}").json()["status"]


def finished(client, service_id, job_id, seconds=180) -> str:
    return wait_for(lambda: (lambda s: s if s in ("succeeded", "failed", "cancelled") else None)(
        job_status(client, service_id, job_id)), f"job {job_id} to end", timeout=seconds)


def job_count(client, service_id) -> int:
    return client.get(f"/api/services/{service_id}/deploys", params={"per_page": 100}).json()["total"]


def push_jobs(database_url, service_id) -> list[tuple]:
    """(commit, state) of the service's push deploys, oldest first."""
    db = open_database(database_url)
    mark = "%s" if "postgres" in database_url else "?"
    try:
        with db.connection_context():
            return db.execute_sql(f"SELECT source_commit, state FROM deploy_job WHERE service_id = {mark} AND "
                                  f"created_by LIKE {mark} ORDER BY created_at, id", (service_id, "git:%")).fetchall()
    finally:
        db.close()


def settled(tmp_path) -> None:
    """The worker removes a job's folder after it recorded the job's end (and retired the
    old set): wait for that state before the server stops."""
    wait_for(lambda: not os.listdir(tmp_path / "work"), "the jobs' work folders to be removed")


def deployed_site(start_panel, tmp_path, name):
    client, customer, made = start_panel(**FAST)
    repo = tmp_path / f"repo-{name}"
    url, first = repository(repo, {"Containerfile": CONTAINERFILE, "index.html": "version one\n"})
    service_id = _create(client, customer, made, name, deploy_method="git", git_url=url, git_branch="main")
    detail = _until(client, service_id, "running", seconds=180)
    assert detail["commit"] == first and "version one" in _get(detail["url"])
    secret = client.post(f"/api/services/{service_id}/webhook-secret").json()["secret"]
    return client, repo, service_id, secret


@pytest.mark.parametrize("start_panel", ["podman"], indirect=True)
@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_signed_push_deploys_the_pushed_commit(start_panel, tmp_path, provider):
    client, repo, service_id, secret = deployed_site(start_panel, tmp_path, f"push-{provider}")
    pushed = commit(repo, {"index.html": f"pushed through {provider}\n"}, "the pushed one")
    newer = commit(repo, {"index.html": "a newer one nobody pushed yet\n"}, "moved on")  # the branch moved on
    before = job_count(client, service_id)

    wrong_headers, wrong_body = push(provider, "not-the-secret", "main", pushed)
    assert deliver(client, service_id, wrong_headers, wrong_body).status_code == 401
    assert job_count(client, service_id) == before

    headers, body = push(provider, secret, "main", pushed)
    answer = deliver(client, service_id, headers, body)
    assert answer.status_code == 202, answer.text
    job_id = answer.json()["deploy_job_id"]
    assert finished(client, service_id, job_id) == "succeeded", client.get(
        f"/api/services/{service_id}/events").json()
    detail = client.get(f"/api/services/{service_id}").json()
    assert detail["status"] == "running" and detail["commit"] == pushed != newer
    assert f"pushed through {provider}" in _get(detail["url"])
    events = [e["message"] for e in client.get(f"/api/services/{service_id}/events").json()["data"]]
    assert any(pushed[:7] in message and provider in message for message in events), events

    again = deliver(client, service_id, headers, body)
    assert (again.status_code, again.json()) == (200, {"duplicate": True})
    elsewhere_headers, elsewhere_body = push(provider, secret, "feature", newer)
    elsewhere = deliver(client, service_id, elsewhere_headers, elsewhere_body)
    assert (elsewhere.status_code, elsewhere.json()) == (202, {"ignored": "branch"})
    if provider in ("github", "bitbucket"):  # the providers that have a ping event
        ping_headers, ping_body = ping(provider, secret)
        assert deliver(client, service_id, ping_headers, ping_body).status_code == 204
    assert job_count(client, service_id) == before + 1
    assert client.get(f"/api/services/{service_id}").json()["commit"] == pushed
    settled(tmp_path)


@pytest.mark.parametrize("start_panel", ["podman"], indirect=True)
def test_ten_pushes_in_two_seconds_end_in_one_deploy_of_the_last(start_panel, tmp_path, database_url):
    client, repo, service_id, secret = deployed_site(start_panel, tmp_path, "burst")
    commits = [commit(repo, {"index.html": f"burst {n}\n"}, f"burst {n}") for n in range(10)]
    before = job_count(client, service_id)
    started = time.monotonic()
    answers = []
    for n, sha in enumerate(commits):
        headers, body = push("github", secret, "main", sha, delivery=f"burst-{n}")
        answer = deliver(client, service_id, headers, body)
        assert answer.status_code == 202, answer.text
        answers.append(answer.json()["deploy_job_id"])
    assert time.monotonic() - started < 2
    last = answers[-1]
    assert finished(client, service_id, last) == "succeeded"
    detail = _until(client, service_id, "running")
    assert detail["commit"] == commits[-1] and "burst 9" in _get(detail["url"])
    jobs = push_jobs(database_url, service_id)
    # the first push's job may have started before the others came: it runs to its end; every later push
    # went into one queued job, which deployed the last commit
    assert jobs[-1] == (commits[-1], "succeeded")
    assert len(jobs) <= 2 and job_count(client, service_id) == before + len(jobs)
    assert len(set(answers)) == len(jobs)
    if len(jobs) == 2:
        assert jobs[0][0] in commits[:-1]
    settled(tmp_path)


@pytest.mark.parametrize("start_panel", ["podman"], indirect=True)
@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_push_to_the_cloned_default_branch_deploys_without_the_payload_naming_it(start_panel, tmp_path, provider):
    """A service without ``git_branch`` tracks the branch its last deploy cloned (the
    remote's default branch, here ``trunk``, recorded with the release): a push to it
    whose payload names no default branch (Bitbucket's never do) is queued and runs; a
    push to another branch queues nothing."""
    client, customer, made = start_panel(**FAST)
    repo = tmp_path / f"repo-{provider}"
    url, first = repository(repo, {"Containerfile": CONTAINERFILE, "index.html": "version one\n"})
    git(repo, "branch", "-m", "main", "trunk")  # the remote's default branch is not main
    service_id = _create(client, customer, made, f"cloned-{provider}", deploy_method="git", git_url=url)
    detail = _until(client, service_id, "running", seconds=180)
    assert detail["git_branch"] is None and detail["commit"] == first
    release = client.get(f"/api/services/{service_id}/releases").json()["data"][0]
    assert release["branch"] == "trunk"
    secret = client.post(f"/api/services/{service_id}/webhook-secret").json()["secret"]
    pushed = commit(repo, {"index.html": f"pushed to trunk through {provider}\n"}, "the pushed one")
    before = job_count(client, service_id)

    elsewhere_headers, elsewhere_body = push(provider, secret, "main", pushed, default_branch=None)
    elsewhere = deliver(client, service_id, elsewhere_headers, elsewhere_body)
    assert (elsewhere.status_code, elsewhere.json()) == (202, {"ignored": "branch"})
    assert job_count(client, service_id) == before

    headers, body = push(provider, secret, "trunk", pushed, default_branch=None)
    answer = deliver(client, service_id, headers, body)
    assert answer.status_code == 202, answer.text
    job_id = answer.json()["deploy_job_id"]
    assert finished(client, service_id, job_id) == "succeeded", client.get(
        f"/api/services/{service_id}/events").json()
    detail = client.get(f"/api/services/{service_id}").json()
    assert detail["commit"] == pushed and f"pushed to trunk through {provider}" in _get(detail["url"])
    assert job_count(client, service_id) == before + 1
    settled(tmp_path)
