"""Deploy jobs' work folders (the clone, git's home, the build context) are the server
user's only (docs/security.md): folders 0700, files 0600 (an executable of the
repository 0700), whatever the umask, while the built image keeps the modes git records.
A real server (started under umask 022, its work folder made 0755 beforehand) deploys a
real repository on a real engine, once through the Podman client and once through the
Docker client; the job is held at its health check (the repository's executable ``app.sh``, which
passes once a gate file is on a volume) so its
work folder can be looked at while it exists."""
from __future__ import annotations

import os
import time

import pytest

from ports.runtime import ContainerSpec
from tests.support.git_repos import BUSYBOX, _create, git, repository
from tests.support.panel_server import _until
from tests.support.files import modes as file_modes

pytestmark = pytest.mark.runtime

COMPOSE = """services:
  app:
    build: .
    volumes: ["gate:/gate"]
    healthcheck:
      test: ["CMD", "/app/app.sh"]
      interval: 1s
      timeout: 5s
      retries: 1000
volumes:
  gate: {}
"""
CONTAINERFILE = f"""FROM {BUSYBOX}
COPY . /app/
CMD ["sh", "-c", "ls -ln /app > /gate/modes; exec sleep 3600"]
"""


def _job_folder(work, seconds: float = 120):
    """The job's work folder, once its clone is there."""
    deadline = time.monotonic() + seconds
    while True:
        folders = [f for f in (os.listdir(work) if work.exists() else ()) if (work / f / "src" / "app.sh").exists()]
        if folders:
            return work / folders[0]
        assert time.monotonic() < deadline, "the job's clone appears"
        time.sleep(0.05)


def test_a_jobs_work_folder_is_the_server_users_only(start_panel, tmp_path, umask_022):
    work = tmp_path / "work"
    work.mkdir(mode=0o755)
    os.chmod(work, 0o755)
    client, customer, made = start_panel()
    repo = tmp_path / "repo"
    url, _ = repository(repo, {"compose.yaml": COMPOSE, "Containerfile": CONTAINERFILE,
                               "index.html": "<h1>private</h1>\n", "app.sh": "#!/bin/sh\n[ -f /gate/open ]\n"})
    (repo / "lib").mkdir()
    (repo / "lib" / "data.txt").write_text("x\n")
    os.chmod(repo / "app.sh", 0o755)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "an executable and a folder")
    service_id = _create(client, customer, made, "private", deploy_method="git", git_url=url)
    folder = _job_folder(work)
    engine = start_panel.engine
    deadline = time.monotonic() + 120
    while not engine.containers(service_id):  # built and started: the job waits for its health now
        assert time.monotonic() < deadline, "the service's container starts"
        time.sleep(0.1)
    modes = file_modes(work)
    job = folder.name
    assert modes["."] == 0o700 and modes[job] == 0o700, modes
    assert {path: mode for path, mode in modes.items() if path.startswith(job + os.sep)} == {
        os.path.join(job, "src"): 0o700,
        os.path.join(job, "src", "compose.yaml"): 0o600,
        os.path.join(job, "src", "Containerfile"): 0o600,
        os.path.join(job, "src", "index.html"): 0o600,
        os.path.join(job, "src", "app.sh"): 0o700,  # an executable keeps its x bit, for the owner only
        os.path.join(job, "src", "lib"): 0o700,
        os.path.join(job, "src", "lib", "data.txt"): 0o600,
        os.path.join(job, "git-home"): 0o700,
    }, modes
    # open the gate: the health check passes and the deploy ends
    gate = ((f"slw-{service_id}-gate", "/gate"),)
    _once(engine, ContainerSpec(name=f"{service_id}-open", image=BUSYBOX, labels={"slipway.test": "private"},
                                volumes=gate, command=("sh", "-c", "touch /gate/open")))
    _until(client, service_id, "running", seconds=120)
    # the image has the modes git records (those of a checkout under umask 022), not the folder's
    listing = _once(engine, ContainerSpec(name=f"{service_id}-read", image=BUSYBOX, labels={"slipway.test": "private"},
                                          volumes=gate, command=("sh", "-c", "cat /gate/modes")))
    modes = {line.split()[-1]: line.split()[0] for line in listing.splitlines() if line[:1] in "-d"}
    assert (modes["app.sh"], modes["index.html"], modes["lib"]) == ("-rwxr-xr-x", "-rw-r--r--", "drwxr-xr-x"), listing


def _once(engine, spec) -> str:
    """Run ``spec`` to its end; its output."""
    container = engine.run(spec)
    try:
        deadline = time.monotonic() + 60
        while engine.inspect(container).running:
            assert time.monotonic() < deadline, spec.command
            time.sleep(0.1)
        return "\n".join(line.message for line in engine.logs(container, tail=None))
    finally:
        engine.remove_container(container)
