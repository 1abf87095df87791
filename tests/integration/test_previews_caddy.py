"""Preview environments end to end: a real server (uvicorn, Podman, the ``caddy`` route
provider with a real Caddy) and a git repository on disk. A pull request opened against
the tracked branch (GitHub's signed ``pull_request`` deliveries to the service's
webhook, ``POST /api/hooks/git/{id}``) deploys a preview that serves its head branch at
its own host name through Caddy while the parent serves its own branch at its own;
an update redeploys it with the new commit; closing it removes the service, its
containers and its route; deleting the parent deletes a preview with it."""
from __future__ import annotations

import os
import time

import httpx
import pytest

from tests.support.caddy import running_caddy
from tests.support.git_repos import CONTAINERFILE, commit, git, repository
from tests.support.git_webhooks import github_pull_request
from tests.support.releases import wait_job

pytestmark = pytest.mark.runtime

BASE = "apps.example.test"


def _until(what, check, seconds=120, every=0.3):
    """Poll ``check()`` until it answers something true; that answer."""
    deadline = time.monotonic() + seconds
    while True:
        found = check()
        if found:
            return found
        assert time.monotonic() < deadline, f"still waiting for {what}"
        time.sleep(every)


def _page(caddy, hostname):
    try:
        answer = caddy.get(hostname, timeout=5)
    except httpx.HTTPError:
        return None
    return answer.text.strip() if answer.status_code == 200 else None


def _status(client, service_id, status):
    detail = client.get(f"/api/services/{service_id}").json()
    assert detail.get("status") != "failed", detail
    return detail if detail.get("status") == status else None


