"""A real panel server in a subprocess, and waiting on its services."""
from __future__ import annotations

import contextlib
import re
import subprocess
import sys
import tempfile
import time

import httpx

from app.http.openapi import ApiContract
from tests.support.engine import engine_settings
from tests.support.http import wait_answering
from tests.support.processes import free_port, read_output, slipway

IMAGE = "localhost/busybox:latest"


def admin_key(database_url) -> str:
    """An admin key for the database (already migrated: the ``migrated_database_url``
    fixture), made with the operator CLI."""
    _, key = slipway(database_url, "apikey", "create", "--name", "it", "--role", "admin", "--rate-limit-rpm", "10000")
    return key["key"]


def serve_panel(key: str, env: dict, stderr=None, cwd=None, wrap=()):
    """``slipway serve`` on a free port with ``env`` (started in ``cwd``, default this
    process's folder); returns the process and an httpx client holding every answer to
    the contract, once the server answers. Its log goes to ``stderr`` or a temporary file
    (one access line per request would fill a pipe nobody reads and stall the server).
    ``wrap``: a command the server is started under (its arguments follow)."""
    stderr = stderr if stderr is not None else tempfile.TemporaryFile(mode="w+")
    port = free_port()
    server = subprocess.Popen([*wrap, sys.executable, "-m", "app.cli.main", "serve", "--port", str(port)], env=env,
                              stdout=subprocess.DEVNULL, stderr=stderr, text=True, cwd=cwd)
    client = httpx.Client(base_url=f"http://127.0.0.1:{port}", headers={"Authorization": f"Bearer {key}"},
                          timeout=30, event_hooks={"response": [_check_contract]})
    deadline = time.monotonic() + 20
    while True:
        try:
            client.get("/api/openapi.yaml")
            return server, client
        except httpx.TransportError:
            assert server.poll() is None, _output(server, stderr)
            assert time.monotonic() < deadline
            time.sleep(0.1)


def _output(server, stderr) -> str:
    if hasattr(stderr, "seek"):  # a log file
        return read_output(stderr)
    return server.stderr.read() if server.stderr else "the server exited"


_PANEL = ApiContract.load("panel", deploy_methods=["ai", "compose", "git", "template"])


_ROUTES = [(re.compile("^" + re.sub(r"\{[^}]+\}", "[^/]+", op.route) + "$"), op) for op in _PANEL.operations]


def _check_contract(response):
    """Every answer of the real server is held to the panel contract too."""
    response.read()
    request = response.request
    op = next((op for rx, op in _ROUTES if rx.match(request.url.path) and op.method == request.method), None)
    assert op is not None, f"{request.method} {request.url.path} is not in the contract"
    schema = _PANEL.response_schema(op.method, op.route, response.status_code)
    if schema is None or response.status_code == 204 or "yaml" in response.headers.get("content-type", ""):
        return
    errors = list(_PANEL.validator(schema).iter_errors(response.json()))
    assert not errors, f"{request.method} {request.url.path} {response.status_code}: {errors[0].message}"


def _until(client, service_id, status, seconds=90):
    deadline = time.monotonic() + seconds
    while True:
        detail = client.get(f"/api/services/{service_id}").json()
        if detail["status"] == status:
            return detail
        events = client.get(f"/api/services/{service_id}/events").json()["data"]
        assert detail["status"] != "failed" or status == "failed", events
        assert time.monotonic() < deadline, (detail, events)
        time.sleep(0.3)


def _get(url, seconds=30):
    return wait_answering(url, seconds=seconds).text


@contextlib.contextmanager
def shop_and_squatter(key: str, env: dict, runtime_url: str, stderr=None):
    """A real server (``serve_panel``) with two customers' template services running,
    ``my-shop`` ("The shop") and ``squatter`` ("The squatter"): the route-key attack of
    docs/security.md, whose squatter then adds ``my.shop-apps.example.com``. Yields
    ``(server, client, [shop id, squatter id])``; the services and the server go at the end."""
    server, client = serve_panel(key, env, stderr=stderr)
    ids = []
    try:
        for name, customer, title in (("my-shop", "Shop", "The shop"), ("squatter", "Other", "The squatter")):
            owner = client.post("/api/customers", json={"name": customer}).json()
            created = client.post("/api/services", json={
                "name": name, "customer_id": owner["id"], "deploy_method": "template",
                "template_id": "static-site", "variables": {"IMAGE": IMAGE, "TITLE": title}})
            assert created.status_code == 201, created.text
            ids.append(created.json()["id"])
        for sid in ids:
            _until(client, sid, "running")
        yield server, client, ids
    finally:
        from app.pluginmanager import make_plugin_manager, runtimes

        for left in ids:
            if client.delete(f"/api/services/{left}").status_code != 204:
                runtimes(make_plugin_manager())["podman"].create(engine_settings(runtime_url)).remove_service(left)
        client.close()
        server.terminate()
        server.wait(timeout=20)
