"""The README's first command, `make run`, followed in a fresh copy of the checkout with
nothing set by hand (a new HOME, no SLIPWAY_DATABASE_URL nor SLIPWAY_DATA_DIR): it
serves, and the operator CLI run from that checkout finds the same database with no
setting either. The venv is this checkout's (its stamp matches: nothing is installed)."""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.http import wait_answering
from tests.support.processes import free_port

REPO = Path(__file__).resolve().parents[2]
#: the venv these tests run in (`make test`'s .venv): `make run` given it installs nothing
VENV = Path(sys.prefix)
#: the settings that would name a database: unset, so that `make run` and the CLI use the default
UNSET = ("SLIPWAY_DATABASE_URL", "SLIPWAY_DATA_DIR", "XDG_DATA_HOME", "SLIPWAY_WORK_DIR", "SLIPWAY_SECRET_KEY")


def _fresh_copy(target: Path) -> Path:
    """The checkout's files as a clone has them (tracked and new, not ignored), mtimes kept."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                            capture_output=True, check=True).stdout.decode().split("\0")
    for name in filter(None, listed):
        source = REPO / name
        if source.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)
    return target


@pytest.fixture
def checkout(tmp_path):
    if shutil.which("make") is None or not (REPO / ".git").exists():
        pytest.skip("needs make and a git checkout")
    return _fresh_copy(tmp_path / "slipway"), tmp_path / "home"


def test_make_run_serves_and_the_cli_finds_its_database_from_the_checkout(checkout, engine_ulimits):
    clone, home = checkout
    env = {k: v for k, v in os.environ.items() if k not in UNSET}
    env.update(HOME=str(home), SLIPWAY_RUNTIME_ULIMITS=engine_ulimits)
    port = free_port()
    log = open(clone.parent / "make-run.log", "w+")
    make = subprocess.Popen(["make", "-s", "run", f"VENV={VENV}", "HOST=127.0.0.1", f"PORT={port}"], cwd=clone,
                            env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        def said():
            log.flush()
            return (clone.parent / "make-run.log").read_text()

        answered = wait_answering(f"http://127.0.0.1:{port}/v1/openapi.yaml", alive=lambda: make.poll() is None,
                                  seconds=90, said=said)
        assert answered.status_code == 200, said()
        database = home / ".local" / "share" / "slipway" / "slipway.db"
        assert database.is_file() and not (clone / "slipway.db").exists()
        listed = subprocess.run([str(VENV / "bin" / "slipway"), "apikey", "list"], cwd=clone, env=env,
                                capture_output=True, text=True, timeout=60)
        assert listed.returncode == 0, listed.stdout + listed.stderr
        names = [key["name"] for key in json.loads(listed.stdout)["apiKeys"]]
        assert names == ["make run (demo admin)"], listed.stdout
    finally:
        os.killpg(make.pid, signal.SIGTERM)
        try:
            make.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(make.pid, signal.SIGKILL)
            make.wait()
        log.close()
