"""Health-gated redeploys, cancel and rollback seen through a real Caddy (the ``caddy``
route provider, HTTPS with Caddy's own CA): a client polls the service's hostname
through Caddy every 50 ms during each of them and must see no failed request and no page
but the ones expected: a redeploy to a release that never gets healthy leaves the old
page served throughout and ends with a ``redeploy`` ``failed`` event; a good redeploy
switches pages; a cancelled redeploy leaves the old release serving; a rollback brings
back the previous page and its variables; the release list shows each release with the
image id the engine has."""
from __future__ import annotations

import os
import threading
import time

import httpx
import pytest

from tests.support.caddy import running_caddy
from tests.support.panel_server import admin_key, serve_panel
from tests.support.releases import COMPOSE, get_once_more_if_closed, podman, redeploy, wait_job

pytestmark = pytest.mark.runtime

BASE = "apps.example.test"


class ThroughCaddy(threading.Thread):
    """GET https://<hostname>/ through Caddy every 50 ms on one keep-alive connection;
    records every page and every failure (an error or a status other than 200). A request
    that Caddy's config reload closed unread is sent once more on a new connection, as
    browsers do (``get_once_more_if_closed``); a second failure counts."""

    def __init__(self, caddy, hostname: str):
        super().__init__(daemon=True)
        self.caddy, self.hostname = caddy, hostname
        self.pages, self.failures, self.stop = [], [], threading.Event()
        self.sent_again = 0

    def run(self):
        with httpx.Client(verify=False, timeout=10) as client:
            while not self.stop.is_set():
                try:
                    answer, again = get_once_more_if_closed(client, self.caddy.https_port, self.hostname)
                    self.sent_again += again
                    if answer.status_code == 200:
                        self.pages.append(answer.text.strip())
                    else:
                        self.failures.append(f"HTTP {answer.status_code}: {answer.text[:200]}")
                except httpx.HTTPError as exc:
                    self.failures.append(f"{type(exc).__name__}: {exc}")
                self.stop.wait(0.05)


def _watched(caddy, hostname, action, allowed, final):
    """Run ``action`` while a client polls through Caddy; no request may fail, and every
    page seen must be one of ``allowed``. Polling goes on past the action's end until Caddy
    serves ``final`` (the route follows the job's end through the route sync), so the last
    switch is seen too. Returns the action's result and the pages."""
    watcher = ThroughCaddy(caddy, hostname)
    watcher.start()
    try:
        result = action()
        seen, deadline = len(watcher.pages), time.monotonic() + 60
        while not (len(watcher.pages) > seen and watcher.pages[-1] == final):
            assert time.monotonic() < deadline and watcher.is_alive(), \
                f"Caddy did not serve {final!r} after the action: {watcher.pages[-3:]} {watcher.failures[:3]}"
            time.sleep(0.05)
    finally:
        watcher.stop.set()
        watcher.join(timeout=15)
    assert not watcher.failures, watcher.failures[:5]
    assert watcher.pages, "no request was answered"
    assert set(watcher.pages) <= set(allowed), sorted(set(watcher.pages))
    return result, watcher.pages


