"""Releases, health-gated redeploys, cancel and rollback on real Podman with a real server.

Three local images serve a page of their own with busybox ``httpd``; the compose
healthcheck wants ``/www/ok``, which the third lacks (it never becomes healthy). A poller
thread reads the service's url (its upstream: no base domain) every 50 ms and asks it for
the page: at every moment the CURRENT upstream must answer (a request to the old host
port after a switch is followed by a new read of the url, not counted as a failure)."""
from __future__ import annotations

import os
import threading
import time
from dataclasses import replace

import httpx
import pytest

from tests.support.panel_server import admin_key, serve_panel
from tests.support.releases import COMPOSE, podman, redeploy, wait_job

pytestmark = pytest.mark.runtime


class Poller(threading.Thread):
    """Reads the service's url, GETs it, every 50 ms; records pages and real failures."""

    def __init__(self, client, service_id):
        super().__init__(daemon=True)
        self.client, self.service_id = client, service_id
        self.pages, self.failures, self.stop = [], [], threading.Event()

    def url(self):
        return self.client.get(f"/api/services/{self.service_id}").json()["url"]

    def run(self):
        with httpx.Client(timeout=5) as http:
            while not self.stop.is_set():
                url = self.url()
                try:
                    self.pages.append(http.get(url + "/").text.strip())
                except httpx.HTTPError as exc:
                    if self.url() == url:  # the current upstream did not answer
                        self.failures.append(f"{url}: {exc}")
                time.sleep(0.05)


def _page(client, service_id):
    url = client.get(f"/api/services/{service_id}").json()["url"]
    return httpx.get(url + "/", timeout=5).text.strip()


def _greeting(client, service_id):
    url = client.get(f"/api/services/{service_id}").json()["url"]
    return httpx.get(url + "/greeting.txt", timeout=5).text.strip()


def _polled(client, service_id, action):
    poller = Poller(client, service_id)
    poller.start()
    try:
        return action()
    finally:
        poller.stop.set()
        poller.join(timeout=10)
        assert not poller.failures, poller.failures[:3]


def test_health_gated_redeploys_cancel_and_rollback(runtime_url, migrated_database_url, engine_ulimits, store,
                                                    page_images):
    live, point, ids = page_images
    key = admin_key(migrated_database_url)
    env = dict(os.environ, SLIPWAY_RUNTIME_ULIMITS=engine_ulimits, SLIPWAY_DATABASE_URL=migrated_database_url,
               SLIPWAY_RUNTIME_URL=runtime_url, SLIPWAY_BILLING_INTERVAL="0", SLIPWAY_DEPLOY_HEALTH_TIMEOUT="15",
               SLIPWAY_DEPLOY_SETTLE="1", SLIPWAY_DEPLOY_DRAIN="1")
    env.pop("SLIPWAY_BASE_DOMAIN", None)
    server, client = serve_panel(key, env)
    service_id = None
    try:
        customer = client.post("/api/customers", json={"name": "Acme"}).json()
        created = client.post("/api/services", json={
            "name": f"rel-{os.getpid()}-{time.monotonic_ns() % 100000}", "customer_id": customer["id"],
            "deploy_method": "compose", "compose": COMPOSE.format(image=live), "variables": {"GREETING": "hello a"}})
        assert created.status_code == 201, created.text
        service_id = created.json()["id"]
        first = wait_job(client, service_id, created.json()["deploy_job_id"])
        assert first["status"] == "succeeded", first
        assert (_page(client, service_id), _greeting(client, service_id)) == ("page one", "hello a")

        # a good redeploy with other variables and image: the page switches, no request fails
        with store.uow() as uow:
            current = uow.services.get(service_id)
            uow.services.update(replace(current, variables={"GREETING": "hello b"}))
            uow.commit()
        point("two")

        good = _polled(client, service_id, lambda: redeploy(client, service_id, "succeeded"))
        assert (_page(client, service_id), _greeting(client, service_id)) == ("page two", "hello b")
        detail = client.get(f"/api/services/{service_id}").json()
        assert (detail["status"], detail["release"]) == ("running", 2)
        assert good["release_id"] is not None

        # a redeploy whose containers never become healthy: the old release serves throughout
        point("three")
        bad = _polled(client, service_id, lambda: redeploy(client, service_id, "failed"))
        assert "healthcheck failing" in bad["error"], bad
        detail = client.get(f"/api/services/{service_id}").json()
        assert (detail["status"], detail["release"]) == ("running", 2)
        assert _page(client, service_id) == "page two"
        events = client.get(f"/api/services/{service_id}/events").json()["data"]
        assert (events[0]["type"], events[0]["status"]) == ("redeploy", "failed")

        # cancel of a running redeploy: the old release keeps running, the job ends cancelled
        def cancelled():
            answer = client.post(f"/api/services/{service_id}/redeploy").json()
            wait_job(client, service_id, answer["deploy_job_id"], states=("running",), seconds=30)
            time.sleep(1)
            asked = client.post(f"/api/services/{service_id}/deploys/{answer['deploy_job_id']}/cancel")
            assert asked.status_code == 200, asked.text
            began = time.monotonic()
            job = wait_job(client, service_id, answer["deploy_job_id"], seconds=15)
            assert job["status"] == "cancelled" and time.monotonic() - began < 10, job
            return job

        _polled(client, service_id, cancelled)
        detail = client.get(f"/api/services/{service_id}").json()
        assert (detail["status"], detail["release"]) == ("running", 2)
        assert _page(client, service_id) == "page two"
        labelled = podman(runtime_url, "ps", "-a", "--filter", f"label=slipway.service={service_id}",
                           "--format", "{{.Names}}").split()
        assert len(labelled) == 1, labelled

        # rollback to the release before the running one: release 1's image and variables
        def rollback():
            answer = client.post(f"/api/services/{service_id}/rollback", json={})
            assert answer.status_code == 200, answer.text
            return wait_job(client, service_id, answer.json()["deploy_job_id"])

        point("three")  # what the tag names now does not matter: the release's kept image runs
        done = _polled(client, service_id, rollback)
        assert done["status"] == "succeeded", done
        assert (_page(client, service_id), _greeting(client, service_id)) == ("page one", "hello a")
        detail = client.get(f"/api/services/{service_id}").json()
        assert (detail["release"], detail["variables"]) == (3, {"GREETING": "hello a"})

        listed = client.get(f"/api/services/{service_id}/releases").json()
        assert [(r["number"], r["images"][0]["image_id"]) for r in listed["data"]] == [
            (3, ids["one"]), (2, ids["two"]), (1, ids["one"])]
        kinds = [j["kind"] for j in client.get(f"/api/services/{service_id}/deploys").json()["data"]]
        assert kinds == ["rollback", "redeploy", "redeploy", "redeploy", "deploy"]

        assert client.delete(f"/api/services/{service_id}").status_code == 204
        kept = podman(runtime_url, "images", "--format", "{{.Repository}}:{{.Tag}}",
                       "--filter", f"reference=localhost/slw-keep-{service_id}")
        assert kept == ""
        service_id = None
    finally:
        if service_id is not None:
            client.delete(f"/api/services/{service_id}")
        client.close()
        server.terminate()
        server.wait(timeout=20)
