"""Git and AI deploys on a real engine, through a real uvicorn server and httpx: a local
repository (``git init`` in tmp_path, served as a ``file://`` URL) is cloned, built from
its Containerfile and answers HTTP on the service's url; a new commit is redeployed and
served, and the events name both commits; a broken Containerfile fails with the build's
last lines; a static site is deployed by the ``ai`` method with the heuristic analyzer and
with the llm analyzer (a fake chat endpoint on loopback), and its compose is shown.
Once through the Podman client and once through the Docker client."""
from __future__ import annotations

import time

import pytest

from tests.support.processes import free_port
from tests.fixtures.fake_chat import FakeChat
from tests.support.panel_server import _get, _until
from tests.support.git_repos import BUSYBOX, CONTAINERFILE, _create, _events, commit, git, repository

pytestmark = pytest.mark.runtime
SECRET = "s3cr3t-t0ken-value"


def test_a_git_repository_deploys_and_redeploys_its_latest_commit(start_panel, tmp_path):
    client, customer, made = start_panel()
    url, first = repository(tmp_path / "repo", {"Containerfile": CONTAINERFILE, "index.html": "<h1>first page</h1>\n"})
    service_id = _create(client, customer, made, "git", deploy_method="git", git_url=url)
    detail = _until(client, service_id, "running", seconds=120)
    assert detail["url"].startswith("http://127.0.0.1:")  # the EXPOSEd port, published on a free one
    assert "first page" in _get(detail["url"])
    assert detail["commit"] == first and detail["git_url"] == url and detail["git_branch"] is None
    assert f"localhost/slw-{service_id}-app:{first[:12]}" in detail["compose"]

    second = commit(tmp_path / "repo", {"index.html": "<h1>second page</h1>\n"}, "second")
    assert client.post(f"/api/services/{service_id}/redeploy").json()["status"] == "deploying"
    detail = _until(client, service_id, "running", seconds=120)
    assert "second page" in _get(detail["url"]) and detail["commit"] == second
    successes = [e["message"] for e in _events(client, service_id) if e["status"] == "success"]
    assert any(f"commit {first[:12]} on main" in m and m.startswith("deploy succeeded") for m in successes), successes
    assert any(f"commit {second[:12]} on main" in m and m.startswith("redeploy succeeded") for m in successes)
    engine = start_panel.engine
    # the replaced build is removed once the old container is (a health-gated redeploy: after the switch,
    # SLIPWAY_DEPLOY_DRAIN and the old container's graceful stop)
    deadline = time.monotonic() + 60
    while engine.has_image(f"localhost/slw-{service_id}-app:{first[:12]}"):
        assert time.monotonic() < deadline, "the replaced build is removed"
        time.sleep(0.5)
    assert engine.has_image(f"localhost/slw-{service_id}-app:{second[:12]}")
    assert client.delete(f"/api/services/{service_id}").status_code == 204
    assert not engine.has_image(f"localhost/slw-{service_id}-app:{second[:12]}")  # and the last one on delete
    assert engine.labelled(service_id) == {"containers": [], "volumes": [], "networks": []}


def test_a_named_branch_and_a_broken_containerfile(start_panel, tmp_path):
    client, customer, made = start_panel()
    url, _ = repository(tmp_path / "repo", {"Containerfile": CONTAINERFILE, "index.html": "main branch\n"})
    git(tmp_path / "repo", "checkout", "-q", "-b", "broken")
    broken = commit(tmp_path / "repo", {"Containerfile": f"FROM {BUSYBOX}\nRUN echo about-to-break && exit 7\n"},
                    "break it")
    service_id = _create(client, customer, made, "broken", deploy_method="git", git_url=url, git_branch="broken")
    _until(client, service_id, "failed", seconds=120)
    [failed] = [e["message"] for e in _events(client, service_id) if e["status"] == "failed"]
    assert f"commit {broken[:12]} on broken" in failed and "about-to-break" in failed, failed
    assert "building" in failed and "failed" in failed

    nothing, _ = repository(tmp_path / "plain", {"README.md": "no build here\n"})
    service_id = _create(client, customer, made, "plain", deploy_method="git", git_url=nothing)
    _until(client, service_id, "failed", seconds=60)
    [failed] = [e["message"] for e in _events(client, service_id) if e["status"] == "failed"]
    assert "no compose file, Containerfile or Dockerfile" in failed