@pytest.mark.parametrize("start_panel", ["podman"], indirect=True)
def test_a_pull_request_previews_its_branch_through_caddy(start_panel, database_url, tmp_path):
    repo = tmp_path / "repo"
    url, _ = repository(repo, {"Containerfile": CONTAINERFILE, "index.html": "main page\n"})
    git(repo, "checkout", "-q", "-b", "feature")
    head = commit(repo, {"index.html": "preview one\n"}, "preview")
    git(repo, "checkout", "-q", "main")

    with running_caddy(tmp_path) as caddy:
        routes = {"SLIPWAY_BASE_DOMAIN": BASE, "SLIPWAY_ROUTES": "caddy", "SLIPWAY_CADDY_ADMIN": caddy.admin_url,
                  "SLIPWAY_CADDY_TLS": "internal", "SLIPWAY_CADDY_LISTEN": f"127.0.0.1:{caddy.https_port}",
                  "SLIPWAY_ROUTES_INTERVAL": "0.5", "SLIPWAY_ROUTES_FILE": None,
                  "SLIPWAY_DEPLOY_SETTLE": "1", "SLIPWAY_DEPLOY_DRAIN": "1"}
        client, customer, made = start_panel(**routes)
        name = f"site-{os.getpid()}-{time.monotonic_ns() % 100000}"
        created = client.post("/api/services", json={
            "name": name, "customer_id": customer["id"], "deploy_method": "git", "git_url": url,
            "git_branch": "main", "previews": True})
        assert created.status_code == 201, created.text
        parent_id = created.json()["id"]
        made.append(parent_id)

        # the pull request's events as GitHub delivers them to the service's webhook
        secret = client.post(f"/api/services/{parent_id}/webhook-secret").json()["secret"]
        hook = f"{str(client.base_url).rstrip('/')}/api/hooks/git/{parent_id}"  # no API key: the signature

        def pull_request(action, commit_id, fork=False):
            """The delivery's answer; for a queued preview job, what the job did once it ran."""
            headers, body = github_pull_request(secret, 12, action, "main", "feature", commit_id, fork=fork)
            answer = httpx.post(hook, content=body, headers=headers, timeout=30)
            assert answer.status_code == 202, answer.text
            if "preview_job_id" not in answer.json():
                return answer.json()
            job_url = f"/api/services/{parent_id}/preview-jobs/{answer.json()['preview_job_id']}"
            done = _until("the preview job's end",
                          lambda: (lambda j: j if j["state"] in ("done", "failed") else None)(
                              client.get(job_url).json()))
            assert done["state"] == "done", done
            return done["answer"]

        # a request from a fork runs a stranger's code: ignored (previews_from_forks is off)
        assert pull_request("opened", head, fork=True) == {"ignored": "fork"}
        assert client.get(f"/api/services/{parent_id}/previews").json()["total"] == 0

        opened = pull_request("opened", head)
        preview_id = opened["preview_id"]
        made.append(preview_id)
        assert wait_job(client, preview_id, opened["deploy_job_id"], seconds=180)["status"] == "succeeded"
        detail = _until("the preview running", lambda: _status(client, preview_id, "running"))
        assert detail["name"] == f"{name}-pr-12" and detail["preview_of"] == parent_id
        assert detail["commit"] == head and detail["variables"] == {"SLIPWAY_PREVIEW": "1"}
        assert detail["url"] == f"https://{name}-pr-12.{BASE}"
        listed = client.get(f"/api/services/{parent_id}/previews").json()
        assert [p["id"] for p in listed["data"]] == [preview_id]

        # each at its own host name through Caddy: the preview its head branch, the parent main
        _until("Caddy serving the preview", lambda: _page(caddy, f"{name}-pr-12.{BASE}") == "preview one")
        _until("the parent running", lambda: _status(client, parent_id, "running"), seconds=180)
        _until("Caddy serving the parent", lambda: _page(caddy, f"{name}.{BASE}") == "main page")

        # the request updated: a redeploy of the new head commit
        git(repo, "checkout", "-q", "feature")
        newer = commit(repo, {"index.html": "preview two\n"}, "preview again")
        git(repo, "checkout", "-q", "main")
        updated = pull_request("synchronize", newer)
        assert updated["preview_id"] == preview_id
        assert wait_job(client, preview_id, updated["deploy_job_id"], seconds=180)["status"] == "succeeded"
        _until("Caddy serving the new commit", lambda: _page(caddy, f"{name}-pr-12.{BASE}") == "preview two")
        assert client.get(f"/api/services/{preview_id}").json()["commit"] == newer
        assert _page(caddy, f"{name}.{BASE}") == "main page"

        # the redeploy's job ends after its old containers drained: its work folder goes then
        work = tmp_path / "work"
        _until("the redeploy's end", lambda: not os.listdir(work))

        # closed: the service, its containers and its route go; the parent stays
        assert pull_request("closed", newer) == {"deleted": preview_id}
        assert client.get(f"/api/services/{preview_id}").status_code == 404
        assert start_panel.engine.containers(preview_id) == []
        _until("Caddy no longer serving the preview", lambda: _page(caddy, f"{name}-pr-12.{BASE}") is None)
        assert client.get(f"/api/services/{parent_id}/previews").json()["total"] == 0
        assert _page(caddy, f"{name}.{BASE}") == "main page"

        # reopened, then the parent deleted: its preview goes with it, containers and all
        again = pull_request("reopened", newer)
        made.append(again["preview_id"])
        assert wait_job(client, again["preview_id"], again["deploy_job_id"], seconds=180)["status"] == "succeeded"
        _until("Caddy serving the reopened preview", lambda: _page(caddy, f"{name}-pr-12.{BASE}") == "preview two")
        assert client.delete(f"/api/services/{parent_id}").status_code == 204
        for service_id in (parent_id, again["preview_id"]):
            assert client.get(f"/api/services/{service_id}").status_code == 404
            assert start_panel.engine.containers(service_id) == []
        _until("Caddy serving neither", lambda: _page(caddy, f"{name}-pr-12.{BASE}") is None
               and _page(caddy, f"{name}.{BASE}") is None)
        _until("the deploys' ends", lambda: not os.listdir(work))
