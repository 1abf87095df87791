"""A git service's variables through a real server, real git and real Podman: they are
its container's environment (over what the image sets), a secret one is read only
through ``GET /api/services/{id}/secrets`` and shown nowhere else (the detail, the list,
the events, the releases, the deploy jobs, the job's log in the server's output, the
service's logs), and a PATCH of the variables reaches the container at the next
redeploy. The API's rules without an engine: tests/api/panel/test_secret_variables.py."""
from __future__ import annotations

import json
import os

import pytest

from tests.support.engine import wait_for
from tests.support.git_repos import BUSYBOX, _create, repository
from tests.support.panel_server import _get, _until

pytestmark = pytest.mark.runtime

FAST = {"SLIPWAY_DEPLOY_SETTLE": "1", "SLIPWAY_DEPLOY_DRAIN": "0.5"}
KEY = "sk_live_8c1f0e6d2b7a4c3e"
URL = "postgres://app:n0t-in-git@db.internal:5432/app"
# the app writes what it was given into the page it serves (nothing of it is in the repository)
CONTAINERFILE = f"""FROM {BUSYBOX}
ENV MODE=from-the-image
EXPOSE 8080
CMD ["sh", "-c", "mkdir -p /www && printf '%s|%s|%s' \\"$API_KEY\\" \\"$DATABASE_URL\\" \\"$MODE\\" > /www/env.txt && exec httpd -f -p 8080 -h /www"]
"""


def _everything_but_secrets(client, service_id) -> str:
    paths = [f"/api/services/{service_id}", "/api/services", f"/api/services/{service_id}/events",
             f"/api/services/{service_id}/releases", f"/api/services/{service_id}/deploys",
             f"/api/services/{service_id}/logs"]
    answers = [client.get(path) for path in paths]
    assert all(a.status_code == 200 for a in answers), [(a.status_code, a.text) for a in answers]
    jobs = answers[4].json()["data"]
    answers += [client.get(f"/api/services/{service_id}/deploys/{job['id']}") for job in jobs]
    return " ".join(json.dumps(a.json()) for a in answers)


@pytest.mark.parametrize("start_panel", ["podman"], indirect=True)
def test_a_git_services_secret_variable_reaches_its_container_and_only_secrets_shows_it(start_panel, tmp_path):
    client, customer, made = start_panel(**FAST)
    url, _ = repository(tmp_path / "repo", {"Containerfile": CONTAINERFILE})
    service_id = _create(client, customer, made, "vars", deploy_method="git", git_url=url,
                         variables={"API_KEY": KEY, "DATABASE_URL": URL, "MODE": "production"},
                         secret_variables=["API_KEY", "DATABASE_URL"])
    detail = _until(client, service_id, "running", seconds=180)
    assert _get(detail["url"] + "/env.txt") == f"{KEY}|{URL}|production"  # the variables win over the image's
    assert detail["variables"] == {"API_KEY": "***", "DATABASE_URL": "***", "MODE": "production"}
    assert client.get(f"/api/services/{service_id}/secrets").json() == {
        "secrets": {"API_KEY": KEY, "DATABASE_URL": URL}}
    shown = _everything_but_secrets(client, service_id)
    assert KEY not in shown and "n0t-in-git" not in shown
    assert "production" in shown  # a plain variable is shown

    changed = client.patch(f"/api/services/{service_id}", json={
        "variables": {"API_KEY": "***", "DATABASE_URL": "postgres://app:r0tated@db.internal:5432/app"}})
    assert changed.status_code == 200, changed.text
    assert changed.json()["variables"] == {"API_KEY": "***", "DATABASE_URL": "***"}
    redeploy = client.post(f"/api/services/{service_id}/redeploy")
    assert redeploy.status_code in (200, 202), redeploy.text
    job_id = redeploy.json()["deploy_job_id"]
    assert wait_for(lambda: (lambda s: s if s in ("succeeded", "failed", "cancelled") else None)(
        client.get(f"/api/services/{service_id}/deploys/{job_id}").json()["status"]),
        "the redeploy to end", timeout=180) == "succeeded"
    detail = _until(client, service_id, "running", seconds=180)
    assert _get(detail["url"] + "/env.txt") == f"{KEY}|postgres://app:r0tated@db.internal:5432/app|from-the-image"
    shown = _everything_but_secrets(client, service_id)
    assert KEY not in shown and "r0tated" not in shown and "n0t-in-git" not in shown
    logs = "".join(path.read_text() for path in tmp_path.glob("server-*.log"))
    assert KEY not in logs and "r0tated" not in logs and "n0t-in-git" not in logs
    wait_for(lambda: not os.listdir(tmp_path / "work"), "the jobs' work folders to be removed")