def test_credentials_never_reach_events_responses_or_logs(start_panel, tmp_path):
    client, customer, made = start_panel()
    url, _ = repository(tmp_path / "repo", {"Containerfile": CONTAINERFILE, "index.html": "x\n"})
    # file:// ignores the user-info, so the clone works with "credentials" in the URL
    with_secret = url.replace("file://", f"file://deploy:{SECRET}@")
    service_id = _create(client, customer, made, "secret", deploy_method="git", git_url=with_secret)
    detail = _until(client, service_id, "running", seconds=120)
    assert detail["git_url"].startswith("file://***@")
    bad = _create(client, customer, made, "secret-bad", deploy_method="git",
                  git_url=f"https://deploy:{SECRET}@127.0.0.1:{free_port()}/x.git")
    _until(client, bad, "failed", seconds=60)
    for path in (f"/api/services/{service_id}", f"/api/services/{service_id}/events", f"/api/services/{bad}",
                 f"/api/services/{bad}/events", f"/api/services/{service_id}/logs", "/api/services"):
        assert SECRET not in client.get(path).text, path
    assert "https://***@127.0.0.1" in [e for e in _events(client, bad) if e["status"] == "failed"][0]["message"]
    assert SECRET not in start_panel.logs()


def test_ai_deploy_of_a_static_site_with_the_heuristic_analyzer(start_panel, tmp_path):
    client, customer, made = start_panel()
    url, first = repository(tmp_path / "site", {"index.html": "<h1>static by heuristic</h1>\n"})
    service_id = _create(client, customer, made, "ai", deploy_method="ai", ai_url=url)
    detail = _until(client, service_id, "running", seconds=120)
    assert "static by heuristic" in _get(detail["url"])
    assert detail["ai_url"] == url and detail["commit"] == first
    assert f"image: localhost/slw-{service_id}-app:{first[:12]}" in detail["compose"]
    assert "'8080'" in detail["compose"] and "build" not in detail["compose"]
    [success] = [e["message"] for e in _events(client, service_id) if e["status"] == "success"]
    assert "heuristic analyzer: static site (index.html) on localhost/busybox:latest" in success


LLM_ANSWER = f"""```yaml
services:
  site:
    build:
      context: .
      dockerfile_inline: |
        FROM {BUSYBOX}
        COPY index.html /www/index.html
        EXPOSE 8080
        CMD ["httpd", "-f", "-p", "8080", "-h", "/www"]
    healthcheck:
      test: ["CMD", "wget", "-q", "-O", "-", "http://127.0.0.1:8080/"]
      interval: 1s
      retries: 30
```"""


def test_ai_deploy_with_the_llm_analyzer(start_panel, tmp_path):
    with FakeChat(LLM_ANSWER) as chat:
        client, customer, made = start_panel(SLIPWAY_AI_ANALYZER="llm", SLIPWAY_AI_ENDPOINT=chat.url,
                                             SLIPWAY_AI_MODEL="fake-model", SLIPWAY_AI_API_KEY="sk-fake")
        url, first = repository(tmp_path / "site", {"index.html": "<h1>static by the model</h1>\n"})
        service_id = _create(client, customer, made, "llm", deploy_method="ai", ai_url=url)
        detail = _until(client, service_id, "running", seconds=120)
        assert "static by the model" in _get(detail["url"])  # no ports given: the EXPOSEd one is published
        assert f"image: localhost/slw-{service_id}-site:{first[:12]}" in detail["compose"]
        assert "healthcheck" in detail["compose"] and "'8080'" in detail["compose"]
        [request] = chat.requests
        assert request["json"]["model"] == "fake-model" and request["headers"]["Authorization"] == "Bearer sk-fake"
        [success] = [e["message"] for e in _events(client, service_id) if e["status"] == "success"]
        assert "llm analyzer: written by the model fake-model" in success

        chat.answer = "services:\n  site:\n    image: x\n    privileged: true\n"
        bad = _create(client, customer, made, "llm-bad", deploy_method="ai", ai_url=url)
        _until(client, bad, "failed", seconds=60)
        [failed] = [e["message"] for e in _events(client, bad) if e["status"] == "failed"]
        assert "compose definition is invalid: unsupported key services.site.privileged" in failed
