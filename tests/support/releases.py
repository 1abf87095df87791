"""Shared by the release tests (tests/integration/test_releases_engine.py, through the
upstream; test_redeploys_caddy.py, through Caddy) and ``python -m bench.redeploys``:
local images that serve a page of their own, a compose service that runs them with a
healthcheck, and waiting on a deploy job."""
from __future__ import annotations

import os
import subprocess
import time

import httpx
import pytest

from tests.support.engine import _factories, engine_settings

# busybox httpd serving /www, the greeting variable written beside the page; healthy
# while /www/ok exists (the image ``three`` lacks it: it never becomes healthy)
COMPOSE = """services:
  web:
    image: {image}
    command: [sh, -c, 'echo "$$GREETING" > /www/greeting.txt && exec httpd -f -p 8080 -h /www']
    environment:
      GREETING: ${{GREETING}}
    ports: ['8080']
    healthcheck:
      test: [CMD, cat, /www/ok]
      interval: 1s
      timeout: 2s
      retries: 2
"""


def podman(runtime_url, *args) -> str:
    return subprocess.run(["podman", "--url", runtime_url, *args], check=True, capture_output=True, text=True,
                          env=dict(os.environ), timeout=120).stdout.strip()


def build_pages(runtime, base: str, workdir, names=(("one", True), ("two", True), ("three", False))) -> None:
    """``<base>:<name>`` for each name: busybox with /www/index.html ``page <name>``, and
    /www/ok when healthy."""
    for name, healthy in names:
        context = workdir / name
        (context / "www").mkdir(parents=True)
        (context / "www" / "index.html").write_text(f"page {name}\n")
        if healthy:
            (context / "www" / "ok").write_text("ok\n")
        (context / "Containerfile").write_text("FROM localhost/busybox:latest\nCOPY www /www\n")
        runtime.build_image(str(context), f"{base}:{name}")


@pytest.fixture
def page_images(runtime_url, engine_ulimits, tmp_path):
    """Three images (``one``, ``two``, ``three``: the last never healthy) and the tag
    ``live`` the compose names, which ``point(name)`` moves; yields (live, point, {name:
    image id}); all removed afterwards. Built with the Podman plugin: the server runs
    the default runtime, Podman."""
    runtime = _factories()["podman"].create(engine_settings(runtime_url, engine_ulimits))
    base = f"localhost/slipway-it-rel-{os.getpid()}-{time.monotonic_ns() % 100000}"
    build_pages(runtime, base, tmp_path / "images")
    made = {}
    for name in ("one", "two", "three"):
        inspected = podman(runtime_url, "image", "inspect", "--format", "{{.Id}}", f"{base}:{name}")
        made[name] = inspected if inspected.startswith("sha256:") else f"sha256:{inspected}"  # Podman: bare hex
    live = f"{base}:live"

    def point(name):
        runtime.tag_image(f"{base}:{name}", live)

    point("one")
    yield live, point, made
    for tag in ("live", "one", "two", "three"):
        try:
            runtime.remove_image(f"{base}:{tag}")
        except Exception:  # noqa: BLE001 (best effort)
            pass


def wait_job(client, service_id, job_id, states=("succeeded", "failed", "cancelled"), seconds=90) -> dict:
    """Poll the deploy job until its status is one of ``states``."""
    deadline = time.monotonic() + seconds
    while True:
        job = client.get(f"/api/services/{service_id}/deploys/{job_id}").json()
        if job["status"] in states:
            return job
        if time.monotonic() > deadline:
            raise AssertionError(f"deploy job still {job['status']} after {seconds:g} s: {job}")
        time.sleep(0.3)


def redeploy(client, service_id, expect: str) -> dict:
    """Redeploy the service and wait for its job, which must end ``expect``."""
    answer = client.post(f"/api/services/{service_id}/redeploy")
    assert answer.status_code == 200, answer.text
    job = wait_job(client, service_id, answer.json()["deploy_job_id"])
    assert job["status"] == expect, job
    return job


def get_once_more_if_closed(client, port: int, hostname: str):
    """GET / through Caddy; returns (answer, whether it was sent again). A request sent on
    a kept-alive connection that the server closed before reading it (Caddy closes its
    idle connections whenever its config is reloaded, as at every route switch) is sent
    again once on a new connection, as browsers and curl do (RFC 9112 9.3.1: the server
    never received it). Any other failure, or a second one, counts."""
    for attempt in (0, 1):
        try:
            return client.get(f"https://127.0.0.1:{port}/", headers={"Host": hostname},
                              extensions={"sni_hostname": hostname}), attempt == 1
        except httpx.RemoteProtocolError as exc:
            if attempt or "without sending a response" not in str(exc):
                raise
    raise AssertionError("unreachable")