def test_redeploys_cancel_and_rollback_through_caddy(runtime_url, migrated_database_url, engine_ulimits, page_images,
                                                     tmp_path):
    live, point, ids = page_images
    with running_caddy(tmp_path) as caddy:
        key = admin_key(migrated_database_url)
        env = dict(os.environ, SLIPWAY_RUNTIME_ULIMITS=engine_ulimits, SLIPWAY_DATABASE_URL=migrated_database_url,
                   SLIPWAY_RUNTIME_URL=runtime_url, SLIPWAY_BILLING_INTERVAL="0", SLIPWAY_BASE_DOMAIN=BASE,
                   SLIPWAY_ROUTES="caddy", SLIPWAY_CADDY_ADMIN=caddy.admin_url, SLIPWAY_CADDY_TLS="internal",
                   SLIPWAY_CADDY_LISTEN=f"127.0.0.1:{caddy.https_port}", SLIPWAY_ROUTES_INTERVAL="0.5",
                   SLIPWAY_DEPLOY_HEALTH_TIMEOUT="15", SLIPWAY_DEPLOY_SETTLE="1", SLIPWAY_DEPLOY_DRAIN="1")
        env.pop("SLIPWAY_ROUTES_FILE", None)
        server, client = serve_panel(key, env, stderr=open(tmp_path / "server.log", "w+"))
        service_id = None
        try:
            customer = client.post("/api/customers", json={"name": "Acme"}).json()
            name = f"gated-{os.getpid()}-{time.monotonic_ns() % 100000}"
            hostname = f"{name}.{BASE}"
            created = client.post("/api/services", json={
                "name": name, "customer_id": customer["id"], "deploy_method": "compose",
                "compose": COMPOSE.format(image=live), "variables": {"GREETING": "hello a"}})
            assert created.status_code == 201, created.text
            service_id = created.json()["id"]
            assert wait_job(client, service_id, created.json()["deploy_job_id"])["status"] == "succeeded"
            deadline = time.monotonic() + 30
            while True:  # until Caddy has the route and its certificate
                try:
                    if caddy.get(hostname, timeout=5).text.strip() == "page one":
                        break
                except httpx.HTTPError:
                    pass
                assert time.monotonic() < deadline, caddy.output()
                time.sleep(0.3)

            def greeting():
                return caddy.get(hostname, "/greeting.txt").text.strip()

            # a good redeploy (new image, new variables, set by PATCH): the page switches, nothing fails
            assert client.patch(f"/api/services/{service_id}",
                                json={"variables": {"GREETING": "hello b"}}).status_code == 200
            point("two")
            _, pages = _watched(caddy, hostname, lambda: redeploy(client, service_id, "succeeded"),
                                {"page one", "page two"}, "page two")
            assert pages[-1] == "page two" and greeting() == "hello b"

            # a release that never gets healthy: the old page throughout, a redeploy failed event
            point("three")
            bad, _ = _watched(caddy, hostname, lambda: redeploy(client, service_id, "failed"), {"page two"},
                              "page two")
            assert "health" in bad["error"], bad
            events = client.get(f"/api/services/{service_id}/events").json()["data"]
            assert (events[0]["type"], events[0]["status"]) == ("redeploy", "failed"), events[:2]
            detail = client.get(f"/api/services/{service_id}").json()
            assert (detail["status"], detail["release"]) == ("running", 2)

            # a cancelled redeploy: the old release keeps serving
            def cancelled():
                job_id = client.post(f"/api/services/{service_id}/redeploy").json()["deploy_job_id"]
                wait_job(client, service_id, job_id, states=("running",))
                time.sleep(1)
                asked = client.post(f"/api/services/{service_id}/deploys/{job_id}/cancel")
                assert asked.status_code == 200, asked.text
                return wait_job(client, service_id, job_id, seconds=15)

            job, _ = _watched(caddy, hostname, cancelled, {"page two"}, "page two")
            assert job["status"] == "cancelled", job
            assert client.get(f"/api/services/{service_id}").json()["status"] == "running"

            # a rollback to the release before: its page and its variables, nothing fails
            def rollback():
                answer = client.post(f"/api/services/{service_id}/rollback", json={})
                assert answer.status_code == 200, answer.text
                return wait_job(client, service_id, answer.json()["deploy_job_id"])

            done, pages = _watched(caddy, hostname, rollback, {"page one", "page two"}, "page one")
            assert done["status"] == "succeeded", done
            assert pages[-1] == "page one" and greeting() == "hello a"

            listed = client.get(f"/api/services/{service_id}/releases").json()["data"]
            assert [(r["number"], r["images"][0]["image_id"]) for r in listed] == [
                (3, ids["one"]), (2, ids["two"]), (1, ids["one"])]
            for release in listed:  # the engine has every image a release names
                assert podman(runtime_url, "image", "exists", release["images"][0]["image_id"]) == ""
        finally:
            if service_id is not None:
                client.delete(f"/api/services/{service_id}")
            client.close()
            server.terminate()
            server.wait(timeout=20)
