"""A newcomer's first hour (``make run``): with no ``SLIPWAY_RUNTIME_URL``, the demo and
``slipway serve`` find the container engine the way the ``podman`` client does (here
the rootless socket under ``$XDG_RUNTIME_DIR``, a link to the test engine's socket),
name it, and the demo template deploys on it; with no engine anywhere both say so, and
how to start one, before anyone deploys. Logs are text on a terminal, JSON otherwise."""
from __future__ import annotations

import json
import os
import pty
import shutil
import subprocess
import sys
import tempfile
import threading

import httpx
import pytest

from app.engine_discovery import DOCKER_SOCKET, ROOTFUL_PODMAN
from tests.support.http import wait_answering
from tests.support.panel_server import IMAGE, _until
from tests.support.processes import free_port, slipway
from tests.support.servers import Server

#: the variables that would name an engine: unset, so that the server must look for one
NO_ENGINE_SETTING = {"SLIPWAY_RUNTIME_URL": None, "CONTAINER_HOST": None, "DOCKER_HOST": None, "SLIPWAY_RUNTIME": None}


@pytest.fixture
def runtime_dir():
    """A short ``$XDG_RUNTIME_DIR`` (a socket's path must fit in 108 bytes)."""
    path = tempfile.mkdtemp(prefix="sw-xdg-")
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _demo(database_url, env) -> tuple[dict, str]:
    full = {k: v for k, v in dict(os.environ, SLIPWAY_DATABASE_URL=database_url, **env).items() if v is not None}
    done = subprocess.run([sys.executable, "-m", "app.cli.demo"], capture_output=True, text=True, timeout=60, env=full)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout), done.stderr


def _log_lines(server) -> list[dict]:
    return [json.loads(line) for line in server.log().splitlines() if line.startswith("{")]


@pytest.mark.runtime
def test_without_an_engine_setting_the_rootless_podman_socket_is_found_and_the_demo_deploys(
        runtime_url, database_url, engine_ulimits, runtime_dir):
    if not runtime_url.startswith("unix://"):
        pytest.skip("the engine of this run is not a local socket")
    os.makedirs(os.path.join(runtime_dir, "podman"))
    socket_path = os.path.join(runtime_dir, "podman", "podman.sock")
    os.symlink(runtime_url[len("unix://"):], socket_path)
    env = dict(NO_ENGINE_SETTING, XDG_RUNTIME_DIR=runtime_dir, SLIPWAY_RUNTIME_ULIMITS=engine_ulimits)
    slipway(database_url, "init")
    demo, said = _demo(database_url, env)
    found = {"runtime": "podman", "url": f"unix://{socket_path}",
             "source": "the rootless Podman socket in $XDG_RUNTIME_DIR"}
    assert demo["engine"] == found
    assert f"Container engine: podman at unix://{socket_path}" in said and "Ready to deploy" in said

    with Server(database_url, SLIPWAY_DEPLOY_WORKER="1", SLIPWAY_LOG_FORMAT=None, **env) as server:
        first = json.loads(server.log().splitlines()[0])
        assert first["engine"] == found
        [line] = [entry for entry in _log_lines(server) if entry.get("logger") == "slipway.engine"]
        assert line["level"] == "info" and f"podman at unix://{socket_path}" in line["message"]
        assert httpx.get(server.base + "/readyz", timeout=10).json()["checks"]["engine"] == "ok"
        with httpx.Client(base_url=server.base, timeout=30,
                          headers={"Authorization": f"Bearer {demo['apiKey']['key']}"}) as client:
            created = client.post("/api/services", json={
                "name": f"first-hour-{os.getpid()}", "customer_id": demo["customer"]["id"],
                "deploy_method": "template", "template_id": demo["template"]["id"],
                "variables": {"IMAGE": IMAGE, "TITLE": "First hour"}})
            assert created.status_code == 201, created.text
            service_id = created.json()["id"]
            try:
                detail = _until(client, service_id, "running")
                assert "First hour" in httpx.get(detail["url"], timeout=10).text
            finally:
                assert client.delete(f"/api/services/{service_id}").status_code == 204


