"""Signed pull-request deliveries naming a host whose name server never answers do not
stall the panel (issue 35): a real server whose name server is a socket on loopback that
reads every query and answers none (the server runs in a mount namespace of its own with a
``resolv.conf`` naming it), a customer's previews from forks armed and signed for. Each
delivery is answered 202 at once with its preview job while the lookups it caused are
still hanging; another customer's detail answers meanwhile, and that customer's own preview
is made while the first one's jobs still wait on the name server (one job per customer at
a time, on the preview worker's own threads). The jobs then end as the lookups give up."""
from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time

import httpx
import pytest

from tests.support.git_webhooks import github_pull_request
from tests.support.panel_server import admin_key, serve_panel
from tests.support.silent import SilentNameServer, with_name_server

FORK_HOST = "never-answers.slipway-test"
DELIVERIES = 8


def _until(what, check, seconds=120):
    deadline = time.monotonic() + seconds
    while True:
        found = check()
        if found:
            return found
        assert time.monotonic() < deadline, f"still waiting for {what}"
        time.sleep(0.1)


@pytest.fixture
def stalled_panel(migrated_database_url, runtime_url, engine_ulimits, tmp_path):
    """A server whose every name lookup goes to :class:`SilentNameServer`: (client, name server)."""
    if shutil.which("unshare") is None or subprocess.run(["unshare", "--mount", "true"]).returncode != 0:
        pytest.fail("this test needs unshare --mount (util-linux, as root) to give the server its own resolv.conf")
    names = SilentNameServer()
    key = admin_key(migrated_database_url)
    env = dict(os.environ, SLIPWAY_DATABASE_URL=migrated_database_url, SLIPWAY_RUNTIME_URL=runtime_url,
               SLIPWAY_RUNTIME_ULIMITS=engine_ulimits, SLIPWAY_GIT_ALLOWED_SCHEMES="https,file",
               SLIPWAY_BILLING_INTERVAL="0", SLIPWAY_WORK_DIR=str(tmp_path / "work"),
               SLIPWAY_RATE_HOOK_RPM="1000", SLIPWAY_CUSTOMER_MAX_CPUS="64", SLIPWAY_CUSTOMER_MAX_MEMORY_MB="65536")
    log = open(tmp_path / "server.log", "w+")
    wrap = with_name_server(names, tmp_path / "resolv.conf")
    server, client = serve_panel(key, env, stderr=log, wrap=wrap)
    try:
        yield client, names
    finally:
        client.close()
        server.terminate()
        server.wait(timeout=30)
        log.close()
        names.close()


def _git_service(client, customer_id, name, url, **fields):
    made = client.post("/api/services", json={"name": name, "customer_id": customer_id, "deploy_method": "git",
                                              "git_url": url, "git_branch": "main", **fields})
    assert made.status_code == 201, made.text
    return made.json()["id"]


def test_deliveries_naming_a_host_that_never_resolves_stall_nobody(stalled_panel, tmp_path):
    client, names = stalled_panel
    tag = f"{os.getpid()}-{time.monotonic_ns() % 100000}"
    # a public address written out: planned without a lookup (nothing on this machine answers there)
    url, head = "https://140.82.112.3/acme/app.git", "a" * 40
    attacker = client.post("/api/customers", json={"name": f"attacker-{tag}"}).json()["id"]
    victim = client.post("/api/customers", json={"name": f"victim-{tag}"}).json()["id"]
    armed = _git_service(client, attacker, f"armed-{tag}", url, previews=True, previews_from_forks=True)
    other = _git_service(client, victim, f"other-{tag}", url, previews=True)
    secret = client.post(f"/api/services/{armed}/webhook-secret").json()["secret"]
    victim_secret = client.post(f"/api/services/{other}/webhook-secret").json()["secret"]
    hook = f"{str(client.base_url).rstrip('/')}/api/hooks/git/{armed}"

    answers = []

    def deliver(number):
        headers, body = github_pull_request(secret, number, "opened", "main", "feature", head, fork=True,
                                            head_clone_url=f"https://{FORK_HOST}/someone/app.git")
        answers.append(httpx.post(hook, content=body, headers=headers, timeout=60))

    threads = [threading.Thread(target=deliver, args=(n,)) for n in range(1, DELIVERIES + 1)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert [a.status_code for a in answers] == [202] * DELIVERIES, [a.text for a in answers]
    jobs = [a.json()["preview_job_id"] for a in answers]

    def job(service_id, job_id):
        return client.get(f"/api/services/{service_id}/preview-jobs/{job_id}").json()

    # the first job is looking the fork's host up, and the name server keeps it waiting
    _until("the fork's host asked of the name server", lambda: names.asked_for(FORK_HOST))
    # meanwhile: the other customer's detail answers, and its own preview is made
    assert client.get(f"/api/services/{other}").status_code == 200
    headers, body = github_pull_request(victim_secret, 5, "opened", "main", "feature", head)
    queued = httpx.post(f"{str(client.base_url).rstrip('/')}/api/hooks/git/{other}", content=body, headers=headers,
                        timeout=60)
    assert queued.status_code == 202, queued.text
    made = _until("the other customer's preview", lambda: (lambda j: j if j["state"] == "done" else None)(
        job(other, queued.json()["preview_job_id"])))
    assert made["answer"]["preview_id"] and made["answer"]["deploy_job_id"]
    states = [job(armed, j)["state"] for j in jobs]
    assert "queued" in states or "running" in states, [job(armed, j) for j in jobs]  # still waiting their turn

    # each of the attacker's jobs ends once its lookup gave up: a name that does not resolve
    # passes the create's check (its deploy's clone refuses it), so each makes its preview
    ended = [_until(f"preview job {j}", lambda j=j: (lambda d: d if d["state"] in ("done", "failed") else None)(
        job(armed, j)), seconds=DELIVERIES * 15 + 60) for j in jobs]
    assert all(done["state"] == "done" and done["answer"]["preview_id"] for done in ended), [d["answer"] for d in ended]
    assert client.get(f"/api/services/{armed}/previews").json()["total"] == DELIVERIES
