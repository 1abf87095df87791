"""A real Caddy 2 for tests: ``running_caddy(tmp_path)`` (a context manager) or the
pytest fixture ``caddy`` (tests/conftest.py) start ``/usr/bin/caddy`` (or ``$SLIPWAY_CADDY``)
with its admin API, HTTP and HTTPS on free loopback ports, Caddy's own CA without
installing its root anywhere (``install_trust: false``) and every file of its own under
``tmp_path``; the object yielded has ``admin_url``, ``http_port``, ``https_port`` and
``get(hostname, path="/", https=True)``: an httpx GET to 127.0.0.1 with the Host header
and the TLS server name set to ``hostname`` (certificates not verified). Caddy is
stopped at the end. Without a caddy binary the test is skipped, unless
``SLIPWAY_REQUIRE_CADDY=1`` (CI), where it fails."""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
from pathlib import Path

import httpx
import pytest

from tests.support.http import wait_answering
from tests.support.processes import free_port


def caddy_executable() -> str | None:
    wanted = os.environ.get("SLIPWAY_CADDY") or "/usr/bin/caddy"
    return wanted if os.access(wanted, os.X_OK) else shutil.which("caddy")


def need_caddy() -> str:
    found = caddy_executable()
    if found is None:
        message = "no caddy binary (/usr/bin/caddy, $SLIPWAY_CADDY or on PATH)"
        if os.environ.get("SLIPWAY_REQUIRE_CADDY") == "1":
            pytest.fail(message + " and SLIPWAY_REQUIRE_CADDY=1")
        pytest.skip(message)
    return found


class Caddy:
    def __init__(self, admin_port: int, http_port: int, https_port: int, process, log: Path):
        self.admin_url = f"http://127.0.0.1:{admin_port}"
        self.http_port, self.https_port = http_port, https_port
        self.process, self.log = process, log

    def get(self, hostname: str, path: str = "/", https: bool = True, timeout: float = 10.0) -> httpx.Response:
        scheme, port = ("https", self.https_port) if https else ("http", self.http_port)
        with httpx.Client(verify=False, timeout=timeout) as client:
            return client.get(f"{scheme}://127.0.0.1:{port}{path}", headers={"Host": hostname},
                              extensions={"sni_hostname": hostname} if https else {})

    def config(self):
        return httpx.get(f"{self.admin_url}/config/", timeout=10).json()

    def output(self) -> str:
        return self.log.read_text(errors="replace")[-4000:]


@contextlib.contextmanager
def running_caddy(tmp_path: Path, apps: dict | None = None):
    """Caddy with ``apps`` (the operator's own config, e.g. another server) merged into
    its ``apps``."""
    executable = need_caddy()
    home = tmp_path / "caddy"
    home.mkdir(parents=True, exist_ok=True)
    admin_port, http_port, https_port = free_port(), free_port(), free_port()
    config = {
        "admin": {"listen": f"127.0.0.1:{admin_port}"},
        "storage": {"module": "file_system", "root": str(home / "data")},
        "apps": {"http": {"http_port": http_port, "https_port": https_port},
                 "pki": {"certificate_authorities": {"local": {"install_trust": False}}}},
    }
    for name, value in (apps or {}).items():
        config["apps"][name] = {**config["apps"].get(name, {}), **value}
    (home / "caddy.json").write_text(json.dumps(config))
    env = dict(os.environ, HOME=str(home), XDG_DATA_HOME=str(home / "xdg-data"),
               XDG_CONFIG_HOME=str(home / "xdg-config"))
    log = home / "caddy.log"
    with open(log, "w") as out:
        process = subprocess.Popen([executable, "run", "--config", str(home / "caddy.json")], env=env,
                                   stdout=out, stderr=subprocess.STDOUT)
    caddy = Caddy(admin_port, http_port, https_port, process, log)
    try:
        wait_answering(f"{caddy.admin_url}/config/", alive=lambda: process.poll() is None, seconds=20,
                       said=caddy.output)
        yield caddy
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
