"""Customer limits hold for git deploys, whose compose is known only once the repository is
cloned: through a real server on a real engine, a repository whose compose has more
containers than the customer may run fails its job naming ``limits.containers`` and
leaves nothing of it on the engine (``mem_limit: 6m`` no longer buys a container per
compose service past the limit); a redeploy whose new commit grows past it leaves the
old release serving. Podman only: the check is the engine-independent deploy job's."""
from __future__ import annotations

import time

import pytest

from tests.support.git_repos import BUSYBOX, _create, _events, commit, repository
from tests.support.panel_server import _until

pytestmark = pytest.mark.runtime


def _compose(count: int) -> str:
    return "services:\n" + "".join(f"  c{i}:\n    image: {BUSYBOX}\n    command: ['sleep', '3600']\n"
                                   f"    mem_limit: 6m\n" for i in range(count))


def _failed_job(client, service_id) -> dict:
    jobs = client.get(f"/api/services/{service_id}/deploys").json()["data"]
    assert jobs[0]["status"] == "failed", jobs
    return jobs[0]


@pytest.mark.parametrize("start_panel", ["podman"], indirect=True)
def test_a_repository_past_the_containers_limit_runs_nothing(start_panel, tmp_path):
    client, _, made = start_panel(SLIPWAY_CUSTOMER_MAX_CONTAINERS="2")
    own = client.post("/api/customers", json={"name": "Two containers", "limits": {"containers": 2}})
    default = client.post("/api/customers", json={"name": "Operator's default"})  # null: the setting's 2
    assert own.status_code == default.status_code == 201, (own.text, default.text)
    url, _ = repository(tmp_path / "three", {"compose.yaml": _compose(3)})
    engine = start_panel.engine
    for customer in (own.json(), default.json()):
        service_id = _create(client, customer, made, "three", deploy_method="git", git_url=url)
        _until(client, service_id, "failed", seconds=120)
        error = _failed_job(client, service_id)["error"]
        assert "3 containers, past its limit of 2 (limits.containers" in error, error
        [failed] = [e["message"] for e in _events(client, service_id) if e["status"] == "failed"]
        assert "limits.containers" in failed, failed
        assert engine.labelled(service_id)["containers"] == []  # none of the three was made
    assert client.get("/api/services").status_code == 200  # the panel still answers


@pytest.mark.parametrize("start_panel", ["podman"], indirect=True)
def test_a_redeploy_whose_commit_grows_past_the_limit_keeps_the_old_release(start_panel, tmp_path):
    client, _, made = start_panel()
    customer = client.post("/api/customers", json={"name": "Two containers", "limits": {"containers": 2}}).json()
    url, first = repository(tmp_path / "repo", {"compose.yaml": _compose(1)})
    service_id = _create(client, customer, made, "grows", deploy_method="git", git_url=url)
    deployed = _until(client, service_id, "running", seconds=120)
    engine = start_panel.engine
    [old] = engine.labelled(service_id)["containers"]

    commit(tmp_path / "repo", {"compose.yaml": _compose(3)}, "three containers")
    assert client.post(f"/api/services/{service_id}/redeploy").status_code == 200  # the kept compose counts 1
    deadline, job = time.monotonic() + 120, None
    while job is None or job["kind"] != "redeploy" or job["status"] in ("queued", "running"):
        assert time.monotonic() < deadline, job
        time.sleep(0.3)
        job = client.get(f"/api/services/{service_id}/deploys").json()["data"][0]
    assert job["status"] == "failed", job
    error = job["error"]
    assert "3 containers, past its limit of 2 (limits.containers" in error, error
    detail = _until(client, service_id, "running", seconds=60)
    assert (detail["commit"], detail["release"]) == (first, deployed["release"]) == (first, 1)
    assert engine.labelled(service_id)["containers"] == [old]  # the old release's container, still there
    assert client.get("/api/services").status_code == 200  # the panel still answers
