"""The README's two commands' path on a fresh clone: ``make run`` (``slipway init``, the
demo, ``slipway serve``) on a Podman that reaches no registry, with a new HOME (so the
default data directory, ``~/.local/share/slipway``, is a temporary folder's) and nothing
set by hand but where the engine is. The demo finds that
the default images (``docker.io/library/busybox:stable``, of the static-site template's
``IMAGE`` and of the backups' volume helper) cannot be pulled, takes the busybox image the
engine has, and the demo template's service deploys and a backup of it completes. The
operator CLI run from the clone with no setting finds ``make run``'s database.

The clone is the checkout's files (tracked, and new ones not ignored) copied to a folder;
the venv is the one running the tests (``VENV``, and ``STAMP`` a fresh file so that make
installs nothing into it)."""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys

from pathlib import Path

import httpx
import pytest

from tests.support.engine import wait_for
from tests.support.http import wait_answering
from tests.support.panel_server import _until
from tests.support.processes import free_port

ROOT = Path(__file__).resolve().parents[2]
#: what would choose the images, or the database, for the server: none set by hand
NOT_SET = ("SLIPWAY_RUNTIME_HELPER_IMAGE", "SLIPWAY_IMAGE_STATIC", "SLIPWAY_DATABASE_URL", "SLIPWAY_DEPLOY_WORKER",
           "SLIPWAY_SECRET_KEY", "SLIPWAY_SECRET_KEY_FILE", "SLIPWAY_DATA_DIR", "XDG_DATA_HOME", "SLIPWAY_WORK_DIR")


def _fresh_clone(into: Path) -> Path:
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, check=True).stdout.decode().split("\0")
    for name in filter(None, listed):
        source = ROOT / name
        if source.is_file():  # a file deleted in the checkout is not in the clone either
            (into / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, into / name)
    return into


def _documents(text: str) -> list[dict]:
    """The JSON objects ``make run`` printed (init's, the demo's, serve's first line)."""
    decoder, found, at = json.JSONDecoder(), [], 0
    while (at := text.find("{", at)) != -1:
        try:
            value, end = decoder.raw_decode(text, at)
        except ValueError:
            at += 1
            continue
        if isinstance(value, dict):
            found.append(value)
        at = end
    return found


@pytest.mark.runtime
def test_make_run_on_a_fresh_clone_deploys_the_demo_template_and_backs_it_up_with_no_registry(
        tmp_path, runtime_url, engine_ulimits):
    if shutil.which("make") is None:
        pytest.skip("no make on this machine")
    clone = _fresh_clone(tmp_path / "slipway")
    home = tmp_path / "home"
    data = home / ".local" / "share" / "slipway"  # the default data directory of that HOME
    stamp = tmp_path / "installed"
    stamp.touch()
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k not in NOT_SET}
    # the clone's code, with the packages of the venv running the tests
    env.update(HOME=str(home), SLIPWAY_RUNTIME_URL=runtime_url, SLIPWAY_RUNTIME_ULIMITS=engine_ulimits, PYTHONPATH=str(clone),
               SLIPWAY_BILLING_INTERVAL="0")
    venv = Path(sys.executable).parent.parent
    output = open(tmp_path / "make-run.log", "w+")
    proc = subprocess.Popen(["make", "--no-print-directory", "run", f"VENV={venv}", f"STAMP={stamp}",
                             "HOST=127.0.0.1", f"PORT={port}"],
                            cwd=clone, env=env, stdout=output, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)

    def said() -> str:
        output.flush()
        return (tmp_path / "make-run.log").read_text()

    base = f"http://127.0.0.1:{port}"
    try:
        wait_answering(base + "/healthz", seconds=120, alive=lambda: proc.poll() is None,
                       said=lambda: "make run did not serve: " + said())
        text = said()
        [demo] = [d for d in _documents(text) if "apiKey" in d]
        assert demo["images"]["chosen"] == {"SLIPWAY_IMAGE_STATIC": "localhost/busybox:latest",
                                            "SLIPWAY_RUNTIME_HELPER_IMAGE": "localhost/busybox:latest"}, text
        assert "using localhost/busybox:latest, which the engine has" in text, text
        assert (data / "slipway.db").exists() and (data / "engine-images.env").exists()
        assert not (clone / "slipway.db").exists()
        # the operator CLI, from the clone and with no setting, finds make run's database
        listed = subprocess.run([str(venv / "bin" / "python"), "-m", "app.cli.main", "apikey", "list"], cwd=clone,
                                env=env, capture_output=True, text=True, timeout=60)
        assert listed.returncode == 0, listed.stdout + listed.stderr
        assert [k["name"] for k in json.loads(listed.stdout)["apiKeys"]] == ["make run (demo admin)"], listed.stdout
        with httpx.Client(base_url=base, timeout=30,
                          headers={"Authorization": f"Bearer {demo['apiKey']['key']}"}) as client:
            created = client.post("/api/services", json={
                "name": f"demo-{os.getpid()}", "customer_id": demo["customer"]["id"],
                "deploy_method": "template", "template_id": demo["template"]["id"]})
            assert created.status_code == 201, created.text
            service_id = created.json()["id"]
            try:
                detail = _until(client, service_id, "running")
                assert detail["variables"]["IMAGE"] == "localhost/busybox:latest"
                assert "It works" in httpx.get(detail["url"], timeout=10).text
                started = client.post(f"/api/services/{service_id}/backups", json={})
                assert started.status_code == 202, started.text
                path = f"/api/services/{service_id}/backups/{started.json()['id']}"

                def done():
                    backup = client.get(path).json()
                    assert backup["status"] != "failed", backup
                    return backup if backup["status"] == "completed" else None

                backup = wait_for(done, "the demo service's backup completed", timeout=120)
                assert backup["size_bytes"] > 0 and backup["volumes"], backup
            finally:
                assert client.delete(f"/api/services/{service_id}").status_code == 204
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)  # make and the server it started
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=30)
        output.close()

