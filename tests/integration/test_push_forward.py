"""Pushes deploy forward only, through a real uvicorn server, real git and a real engine: a
replayed delivery (a new delivery id) of the deployed commit or of one of its ancestors is
202 ``{"ignored": "old commit"}`` and queues nothing; a newer commit deploys; pushes
coalesced into one job with the older arriving last deploy the newer; a deploy of commit
X that failed does not make X count as deployed."""
from __future__ import annotations

import pytest

from tests.integration.test_push_deploys import (
    deliver,
    deployed_site,
    finished,
    job_count,
    push_jobs,
    settled,
)
from tests.support.git_repos import commit
from tests.support.git_webhooks import push
from tests.support.panel_server import _get, _until

pytestmark = pytest.mark.runtime


def _ignored(client, service_id, secret, sha) -> None:
    headers, body = push("github", secret, "main", sha)  # a delivery id of its own: not a duplicate
    answer = deliver(client, service_id, headers, body)
    assert (answer.status_code, answer.json()) == (202, {"ignored": "old commit"}), answer.text


@pytest.mark.parametrize("start_panel", ["podman"], indirect=True)
def test_a_replayed_push_of_the_deployed_commit_or_an_ancestor_is_ignored(start_panel, tmp_path):
    client, repo, service_id, secret = deployed_site(start_panel, tmp_path, "replay")
    first = client.get(f"/api/services/{service_id}").json()["commit"]
    middle = commit(repo, {"index.html": "version two\n"}, "two")
    newer = commit(repo, {"index.html": "version three\n"}, "three")
    headers, body = push("github", secret, "main", newer, delivery="forward")
    answer = deliver(client, service_id, headers, body)
    assert answer.status_code == 202, answer.text
    assert finished(client, service_id, answer.json()["deploy_job_id"]) == "succeeded"
    detail = _until(client, service_id, "running")
    assert detail["commit"] == newer and "version three" in _get(detail["url"])
    before = job_count(client, service_id)
    for old in (newer, middle, first):  # the deployed commit, then two of its ancestors
        _ignored(client, service_id, secret, old)
    assert job_count(client, service_id) == before
    detail = client.get(f"/api/services/{service_id}").json()
    assert (detail["status"], detail["commit"]) == ("running", newer) and "version three" in _get(detail["url"])
    settled(tmp_path)


@pytest.mark.parametrize("start_panel", ["podman"], indirect=True)
def test_pushes_coalesced_with_the_older_arriving_last_deploy_the_newer(start_panel, tmp_path, database_url):
    client, repo, service_id, secret = deployed_site(start_panel, tmp_path, "coalesce")
    shas = [commit(repo, {"index.html": f"step {n}\n"}, f"step {n}") for n in range(3)]
    answers = []
    # the newest first, the older ones late: the first push's job may start at once; the others join one job
    for n, sha in enumerate((shas[0], shas[2], shas[1])):
        headers, body = push("github", secret, "main", sha, delivery=f"coalesce-{n}")
        answer = deliver(client, service_id, headers, body)
        assert answer.status_code == 202, answer.text
        answers.append(answer.json()["deploy_job_id"])
    assert answers[1] == answers[2]  # the late one joined the job of the newer
    assert finished(client, service_id, answers[-1]) == "succeeded"
    detail = _until(client, service_id, "running")
    assert detail["commit"] == shas[2] and "step 2" in _get(detail["url"])
    jobs = push_jobs(database_url, service_id)
    assert jobs[-1][1] == "succeeded" and len(jobs) == len(set(answers))
    _ignored(client, service_id, secret, shas[1])  # and now it is an old commit
    assert client.get(f"/api/services/{service_id}").json()["commit"] == shas[2]
    settled(tmp_path)


@pytest.mark.parametrize("start_panel", ["podman"], indirect=True)
def test_a_failed_deploy_of_a_commit_does_not_make_it_count_as_deployed(start_panel, tmp_path):
    client, repo, service_id, secret = deployed_site(start_panel, tmp_path, "failed")
    broken = commit(repo, {"Containerfile": "FROM localhost/busybox:latest\nCMD [\"false\"]\n"}, "broken")
    headers, body = push("github", secret, "main", broken, delivery="broken-1")
    answer = deliver(client, service_id, headers, body)
    assert answer.status_code == 202, answer.text
    assert finished(client, service_id, answer.json()["deploy_job_id"]) == "failed"
    detail = _until(client, service_id, "running")  # the previous release kept serving
    assert "version one" in _get(detail["url"])
    headers, body = push("github", secret, "main", broken, delivery="broken-2")
    again = deliver(client, service_id, headers, body)
    assert again.status_code == 202 and "deploy_job_id" in again.json(), again.text  # not an old commit
    assert finished(client, service_id, again.json()["deploy_job_id"]) == "failed"
    settled(tmp_path)