def test_with_no_engine_anywhere_the_demo_and_the_server_say_so_and_how_to_start_one(database_url, runtime_dir):
    if any(os.path.exists(path) for path in (ROOTFUL_PODMAN, DOCKER_SOCKET)):
        pytest.skip("this machine has an engine socket at its usual place")
    env = dict(NO_ENGINE_SETTING, XDG_RUNTIME_DIR=runtime_dir)
    slipway(database_url, "init")
    demo, said = _demo(database_url, env)
    assert demo["engine"]["url"] is None and "systemctl --user start podman.socket" in demo["engine"]["hint"]
    assert "Container engine: none" in said and "Deploys will fail" in said and "Ready to deploy" not in said
    with Server(database_url, SLIPWAY_LOG_FORMAT=None, **env) as server:
        first = json.loads(server.log().splitlines()[0])
        assert first["engine"]["url"] is None and "systemctl --user start podman.socket" in first["engine"]["hint"]
        [line] = [entry for entry in _log_lines(server) if entry.get("logger") == "slipway.engine"]
        assert line["level"] == "warning" and "systemctl --user start podman.socket" in line["message"]
        assert httpx.get(server.base + "/readyz", timeout=10).json()["checks"]["engine"] == "off"


def test_an_engine_that_does_not_answer_is_said_by_the_demo(database_url):
    slipway(database_url, "init")
    demo, said = _demo(database_url, {"SLIPWAY_RUNTIME_URL": "unix:///run/nope/podman.sock"})
    assert demo["engine"]["url"] == "unix:///run/nope/podman.sock" and demo["images"]["chosen"] == {}
    assert "does not answer its ping" in said and "Ready to deploy" not in said, said
    assert "Deploys are refused (503 engine_unavailable)" in said, said


def test_an_engine_setting_is_never_second_guessed(database_url, runtime_dir):
    """SLIPWAY_RUNTIME_URL set, even empty, wins over any socket there is."""
    import socket

    os.makedirs(os.path.join(runtime_dir, "podman"))
    listening = socket.socket(socket.AF_UNIX)
    listening.bind(os.path.join(runtime_dir, "podman", "podman.sock"))
    try:
        slipway(database_url, "init")
        demo, _ = _demo(database_url, {"XDG_RUNTIME_DIR": runtime_dir, "SLIPWAY_RUNTIME_URL": ""})
        assert demo["engine"]["url"] is None and demo["engine"]["source"] == "SLIPWAY_RUNTIME_URL is empty: no engine"
    finally:
        listening.close()


def _serve_with_stderr_on_a_terminal(database_url, **env) -> str:
    """``slipway serve`` whose stderr is a terminal (a pseudo-terminal), until it answers;
    what it wrote there."""
    main, terminal = pty.openpty()
    port = free_port()
    full = {k: v for k, v in dict(os.environ, SLIPWAY_DATABASE_URL=database_url, SLIPWAY_RUNTIME_URL="",
                                  SLIPWAY_BILLING_INTERVAL="0", SLIPWAY_DEPLOY_WORKER="0", **env).items()
            if v is not None}
    proc = subprocess.Popen([sys.executable, "-m", "app.cli.main", "serve", "--port", str(port)], env=full,
                            stdout=subprocess.DEVNULL, stderr=terminal)
    os.close(terminal)
    written = []

    def read():
        while True:
            try:
                chunk = os.read(main, 4096)
            except OSError:  # the terminal's other end closed
                return
            if not chunk:
                return
            written.append(chunk)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        wait_answering(f"http://127.0.0.1:{port}/healthz", alive=lambda: proc.poll() is None)
    finally:
        proc.terminate()
        proc.wait(timeout=20)
        reader.join(timeout=20)
        os.close(main)
    return b"".join(written).decode()


def test_logs_are_text_on_a_terminal_json_otherwise_and_the_setting_wins(database_url):
    slipway(database_url, "init")
    text = _serve_with_stderr_on_a_terminal(database_url, SLIPWAY_LOG_FORMAT=None)
    lines = [line for line in text.splitlines() if "Application startup complete" in line]
    assert lines and not lines[0].startswith("{") and " INFO " in lines[0], text
    forced = _serve_with_stderr_on_a_terminal(database_url, SLIPWAY_LOG_FORMAT="json")
    started = [line for line in forced.splitlines() if "Application startup complete" in line]
    assert started and json.loads(started[0])["level"] == "info", forced
    with Server(database_url, SLIPWAY_LOG_FORMAT=None) as server:  # stderr is a file
        assert any(entry.get("message") == "Application startup complete." for entry in _log_lines(server))
    with Server(database_url, SLIPWAY_LOG_FORMAT="text") as server:
        assert "INFO    uvicorn.error: Application startup complete." in server.log()
